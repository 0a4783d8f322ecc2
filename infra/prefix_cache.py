"""How much of a request's prompt a worker already holds: vLLM's prefix cache, as arithmetic.

vLLM keeps KV in blocks of 16 tokens and reuses a prompt's full blocks when an earlier request
left them in the worker's cache; a disaggregated decode worker then pulls only the rest
(vLLM 0.31.0, `pull_scheduler.py`, `get_num_new_matched_tokens`: `actual - num_computed_tokens`;
docs/sources.md). Freed blocks stay cached until the pool needs them (least recently used first).

The steady-state hit probability uses the characteristic-time approximation of an LRU cache
(Che, Tung and Wang, 2002): with a characteristic time T (here counted in requests reaching the
worker), an item requested with probability q per request is in the cache with probability
1 - exp(-q T), and T is where the expected occupancy fills the cache. Each of P prefixes is asked
for with probability 1/P; each request's own tail (its unique and generated tokens) is never
asked for again and occupies its blocks for T requests.
"""

from __future__ import annotations

import math

# The KV block size, in tokens, that dynamo-lab writes for every worker (--block-size 16). Left
# unset, vLLM 0.31.0 takes the attention backend's preferred size (`get_preferred_block_size`),
# and every figure resting on 16-token blocks (prefix reuse, descriptors, pool blocks) would drift.
BLOCK_TOKENS = 16


def blocks(tokens: int, block: int = BLOCK_TOKENS) -> int:
    """Blocks a sequence of `tokens` occupies (the last one partly filled)."""
    return math.ceil(tokens / block)


def reusable_prefix_tokens(prefix_tokens: int, block: int = BLOCK_TOKENS) -> int:
    """Prompt tokens another request can reuse: the prefix's full blocks only (block-aligned)."""
    return prefix_tokens // block * block


def steady_state_hit_probability(prefix_types: int, prefix_tokens: int, input_tokens: int, output_tokens: int,
                                 capacity_blocks: int, in_flight_requests: float,
                                 block: int = BLOCK_TOKENS) -> float:
    """Probability that a request finds its prefix's reusable blocks in one worker's cache.

    `capacity_blocks` is the worker's pool; `in_flight_requests` the requests it holds at once
    (their blocks cannot be evicted). Requests choose one of `prefix_types` prefixes uniformly.
    """
    prefix_blocks = reusable_prefix_tokens(prefix_tokens, block) // block
    if prefix_blocks == 0:
        return 0.0
    tail_blocks = blocks(input_tokens + output_tokens, block) - prefix_blocks
    free = capacity_blocks - in_flight_requests * tail_blocks
    if free < prefix_blocks:
        return 0.0

    def occupancy(t: float) -> float:
        return prefix_types * prefix_blocks * -math.expm1(-t / prefix_types) + t * tail_blocks

    lo, hi = 0.0, 1.0
    while occupancy(hi) < free:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if occupancy(mid) < free else (lo, mid)
    return -math.expm1(-lo / prefix_types)
