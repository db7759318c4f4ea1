"""A fake Pulsar broker on 127.0.0.1: just enough of the binary protocol for the official
client to create producers and send messages, recording each SEND's bytes (what a broker stores
as the entry). Its BaseCommand codec is our own, on formats.protowire.

Frames: ``total_size u32 | command_size u32 | BaseCommand``; a SEND is followed by the entry
(``0x0e01 | crc32c | metadata_size | MessageMetadata | payload``) up to total_size.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from formats.protowire import LENGTH_DELIMITED, field_bytes, field_varint, iter_fields

CONNECT, CONNECTED, PRODUCER, SEND, SEND_RECEIPT = 2, 3, 5, 6, 7
SUCCESS, ERROR, CLOSE_PRODUCER, CLOSE_CONSUMER, PRODUCER_SUCCESS, PING, PONG = (
    13,
    14,
    15,
    16,
    17,
    18,
    19,
)
PARTITIONED_METADATA, PARTITIONED_METADATA_RESPONSE, LOOKUP, LOOKUP_RESPONSE = 21, 22, 23, 24
GET_OR_CREATE_SCHEMA, GET_OR_CREATE_SCHEMA_RESPONSE = 39, 40


def _fields(buf: bytes | memoryview) -> dict[int, Any]:
    """field number -> last value (bytes for length-delimited fields)."""
    out: dict[int, Any] = {}
    for number, wire, value, _ in iter_fields(memoryview(buf)):
        out[number] = bytes(value) if wire == LENGTH_DELIMITED else value  # type: ignore[arg-type]
    return out


def _command(kind: int, body: bytes) -> bytes:
    cmd = field_varint(1, kind) + field_bytes(kind, body)
    return (len(cmd) + 4).to_bytes(4, "big") + len(cmd).to_bytes(4, "big") + cmd


@dataclass
class Sent:
    """One SEND: the producer's topic and name, the command's fields and the entry bytes."""

    topic: str
    producer_name: str
    sequence_id: int
    num_messages: int
    entry: bytes


@dataclass
class _Producer:
    topic: str
    name: str
    schema: bytes | None


@dataclass
class FakeBroker:
    """``with FakeBroker(max_message_size=...) as broker: ... broker.url``."""

    max_message_size: int = 5 * 1024 * 1024
    sent: list[Sent] = field(default_factory=list)
    schemas: dict[str, bytes] = field(default_factory=dict)
    commands: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self.url = f"pulsar://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._entry_ids: dict[str, int] = {}
        self._names = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> FakeBroker:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        producers: dict[int, _Producer] = {}
        with conn:
            reader = conn.makefile("rb")
            while True:
                head = reader.read(4)
                if len(head) < 4:
                    return
                frame = reader.read(int.from_bytes(head, "big"))
                size = int.from_bytes(frame[:4], "big")
                base = _fields(frame[4 : 4 + size])
                kind = base[1]
                body = _fields(base.get(kind, b""))
                self.commands.append(kind)
                reply = self._handle(kind, body, producers, frame[4 + size :])
                if reply:
                    conn.sendall(reply)

    def _handle(
        self, kind: int, body: dict[int, Any], producers: dict[int, _Producer], rest: bytes
    ) -> bytes | None:
        if kind == CONNECT:
            version = body.get(4, 20)
            return _command(
                CONNECTED,
                field_bytes(1, b"fake-broker")
                + field_varint(2, version)
                + field_varint(3, self.max_message_size),
            )
        if kind == PARTITIONED_METADATA:
            return _command(
                PARTITIONED_METADATA_RESPONSE,
                field_varint(1, 0) + field_varint(2, body[2]) + field_varint(3, 0),
            )
        if kind == LOOKUP:
            return _command(
                LOOKUP_RESPONSE,
                field_bytes(1, self.url.encode())
                + field_varint(3, 1)  # Connect
                + field_varint(4, body[2])
                + field_varint(5, 1),
            )
        if kind == PRODUCER:
            topic = body[1].decode()
            with self._lock:
                self._names += 1
                name = body[4].decode() if 4 in body else f"fake-{self._names}"
            schema = body.get(7)
            producers[body[2]] = _Producer(topic, name, schema)
            reply = field_varint(1, body[3]) + field_bytes(2, name.encode())
            if schema is not None:
                self.schemas[topic] = schema
                reply += field_bytes(4, (0).to_bytes(8, "big"))
            return _command(PRODUCER_SUCCESS, reply)
        if kind == SEND:
            producer = producers[body[1]]
            with self._lock:
                entry_id = self._entry_ids.get(producer.topic, 0)
                self._entry_ids[producer.topic] = entry_id + 1
                self.sent.append(
                    Sent(producer.topic, producer.name, body[2], body.get(3, 1), bytes(rest))
                )
            message_id = field_varint(1, 1) + field_varint(2, entry_id)
            reply = field_varint(1, body[1]) + field_varint(2, body[2])
            reply += field_bytes(3, message_id)
            if 6 in body:
                reply += field_varint(4, body[6])
            return _command(SEND_RECEIPT, reply)
        if kind in (CLOSE_PRODUCER, CLOSE_CONSUMER):
            return _command(SUCCESS, field_varint(1, body[2]))
        if kind == PING:
            return _command(PONG, b"")
        if kind == GET_OR_CREATE_SCHEMA:
            return _command(
                GET_OR_CREATE_SCHEMA_RESPONSE,
                field_varint(1, body[1]) + field_bytes(4, (0).to_bytes(8, "big")),
            )
        return None  # PONG and anything else: no answer
