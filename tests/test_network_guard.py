import socket

import pytest


def test_outside_address_is_refused() -> None:
    """A connection to a non-loopback address fails inside the test suite."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(RuntimeError, match="must not reach the network"):
            s.connect(("192.0.2.1", 80))
    finally:
        s.close()


def test_loopback_is_allowed() -> None:
    """Loopback connections go through (servers started by tests listen there)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        client.connect(server.getsockname())
        conn, _ = server.accept()
        conn.close()
    finally:
        client.close()
        server.close()
