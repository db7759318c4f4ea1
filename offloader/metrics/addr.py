"""``--metrics-addr HOST:PORT`` (and ``metrics_addr`` in offloader.toml), parsed and checked.

``127.0.0.1:9108``, ``[::1]:9108``, ``:9108`` (every interface) and port 0 (a free port the
system picks; the service prints the one it bound) are accepted; anything else is a
:class:`~offloader.errors.ConfigError` saying what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from offloader.errors import ConfigError

__all__ = ["MetricsAddress", "parse_metrics_addr"]


@dataclass(frozen=True)
class MetricsAddress:
    """Where the metrics endpoint listens (``port`` 0: any free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _check_host(value: str, host: str) -> None:
    if any(c.isspace() or c in "/?#@[]" for c in host):
        raise ConfigError(f"{value!r}: {host!r} is not a host name or address")


def parse_metrics_addr(text: str) -> MetricsAddress:
    """``HOST:PORT`` -> :class:`MetricsAddress`; an empty host means every interface."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the metrics address is empty; use HOST:PORT, e.g. 127.0.0.1:9108")
    value = text.strip()
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or not rest.startswith(":") or not host:
            raise ConfigError(f"{value!r} is not HOST:PORT (an IPv6 host is [::1]:9108)")
        port_text = rest[1:]
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise ConfigError(f"{value!r} has no port; use HOST:PORT, e.g. 127.0.0.1:9108")
        _check_host(value, host)
        if ":" in host:
            raise ConfigError(f"{value!r}: write an IPv6 host in brackets, e.g. [::1]:9108")
        host = host or "0.0.0.0"
    _check_host(value, host)
    if not port_text.isdigit():
        raise ConfigError(f"{value!r}: the port {port_text!r} is not a number")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(f"{value!r}: the port {port} is above 65535")
    return MetricsAddress(host, port)
