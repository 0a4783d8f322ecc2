"""The KV router's choice as Dynamo 1.6's default selector makes it (dynamo_lab/predict/router.py):
a prefix shared by requests in flight counts once on a worker, a request's prefill tokens count
until its first token, so a worker already serving the prefix draws the next request of it even
beside an idle worker that lacks it."""

from __future__ import annotations

import pytest

from dynamo_lab.predict.router import Shape, SlotTracker, cost, prefill_tokens
from tests.lab.predict.test_sim import graph, load, spec

# The lab's request: 2,371 prompt tokens, a 2,000-token prefix (125 blocks of 16).
SHAPE = Shape(block_tokens=16, prompt_tokens=2371, prefix_blocks=125)


def booked(*requests: tuple[int, bool, bool]) -> SlotTracker:
    """A worker's tracker holding (prefix, found it cached when routed, past its first token) each."""
    t = SlotTracker()
    for prefix, cached, first_token in requests:
        tokens = prefill_tokens(SHAPE, cached)
        t.add(prefix, tokens)
        if first_token:
            t.prefill_done(tokens)
    return t


def test_an_idle_worker_costs_the_whole_prompt_twice_less_what_it_caches():
    assert cost(SlotTracker(), SHAPE, 0, cached=False) == pytest.approx(2371 / 16 + 148)
    assert cost(SlotTracker(), SHAPE, 0, cached=True) == pytest.approx(2371 / 16 - 125 + 148)


def test_requests_sharing_a_prefix_on_a_worker_count_its_blocks_once():
    same = booked((0, True, True), (0, True, True))
    other = booked((0, True, True), (1, True, True))
    assert same.active_blocks(125, 148) == 125 + 2 * 23
    assert other.active_blocks(125, 148) == 2 * 148
    # A third request of prefix 0 adds only its own 23 blocks where prefix 0 is in flight.
    assert cost(other, SHAPE, 0, cached=True) - cost(same, SHAPE, 0, cached=True) == pytest.approx(125)


def test_a_worker_serving_the_prefix_draws_its_next_request_even_beside_an_idle_cold_one():
    busy_same = booked((7, True, True))
    assert cost(busy_same, SHAPE, 7, cached=True) < cost(SlotTracker(), SHAPE, 7, cached=False)
    # Serving another prefix, the idle worker is cheaper: the cache does not outweigh a request's blocks.
    busy_other = booked((3, True, True))
    assert cost(busy_other, SHAPE, 7, cached=True) > cost(SlotTracker(), SHAPE, 7, cached=False)


def test_a_prefill_in_flight_loads_its_worker_until_its_first_token():
    prefilling = booked((3, False, False))
    decoding = booked((3, False, True))
    assert cost(prefilling, SHAPE, 7, cached=True) - cost(decoding, SHAPE, 7, cached=True) == pytest.approx(2371 / 16)
    # Two workers holding prefix 7, one serving two decodes, one in a cold prefill: the decodes' worker.
    two_decoding = booked((1, True, True), (2, True, True))
    assert cost(two_decoding, SHAPE, 7, cached=True) < cost(prefilling, SHAPE, 7, cached=False)


def test_the_simulated_router_sends_two_requests_in_flight_of_one_prefix_to_one_worker():
    # Two at a time of one prefix, three workers: the worker serving the prefix costs the second
    # only its tail and 371 tokens to prefill, less than an idle worker's whole prompt, so it serves
    # them all (counting each request's whole blocks, the idle worker looked cheaper to the model).
    g = graph([spec(f"w{i}", "agg") for i in range(3)], ld=load(prefix_types=1, output=32))
    g.run(concurrency=1, requests=1)  # the prefix is cached on one worker
    g.run(concurrency=2, requests=12)
    holders = [w.name for w in g.workers if 0 in w.cache.items]
    assert len(holders) == 1
    assert all(w.slots.requests == 0 and w.slots.prefill_tokens == 0 for w in g.workers)  # all freed
