"""Dynamo 1.6's KV router as it picks a prefill or aggregated worker: what it tracks of each worker
(its slot tracker) and the cost it compares.

With the router's defaults (ai-dynamo 1.6.1, `dynamo/_core.pyi` KvRouterConfig and
`dynamo/common/configuration/groups/kv_router_args.py`: prefill_load_scale 1.0,
overlap_score_credit 1.0, router_temperature 0, router_track_active_blocks,
router_assume_kv_reuse and router_track_prefill_tokens on, router_track_output_blocks off), the
default selector (`lib/kv-router/src/scheduling/selector/default.rs`, `worker_logit`) costs a
worker, in blocks of the KV block size:

    prefill_load_scale * max(raw_prefill_blocks - overlap_credit * cached_prefix_blocks, 0)
        + potential_decode_blocks

and takes the cheapest, ties at random. Two terms load a worker, and neither is "blocks of every
request in flight":

- raw_prefill_blocks = (active_prefill_tokens + the prompt's tokens) / block size: a worker's
  active prefill tokens are the tokens each request sent to it had to compute when it was routed
  (its prompt less what the worker held of it: `new_tokens(isl, overlap)`), until its first
  token comes back (`mark_prefill_completed`, `lib/kv-router/src/sequences/single.rs`, which
  removes the request from the prefill tracker, not its blocks).
- potential_decode_blocks = the worker's unique active blocks plus the prompt's blocks it does not
  already count (`WorkerLoadProjection::potential_decode_blocks`, `sequences/prompt_registry.rs`):
  with router_assume_kv_reuse each request's complete prompt blocks are tracked by their hash
  (`ActiveSequences::add_request_with_prefill_tracking`, `BlockTracker::touch_block`), so requests
  sharing a prefix on one worker count its blocks once, until the last of them is freed; output
  blocks are not tracked.

The Rust files are read on ai-dynamo/dynamo's main, not at the v1.6.2 tag (the stored copy does not
identify it): the 1.6.1 wheel's `_core.abi3.so` names sequences/single.rs, block_tracker.rs,
prefill_tracker.rs and scheduling/selector/mod.rs among its sources and carries the same config
fields, `potential_decode_blocks` and `effective_prefill_tokens`, so the structure is 1.6's; the
selector's arithmetic itself is not readable from the binary.

So a worker already serving a request of the same prefix costs a new one only its unique tail,
and a worker in the middle of a cold prefill costs that prefill's tokens twice. The cached prefix
blocks are what the worker's KV events say it holds (the router's radix tree), here its pool's
cached prefix (kvcache.Cache).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class SlotTracker:
    """One worker's requests as the router counts them (its ActiveSequences), from routing to the
    end of the response."""

    prefill_tokens: int = 0  # of requests not yet past their first token: what each had to compute
    prefixes: Counter = field(default_factory=Counter)  # requests in flight by prefix type
    requests: int = 0

    def add(self, prefix: int, prefill_tokens: int) -> None:
        self.prefixes[prefix] += 1
        self.requests += 1
        self.prefill_tokens += prefill_tokens

    def prefill_done(self, prefill_tokens: int) -> None:
        self.prefill_tokens -= prefill_tokens

    def free(self, prefix: int) -> None:
        self.prefixes[prefix] -= 1
        if not self.prefixes[prefix]:
            del self.prefixes[prefix]
        self.requests -= 1

    def active_blocks(self, prefix_blocks: int, prompt_blocks: int) -> int:
        """Unique active blocks: each prefix in flight once, each request's own complete blocks."""
        return len(self.prefixes) * prefix_blocks + self.requests * (prompt_blocks - prefix_blocks)


@dataclass(frozen=True)
class Shape:
    """A request's shape in the router's blocks."""

    block_tokens: int
    prompt_tokens: int
    prefix_blocks: int  # the shared prefix's complete blocks (what another request can reuse)

    @property
    def prompt_blocks(self) -> int:
        """Complete prompt blocks, the ones hashed and tracked (a partial last block is not)."""
        return self.prompt_tokens // self.block_tokens


def cost(tracker: SlotTracker, shape: Shape, prefix: int, cached: bool, prefill_load_scale: float = 1.0) -> float:
    """The selector's cost of sending a request of `prefix` to the worker `tracker` counts;
    `cached`: the worker holds the prefix."""
    overlap = shape.prefix_blocks if cached else 0
    raw_prefill = (tracker.prefill_tokens + shape.prompt_tokens) / shape.block_tokens
    added = shape.prompt_blocks - shape.prefix_blocks + (0 if tracker.prefixes[prefix] else shape.prefix_blocks)
    return (prefill_load_scale * max(raw_prefill - overlap, 0.0)
            + tracker.active_blocks(shape.prefix_blocks, shape.prompt_blocks) + added)


def prefill_tokens(shape: Shape, cached: bool) -> int:
    """What a request routed to a worker holding (`cached`) or lacking its prefix has to compute
    there, as the router books it."""
    return shape.prompt_tokens - (shape.prefix_blocks * shape.block_tokens if cached else 0)
