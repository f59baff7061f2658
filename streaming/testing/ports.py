"""Free local ports for tests and examples that start servers of their own."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that no process listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_pair(attempts: int = 200) -> int:
    """A free port whose next port is free too: a local broker's client port N and its
    controller's N + 1."""
    for _ in range(attempts):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if port >= 65535:
                continue
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise OSError(f"no two consecutive free ports in {attempts} attempts")
