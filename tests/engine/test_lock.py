"""The engine tier's lock, in the fast tier (no install): every package of .venv-engine pinned with its
hashes, the pins requirements.in names kept, nothing overrides.txt leaves out slipped back in."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$")


def _names(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes), from requirements.txt."""
    pins: dict[str, tuple[str, int]] = {}
    current = None
    for line in (HERE / "requirements.txt").read_text().splitlines():
        if line.startswith((" ", "#")) or not line:
            if current and line.strip().startswith("--hash=sha256:"):
                version, hashes = pins[current]
                pins[current] = (version, hashes + 1)
            continue
        match = PIN.match(line)
        assert match, f"not an exact, hash-checked pin: {line!r}"
        current = _norm(match[1])
        pins[current] = (match[2], 0)
    return pins


def test_every_locked_package_is_pinned_with_hashes():
    lock = _lock()
    assert len(lock) > 100  # vLLM alone brings about 150
    assert {name for name, (_, hashes) in lock.items() if hashes == 0} == set()


def test_the_lock_keeps_the_pins_requirements_in_names():
    wanted = {_norm(n.split("==")[0]): n.split("==")[1] for n in _names(HERE / "requirements.in")}
    lock = _lock()
    assert {n: lock.get(n, ("missing",))[0] for n in wanted} == wanted
    assert {n: lock[n][0] for n in ("vllm", "ai-dynamo", "ai-dynamo-runtime", "torch")} == {
        "vllm": "0.31.0", "ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "torch": "2.13.0"}


def test_nothing_overrides_txt_leaves_out_is_locked():
    left_out = {_norm(n.split(";")[0].strip()) for n in _names(HERE / "overrides.txt")}
    assert left_out and left_out.isdisjoint(_lock())
