"""Forwarding connections to the API server across the network namespace's edge: the outer accepts on
127.0.0.1:PORT and connects to the inner's Unix socket, the inner accepts there and connects to the
API server on the namespace's loopback. Bytes are copied both ways, a thread per connection.

Standard library only.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from pathlib import Path
from typing import Callable

from dynamo_lab.local_cluster.state import APISERVER_PORT, StateDir


def _forward(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(65536)
                if not data:
                    return
                key.data.sendall(data)
    except OSError:
        return
    finally:
        sel.close()
        a.close()
        b.close()


def serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """In a daemon thread: each connection `listener` accepts forwarded to a new `connect()` (one it
    cannot make is closed), until the listener is closed."""
    def loop():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = connect()
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_forward, args=(conn, upstream), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def unix(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def serve_socket(sd: StateDir) -> None:
    """The inner's side: the state directory's Unix socket (its owner's only), to the API server."""
    with contextlib.suppress(FileNotFoundError):
        sd.socket.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sd.socket))
    sd.socket.chmod(0o600)
    listener.listen(64)
    serve(listener, lambda: socket.create_connection(("127.0.0.1", APISERVER_PORT), timeout=10))
