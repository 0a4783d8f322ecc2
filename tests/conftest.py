"""Fixtures shared by every test module (helpers live in tests/helpers.py)."""

from __future__ import annotations

import gc

import pytest

from tests.helpers import STACKS


@pytest.fixture(params=STACKS)
def stack(request) -> str:
    """Each shipped stack in turn."""
    return request.param


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """The session's objects collected once, then frozen: pytest's unraisable-exception check ends each
    process with five full collections (_pytest/unraisableexception.py, gc_collect_harder), each a walk
    of every object the tests left alive (the shared renders and simulations among them), about a
    second apiece in a worker. The one collection here runs every finalizer the check waits for; the
    objects left are alive, so freezing them takes nothing from it, and what a finalizer makes after
    this is still collected, five times."""
    gc.collect()
    gc.freeze()
