"""The adapter over Pulumi's private runtime: it leaves no event loop open behind a run.

An unclosed loop of the SDK's worker threads, garbage-collected at interpreter exit, printed
"Exception ignored in BaseEventLoop.__del__ ... Invalid file descriptor: -1" after about one
successful `render` in 20.
"""

from __future__ import annotations

import asyncio
import gc

import pytest

from infra.errors import ConfigError
from tests.helpers import run_stack


def _open_loops() -> list[asyncio.AbstractEventLoop]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, asyncio.BaseEventLoop) and not o.is_closed()]


def test_a_run_closes_every_loop_it_or_the_sdk_opened():
    before = set(map(id, _open_loops()))
    for _ in range(3):
        run_stack("same-server")
    assert [loop for loop in _open_loops() if id(loop) not in before] == []


def test_a_rejected_run_closes_its_loops_too():
    before = set(map(id, _open_loops()))
    with pytest.raises(ConfigError):
        run_stack("same-server", lambda c: c["workers"][0].update(replicas=-1))
    assert [loop for loop in _open_loops() if id(loop) not in before] == []
