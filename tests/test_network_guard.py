"""No test can pass by downloading: the network is refused here and in subprocesses."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import tiktoken

from tests.support.network_guard.sitecustomize import NetworkRefusedError


def test_network_guard_refuses_a_connection_in_the_test_process() -> None:
    # OSError, not the imported class: a pytest-xdist worker installs the guard from the
    # same file imported as `sitecustomize`, a second module object with its own class.
    with pytest.raises(OSError, match="a test tried to reach the network") as refused:
        socket.create_connection(("example.com", 443), timeout=1)
    assert type(refused.value).__name__ == NetworkRefusedError.__name__


def test_network_guard_refuses_a_tiktoken_download() -> None:
    # r50k_base is never built from the offline vocabularies, so tiktoken would fetch it.
    with pytest.raises(Exception, match="a test tried to reach the network"):
        tiktoken.get_encoding("r50k_base")


def test_network_guard_refuses_a_connection_in_a_subprocess() -> None:
    code = "import socket; socket.create_connection(('93.184.215.14', 443), timeout=1)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert done.returncode != 0
    assert "a test tried to reach the network" in done.stderr


def test_network_guard_leaves_loopback_open() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=1):
            pass
