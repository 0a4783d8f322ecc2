"""What one simulated graph is built from (sim.ServingGraph): its workers, paths, timing constants and
load, and the counts it keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dynamo_lab.predict.costs import Card, Efficiency, HostCost, Limits, ModelCost
from infra import prefix_cache


@dataclass(frozen=True)
class Timing:
    """The engine and system constants of one lab (params.py has the values and their sources)."""

    frontend_s: float
    host: HostCost
    efficiency: Efficiency
    handoff_s: float
    handshake_s: float
    frontend_jitter: float
    step_noise: float  # the scale of what interference adds to a step's GPU time (sim.ServingGraph._slowdown)
    # The KV router's prefill_load_scale (router.cost; ai-dynamo 1.6.1's default, 1.0; its deprecated
    # alias is --router-kv-overlap-score-weight).
    prefill_load_scale: float = 1.0



@dataclass(frozen=True)
class WorkerSpec:
    name: str
    role: str
    gpu: str
    node: str
    card: Card
    limits: Limits
    cache_blocks: int
    # One rank's share of a token's KV (infra.resolved.Ranks.kv_bytes_per_token): what each rank
    # copies between its GPU blocks and host buffers per token.
    rank_kv_bytes_per_token: int
    cpu_buffers: bool = True
    group: str = ""  # the worker group it is a replica of


@dataclass(frozen=True)
class PathSpec:
    capacity: float  # bytes/s all of its flows share
    per_flow: float  # bytes/s one flow moves at most
    # Its flows served in the order they were posted, each at `per_flow` while capacity is left
    # (events.Sharing's in_order): one host's TCP software path, CPU-bound, which several flows do
    # not widen and which finishes them in order (docs/measurements.md, "Several flows at once").
    # Else shared evenly (a link).
    in_order: bool = False
    # (prefill group, decode group, reads): how many rank-to-rank reads one transfer of each group
    # pair on this path takes side by side (the sizing's rank_reads); a pair not named takes one.
    rank_flows: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class Load:
    prefix_types: int
    prefix_tokens: int
    input_tokens: int
    output_tokens: int
    model: ModelCost
    block_tokens: int = prefix_cache.BLOCK_TOKENS


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    transfers: int = 0
    warm_transfers: int = 0

    @property
    def prefill_cache_ratio(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def decode_hit_ratio(self) -> Optional[float]:
        return self.warm_transfers / self.transfers if self.transfers else None
