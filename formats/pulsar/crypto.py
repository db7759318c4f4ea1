"""End-to-end encrypted Pulsar messages: what the client does, in both directions.

The producer compresses, then encrypts the payload with AES-256-GCM (a fresh 12-byte IV in
``encryption_param``, the 16-byte tag appended to the ciphertext, no associated data), and
wraps the AES data key with each recipient's RSA public key using RSA-OAEP (SHA-1, MGF1 SHA-1)
into ``encryption_keys[i].value``. :class:`Decryptor` holds an RSA private key and reverses it.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from formats.pulsar.errors import DecryptionError, MessageEncodeError
from formats.pulsar.metadata import EncryptionKey, MessageMetadata

IV_LEN = 12
DATA_KEY_LEN = 32
ALGORITHM = "AES-256-GCM"  # not written by the clients we measured; informational


def _oaep() -> padding.OAEP:
    return padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)


class Decryptor:
    """Decrypts payloads whose data key was wrapped for this RSA private key."""

    def __init__(self, private_key_pem: bytes, password: bytes | None = None) -> None:
        try:
            key = serialization.load_pem_private_key(private_key_pem, password=password)
        except (ValueError, TypeError) as exc:
            raise DecryptionError(f"not a usable PEM private key: {exc}") from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise DecryptionError("only RSA private keys are supported")
        self._key = key
        self._data_keys: dict[bytes, bytes] = {}

    def _data_key(self, wrapped: bytes) -> bytes | None:
        known = self._data_keys.get(wrapped)
        if known is not None:
            return known
        try:
            data_key = self._key.decrypt(wrapped, _oaep())
        except ValueError:
            return None
        if len(self._data_keys) > 64:
            self._data_keys.clear()
        self._data_keys[wrapped] = data_key
        return data_key

    def decrypt(self, md: MessageMetadata, payload: bytes) -> bytes:
        """The plaintext (still compressed) of an encrypted payload."""
        iv = md.encryption_param
        if iv is None or len(iv) != IV_LEN:
            raise DecryptionError("encrypted message without a 12-byte encryption_param (IV)")
        for wrapped in md.encryption_keys:
            data_key = self._data_key(wrapped.value)
            if data_key is None or len(data_key) not in (16, 24, 32):
                continue
            try:
                return AESGCM(data_key).decrypt(iv, payload, None)
            except InvalidTag:
                raise DecryptionError("AES-GCM tag mismatch: corrupt ciphertext") from None
        names = ", ".join(k.key for k in md.encryption_keys) or "none"
        raise DecryptionError(f"no data key opens with this private key (keys: {names})")


class Encryptor:
    """The producer side (for tests and ``topics produce``): one data key per instance."""

    def __init__(self, public_key_pem: bytes, key_name: str) -> None:
        try:
            key = serialization.load_pem_public_key(public_key_pem)
        except (ValueError, TypeError) as exc:
            raise MessageEncodeError(f"not a usable PEM public key: {exc}") from None
        if not isinstance(key, rsa.RSAPublicKey):
            raise MessageEncodeError("only RSA public keys are supported")
        self._data_key = AESGCM.generate_key(bit_length=DATA_KEY_LEN * 8)
        self.key = EncryptionKey(key_name, key.encrypt(self._data_key, _oaep()))

    def encrypt(self, payload: bytes) -> tuple[bytes, bytes]:
        """``(iv, ciphertext with its tag)``."""
        iv = os.urandom(IV_LEN)
        return iv, AESGCM(self._data_key).encrypt(iv, payload, None)


def generate_rsa_pem(bits: int = 2048) -> tuple[bytes, bytes]:
    """A fresh ``(private PEM, public PEM)`` pair (tests, demo)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public
