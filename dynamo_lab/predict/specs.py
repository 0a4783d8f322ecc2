"""What one simulated graph is built from (sim.Graph): its workers, paths, timing constants and
load, and the counts it keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dynamo_lab.predict.costs import Card, Efficiency, Limits, ModelCost
from infra import prefix_cache


@dataclass(frozen=True)
class Timing:
    """The engine and system constants of one lab (params.py has the values and their sources)."""

    frontend_s: float
    step_cpu_s: float
    step_cpu_per_request_s: float
    efficiency: Efficiency
    handoff_s: float
    handshake_s: float
    host_copy_bytes_per_s: float
    frontend_jitter: float
    gpu_jitter: float
    overlap_weight: float = 1.0  # the KV router's kv_overlap_score_weight

    def host_seconds(self, requests: int, copied_bytes: float = 0.0) -> float:
        """The host side of one engine step (the worker's CPU, not shared): scheduling, input
        preparation and launches, each of its `requests` scheduled requests' output handling, and
        `copied_bytes` of KV between GPU blocks and host buffers. The simulation (sim.py) and the
        comparison with the peer (peer.py) both charge a step through here."""
        return self.step_cpu_s + self.step_cpu_per_request_s * requests + copied_bytes / self.host_copy_bytes_per_s


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    role: str
    gpu: str
    node: str
    card: Card
    limits: Limits
    cache_blocks: int
    cpu_buffers: bool = True
    group: str = ""  # the worker group it is a replica of


@dataclass(frozen=True)
class PathSpec:
    capacity: float  # bytes/s all of its flows share
    per_flow: float  # bytes/s one flow moves at most
    # One such path per (prefill worker, decode worker) pair, not one for all: on one node each
    # pair's NIXL agents move their flows through their own TCP connection and processes, which a
    # many-core host runs side by side; one pair's flows share its rate (the probe's --flows:
    # docs/measurements.md, "Several flows at once"). Across nodes every pair shares the link.
    per_pair: bool = False
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
