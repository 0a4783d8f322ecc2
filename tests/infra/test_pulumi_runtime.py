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


def test_a_run_leaves_the_sdks_source_positions_as_it_found_them():
    """Runs under mocks skip the SDK's source positions (no mock reads them); a real program's run in
    the same process, after a rendered or a rejected stack, still gets them, and the pinned SDK still
    has the function the skipping replaces (were it renamed, runs would pay for the positions again)."""
    from pulumi.runtime import resource

    sdk_own = resource._get_stack_trace
    run_stack("kv-routing")
    with pytest.raises(ConfigError):
        run_stack("kv-routing", lambda c: c["workers"][0].update(replicas=-1))
    assert resource._get_stack_trace is sdk_own
    assert sdk_own.__module__ == "pulumi.runtime.resource"
