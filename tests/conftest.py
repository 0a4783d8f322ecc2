"""Fixtures shared by every test module (helpers live in tests/helpers.py)."""

from __future__ import annotations

import gc

import pytest
from hypothesis import settings

from infra import catalogue

# Nothing here imports tests.helpers (the lab's command line, the config schema, the plan): pytest
# imports this file in xdist's controller too, which runs no test, and there that import was about
# 0.25 s of CPU a run spent for nothing.

# The fast tier's hypothesis profile (dev.py FAST_TIER: --hypothesis-profile=fast): a quarter of each
# property's examples (25, against hypothesis's 100), by hypothesis's own default for the tests that
# set none and by tests.helpers.examples for those that set their count. The slow tier runs every
# property test again without it, at the full count (dev.py SLOW_TIER), so each CI run still draws
# them all.
FAST_PROFILE_EXAMPLES = 25
settings.register_profile("fast", max_examples=FAST_PROFILE_EXAMPLES)


@pytest.fixture(params=list(catalogue.SHIPPED_STACKS))
def stack(request) -> str:
    """Each shipped stack in turn (tests.helpers.STACKS)."""
    return request.param


def pytest_collection_finish(session):
    """What collection imported (pulumi, grpc, pydantic's models, hypothesis, every test module)
    frozen out of the collector's walks, and its young generation collected ten times more rarely.

    Every full collection walks every tracked object, and with CPython's default thresholds
    (700, 10, 10) the tests' churn (each render allocates and frees tens of thousands of objects)
    triggered one every second or so: 32 in a fast-tier run, 7.0 s of the two workers' CPU (timed
    with gc.callbacks). Frozen, the imports are walked by none of them; at 10,000 allocations a
    young collection, cycles the tests leave wait a little longer, refcounting frees everything else
    as before, and the same run spent 2.5 s collecting with the same peak memory. A test that looks
    for garbage (test_pulumi_runtime's open event loops) calls gc.collect() itself; what it looks
    for is made after this, so it is never frozen."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


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
