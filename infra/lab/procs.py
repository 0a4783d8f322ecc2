"""Process helpers shared by the probe and the twin, which both start and must stop processes."""

from __future__ import annotations

import contextlib
import signal
import socket
from typing import Iterator


def free_port() -> int:
    """A TCP port free on loopback right now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt, so `finally` cleanup also runs when we are terminated."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
