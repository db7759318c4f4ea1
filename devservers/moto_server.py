"""moto's ThreadedMotoServer on a free loopback port (real HTTP, not the in-process mock).

The minimum multipart part size is lowered (``S3_UPLOAD_PART_MIN_SIZE``) so tests can use small
blocks; it must be set before moto is imported, which :func:`start_moto` does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from devservers.endpoint import S3Endpoint

#: smallest part size the test server accepts (tests use blocks of a few KiB)
TEST_PART_MIN_SIZE = 1024


@contextmanager
def start_moto() -> Iterator[S3Endpoint]:
    os.environ.setdefault("S3_UPLOAD_PART_MIN_SIZE", str(TEST_PART_MIN_SIZE))
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Endpoint(
            name="moto", url=f"http://{host}:{port}", access_key="testing", secret_key="testing"
        )
    finally:
        server.stop()
