"""Process helpers shared by the probe and the twin, which both start and must stop processes."""

from __future__ import annotations

import contextlib
import signal
import socket
from typing import Iterator

# The signals that end a command: Ctrl-C, `kill`, and a closed terminal or SSH session.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# What the command's cleanup stopped or removed ("stopped the probe's 2 processes"), what it
# could not, and what it leaves running on purpose (the local cluster `down` stops), in order, for
# the message on Ctrl-C (cli.main): all empty when it started nothing.
_cleaned: list[str] = []
_left: list[str] = []
_kept: list[str] = []


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C's KeyboardInterrupt so that `finally` cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def free_port() -> int:
    """A TCP port free on loopback right now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt (Stopped), as SIGINT already is, so that
    `finally` cleanup also runs when we are terminated or our terminal goes away."""
    def handler(signum, frame):
        raise Stopped(signum)
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)


sigterm_as_interrupt = signals_as_interrupt  # its former name (the twin's runner)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold the stop signals while cleanup runs, so a second Ctrl-C cannot cut it short; one that
    came meanwhile is delivered when it ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def cleaned(what: str) -> None:
    """Record what cleanup stopped or removed ("removed network namespaces a, b"), for the message
    the command ends with if interrupted."""
    if what not in _cleaned:
        _cleaned.append(what)


def left_behind(what: str) -> None:
    """Record what cleanup could not remove, and how to ("network namespace a: `ip netns del a`")."""
    if what not in _left:
        _left.append(what)


def kept(what: str) -> None:
    """Record what is left running on purpose, found running, and how to stop it ("the local
    cluster (`dynamo-lab down S --local` stops it)")."""
    if what not in _kept:
        _kept.append(what)


def forget() -> None:
    """Start a command with nothing recorded (cli.main; tests run many commands in one process)."""
    _cleaned.clear()
    _left.clear()
    _kept.clear()


def interrupted_message() -> str:
    """What the command did about what it had started, said after Ctrl-C (or SIGTERM, SIGHUP)."""
    if not (_cleaned or _left or _kept):
        return "interrupted; it had started nothing, so nothing was left running"
    done = f"; {'; '.join(_cleaned)}" if _cleaned else ""
    kept_ = f"; still running, as it should: {'; '.join(_kept)}" if _kept else ""
    left = (f"; NOT removed: {'; '.join(_left)}" if _left else
            f"; nothing {'else ' if _kept else ''}it started is left running")
    return f"interrupted{done}{kept_}{left}"
