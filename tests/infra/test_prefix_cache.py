"""The prefix-cache arithmetic: which prompt blocks a worker can reuse, and how often it still holds them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infra import prefix_cache as pc


def test_only_whole_blocks_of_the_prefix_are_reused():
    assert pc.reusable_prefix_tokens(2000) == 2000  # 125 blocks of 16
    assert pc.reusable_prefix_tokens(2015) == 2000
    assert pc.blocks(2371) == 149  # 2,371 tokens in 16-token blocks (docs/sources.md)


def test_a_pool_large_enough_for_every_prefix_almost_always_hits_and_a_tiny_one_never_does():
    big = pc.steady_state_hit_probability(2, 2000, 2371, 64, capacity_blocks=10_000, in_flight_requests=2)
    tiny = pc.steady_state_hit_probability(2, 2000, 2371, 64, capacity_blocks=100, in_flight_requests=2)
    assert big > 0.99 and tiny == 0.0


@given(p=st.integers(1, 64), more=st.integers(1, 64), cap=st.integers(0, 20_000), inflight=st.floats(0, 8))
def test_hits_fall_with_more_prefix_types_and_rise_with_the_pool(p, more, cap, inflight):
    h = pc.steady_state_hit_probability(p, 2000, 2371, 64, cap, inflight)
    assert 0.0 <= h <= 1.0
    assert pc.steady_state_hit_probability(p + more, 2000, 2371, 64, cap, inflight) <= h + 1e-9
    assert pc.steady_state_hit_probability(p, 2000, 2371, 64, cap + 1000, inflight) >= h - 1e-9
