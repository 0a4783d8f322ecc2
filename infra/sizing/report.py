"""What the sizing reports, as data: per worker group, per GPU, per KV path, the model cache and the
KV layout the figures assume. `sizing_text` (the lab) words it; the program exports it as `sizing`."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Literal, Optional

from infra.resolved import ContextSource


class ThroughputBasis(enum.StrEnum):
    """What a transfer's throughput rests on, for whoever reads it (the words say it for a user)."""

    ESTIMATE = "estimate"  # the default same-node figure, measured on a development machine, not the lab
    CONFIGURED = "configured"  # sizing.sameNodeBytesPerSecond
    MEASURED = "measured"  # sizing.measured, for this path
    LINK = "link"  # the link's rate x efficiency


@dataclass(frozen=True)
class GroupSizing:
    name: str
    role: str
    gpu_class: str
    replicas: int
    # GPUs per replica (vLLM --tensor-parallel-size); the GPU figures below are per GPU (per rank).
    tensor_parallel: int
    # vLLM --kv-cache-memory-bytes: each rank's pool, on its GPU.
    kv_cache_bytes: int
    kv_cache_source: Literal["config", "derived"]
    # vLLM --max-model-len and where it came from (the resolved stack's contexts).
    max_model_len: int
    max_model_len_source: ContextSource
    # Blocks of BLOCK_TOKENS tokens the pool holds (every layer's share), and the blocks one
    # max_model_len sequence needs plus vLLM's null block: the first must be at least the second.
    pool_blocks: int
    blocks_for_max_len: int
    weights_bytes: int
    gpu_overhead_bytes: int
    gpu_bytes_per_worker: int
    gpu_memory_utilization: float
    cpu_buffers: bool
    host_memory_floor_bytes: int
    memory_limit_bytes: int
    memory_request_bytes: int
    memory_source: Literal["config", "floor"]
    # The lab write-up's rule ("concurrency x KV per request"): a steady-state estimate, NOT the ceiling.
    steady_state_bytes: int
    requests_in_pool: float


@dataclass(frozen=True)
class GpuFit:
    gpu_class: str
    workers: int  # the class's workers, over all its nodes
    memory_bytes: int
    budget_bytes: int
    planned_bytes: int  # the most one GPU may carry: its `sharing` largest workers (per GPU) at once
    sharing: int = 1  # the most workers that may share one GPU (Placement.sharing_one_gpu)
    nodes: int = 1
    gpus_per_node: int = 1
    # A `whole` class: the GPUs its workers take (replicas x tensorParallel); None where time-sliced.
    gpus_needed: Optional[int] = None


@dataclass(frozen=True)
class RankReadSizing:
    """One decode rank's read from one prefill rank for one average request (infra/kv_ranks.py): the
    prefill rank's KV heads `first_head` .. `first_head + heads - 1` of every prompt token it moves."""

    decode_rank: int
    prefill_rank: int
    heads: int
    first_head: int
    cold_bytes: int
    warm_bytes: int


@dataclass(frozen=True)
class TransferSizing:
    """One prefill -> decode path. vLLM moves only the prompt blocks the decode worker's own prefix
    cache lacks: every prompt token when it holds none of the prefix (cold), the unique tail when
    it holds the whole prefix (warm); `expected` weighs the two by the steady-state chance that it
    holds the prefix (infra/prefix_cache.py)."""

    from_group: str
    to_group: str
    path: Literal["same-node", "cross-node"]
    transport: Literal["tcp", "rdma"]  # the pair's kvTransfer.transport
    op: Literal["READ"]  # NixlConnector: the decode side pulls (READs) the KV
    throughput_bytes_per_s: float
    throughput_source: str  # what the throughput rests on, in words
    throughput_basis: ThroughputBasis  # and as a kind, which the lab's words and warnings read
    cold_bytes: int
    warm_bytes: int
    # Steady-state probability that the decode worker holds the request's prefix (workload.prefixTypes
    # prefixes spread over the decode workers, each with its KV pool).
    decode_prefix_hit_probability: float
    expected_bytes: float
    cold_seconds: float
    warm_seconds: float
    expected_seconds: float
    prefill_seconds_estimate: float
    # Cold bytes of every request in flight at the sized concurrency.
    in_flight_bytes: int
    # Across nodes every transfer shares one link: it can carry at most this many requests/s
    # (throughput / expected bytes), whatever the concurrency. None on one node, where concurrent
    # transfers are separate TCP streams through the host and no single cap is known.
    link_max_requests_per_s: Optional[float]
    # The verdict's case (expected) over the prefill time it saves: above 1, it costs more than it saves.
    transfer_over_prefill: float
    # The reads one request takes, by decode rank then prefill rank (NixlConnector's rank mapping): one
    # where both run tensorParallel 1; they run side by side, each its own pair of NIXL agents.
    rank_reads: list[RankReadSizing] = field(default_factory=list)


@dataclass(frozen=True)
class ModelCacheSizing:
    mode: Literal["off", "nodeVolume", "hostPath", "pvc"]  # modelCache.mode
    # ESTIMATE (to a few kB: the safetensors header is not counted): checkpoint parameters x dtype bytes.
    stored_parameters: int
    weights_bytes: int
    tokenizer_bytes: int  # config and tokenizer files
    bytes_per_cache: int  # disk one cache holds: per GPU node (hostPath), the claim (pvc), per pod (off)
    # Where the caches are: the GPU classes that run workers (hostPath, one node each), the claim (pvc).
    locations: list[str]
    claim_bytes: Optional[int]  # the size of a claim dynamo-lab creates; None otherwise
    # Times a first deploy fetches the weights from the Hub: once per cache, or once per worker pod.
    downloads: int


@dataclass(frozen=True)
class KvLayout:
    """How the workers' KV is laid out, which every figure here assumes (vLLM 0.31.0, FlashAttention
    with --block-size 16): per layer a cache of [num_blocks, kv_heads, block_size, 2 x head_dim], K and
    V packed in each block, and NIXL moves one descriptor per layer per block (nixl/base_worker.py)."""

    block_size_tokens: int
    # One layer's block: 2 (K, V) x block_size x kv_heads x head_dim x dtype bytes (Qwen3-0.6B: 64 KiB).
    descriptor_bytes: int
    layers: int
    # A block across every layer: what one block of the pool costs.
    block_bytes: int
    # Descriptors one request's prompt moves cold: its blocks x layers.
    descriptors_per_request: int
    shape: str = "[num_blocks, kv_heads, block_size, 2 x head_dim] per layer; one descriptor per layer-block"


@dataclass(frozen=True)
class StackSizing:
    stack: str
    model: str
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_layout: KvLayout
    input_tokens: int
    concurrency: int
    prefix_types: int
    groups: list[GroupSizing] = field(default_factory=list)
    gpus: list[GpuFit] = field(default_factory=list)
    transfers: list[TransferSizing] = field(default_factory=list)
    model_cache: Optional[ModelCacheSizing] = None

    def group(self, name: str) -> GroupSizing:
        return next(g for g in self.groups if g.name == name)

    def as_dict(self) -> dict:
        return asdict(self)
