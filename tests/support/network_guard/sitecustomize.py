"""Refuse network connections, so that no test can pass by downloading.

CI reaches the package registries only, so anything fetched at run time (a tiktoken
vocabulary, a hub model, a framework's default tokenizer) would fail there. The guard
makes it fail here too, loudly. tests/conftest.py installs it in the test process and
puts this folder on ``PYTHONPATH``, where Python imports this module as
``sitecustomize`` in every subprocess a test starts. Loopback stays open for servers a
test starts itself.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class NetworkRefusedError(OSError):
    """A test tried to reach the network."""


def _local(host: object) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: object) -> NetworkRefusedError:
    return NetworkRefusedError(
        f"a test tried to reach the network ({what!r}); nothing may download at run time: "
        "use the offline vocabularies (the 'offline' extra) or a local stand-in"
    )


def install() -> None:
    """Patch the socket module so only loopback and local sockets can connect."""
    if getattr(socket.socket.connect, "_ctxbudget_guard", False):
        return
    connect, connect_ex, getaddrinfo = (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.getaddrinfo,
    )

    def check(sock: socket.socket, address: Any) -> None:
        inet = sock.family in (socket.AF_INET, socket.AF_INET6)
        if inet and not (isinstance(address, tuple) and _local(address[0])):
            raise _refuse(address)

    def guarded_connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local(host):
            raise _refuse(host)
        return getaddrinfo(host, *args, **kwargs)

    guarded_connect._ctxbudget_guard = True  # type: ignore[attr-defined]
    socket.socket.connect = guarded_connect  # type: ignore[method-assign, assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign, assignment]
    socket.getaddrinfo = guarded_getaddrinfo


install()
