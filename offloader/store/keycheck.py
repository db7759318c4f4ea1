"""Object-key validation shared by every ObjectStore backend.

A key is a ``/``-separated relative path. Every backend refuses the same keys, so that a key
that works on the local store works on S3 and the other way round, and so that no key can
leave the store's root: not on the local filesystem (``..``, absolute paths), and not on S3 either,
where an HTTP server or proxy that normalizes ``/prefix/../x`` would otherwise let a key escape
the configured prefix.
"""

from __future__ import annotations

from offloader.errors import ConfigError, InvalidStoreKey

__all__ = ["MAX_KEY_BYTES", "check_key", "key_prefix"]

#: S3's limit on the length of a whole key, in UTF-8 bytes
MAX_KEY_BYTES = 1024


def check_key(key: str) -> str:
    """Return ``key`` unchanged if it is a valid object key, else raise ``InvalidStoreKey``.

    Refused: empty keys, absolute paths, empty segments (``a//b``, trailing ``/``), ``.`` and
    ``..`` segments, NUL and other control characters, backslashes, and keys longer than
    :data:`MAX_KEY_BYTES` UTF-8 bytes.
    """
    if not isinstance(key, str):
        raise InvalidStoreKey(f"object key must be a string, not {type(key).__name__}")
    if not key:
        raise InvalidStoreKey("object key is empty")
    shown = repr(key[:200])
    if key.startswith("/"):
        raise InvalidStoreKey(f"object key {shown} is absolute")
    if "\\" in key:
        raise InvalidStoreKey(f"object key {shown} contains a backslash")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        raise InvalidStoreKey(f"object key {shown} contains a control character")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidStoreKey(f"object key {shown} is not valid UTF-8") from exc
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidStoreKey(f"object key {shown}... is longer than {MAX_KEY_BYTES} bytes")
    for segment in key.split("/"):
        if segment == "":
            raise InvalidStoreKey(f"object key {shown} has an empty path segment")
        if segment in (".", ".."):
            raise InvalidStoreKey(f"object key {shown} has a {segment!r} path segment")
    return key


def key_prefix(prefix: str, service: str) -> str:
    """A store URL's key prefix as the backends keep it: ``""`` or a valid key ending with
    ``/``; an invalid one is a ``ConfigError`` naming ``service`` (``S3``, ``GCS``, ``Azure``)."""
    prefix = prefix.strip("/")
    if not prefix:
        return ""
    try:
        check_key(prefix)
    except InvalidStoreKey as exc:
        raise ConfigError(f"invalid {service} key prefix: {exc}", setting="store_url") from None
    return f"{prefix}/"
