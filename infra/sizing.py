"""What a configuration costs before it deploys: KV bytes, GPU fit, host memory, transfer time.

Pure arithmetic over a validated StackConfig; no Pulumi here, and no report prose (the lab's
`sizing_text` words it). A stack that cannot fit raises ConfigError with the numbers and the fix.
The rules come from the lab's OOM (docs/lab.md) and vLLM's source (docs/sources.md):
- KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x dtype bytes.
- Every worker pins its KV pool with --kv-cache-memory-bytes, so GPU and host figures are exact.
- Every worker gets --block-size 16 and a bounded context (--max-model-len): vLLM refuses to
  start unless its pool holds one sequence that long (vllm/v1/core/kv_cache_utils.py,
  `check_enough_kv_cache_memory`), and its block pool keeps one block back as the null block.
- With kv_buffer_device=cpu each prefill AND decode worker allocates a host mirror of its WHOLE
  KV pool, resident request by request: host floor = vLLM base + pool x (1 + headroom).
- A KV transfer moves the prompt blocks the decode worker lacks (cold: all; warm: the unique
  tail) at the throughput of its path and NIXL op (the connector's: READ by decode, or WRITE by
  prefill): host TCP on one node, measured per op; link rate x efficiency across nodes, where the
  link decides; or what the user measured (`path_throughput`).
- A model cache holds the checkpoint's parameters x dtype bytes plus the config and tokenizer files.
Assumption, stated in the README: one node, with one GPU, per GPU class.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal, Optional

from infra import prefix_cache, units
from infra.catalogue import SAME_NODE_BYTES_PER_SECOND
from infra.config.models import (
    ContextSource,
    GpuClass,
    Link,
    Model,
    SizingParameters,
    StackConfig,
    WorkerGroup,
)
from infra.errors import ConfigError, stack_file


@dataclass(frozen=True)
class GroupSizing:
    name: str
    role: str
    gpu_class: str
    replicas: int
    kv_cache_bytes: int
    kv_cache_source: Literal["config", "derived"]
    # vLLM --max-model-len and where it came from (StackConfig.context_length).
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
    workers: int
    memory_bytes: int
    budget_bytes: int
    planned_bytes: int


@dataclass(frozen=True)
class TransferSizing:
    """One prefill -> decode path. vLLM moves only the prompt blocks the decode worker's own prefix
    cache lacks: every prompt token when it holds none of the prefix (cold), the unique tail when
    it holds the whole prefix (warm); `expected` weighs the two by the steady-state chance that it
    holds the prefix (infra/prefix_cache.py)."""

    from_group: str
    to_group: str
    path: Literal["same-node", "cross-node"]
    op: Literal["READ"]  # NixlConnector: the decode side pulls (READs) the KV
    throughput_bytes_per_s: float
    throughput_source: str
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


@dataclass(frozen=True)
class ModelCacheSizing:
    mode: str  # "off", "hostPath" or "pvc" (modelCache.mode)
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


# --- Formulas (small and separately testable) ---------------------------------------------------


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def host_memory_floor(base: int, kv_pool: int, headroom_percent: float, cpu_buffers: bool) -> int:
    """Host RSS a worker reaches at worst, rounded up to whole MiB (it becomes the pod's limit).
    Without CPU buffers there is no mirror: the base alone."""
    if not cpu_buffers:
        return units.ceil_mi(base)
    return units.ceil_mi(base + kv_pool * (1 + headroom_percent / 100))


def largest_pool_for_limit(limit: int, base: int, headroom_percent: float) -> int:
    """Inverse of host_memory_floor: the biggest KV pool whose mirror fits under `limit` (MiB-aligned)."""
    # The floor is rounded up to whole MiB, so it fits `limit` only below limit's last whole MiB.
    room = (limit // units.MI * units.MI - base) / (1 + headroom_percent / 100)
    return max(0, math.floor(room / units.MI) * units.MI)


def transfer_seconds(nbytes: int, bytes_per_second: float) -> float:
    return nbytes / bytes_per_second


def link_bytes_per_second(link: Link) -> float:
    """Payload a network link carries: its rate in bytes/s times its efficiency (1GbE: 115 MB/s)."""
    return link.rate / 8 * link.efficiency


def link_basis(link: Link) -> str:
    return f"link {link.rate / 1e9:g} Gbit/s x {link.efficiency:g} efficiency"


# The default same-node figure was measured on a development machine, not the lab (docs/measurements.md).
SAME_NODE_DEFAULT = "same-node NIXL {op} of KV blocks (dev-machine estimate)"


def path_throughput(s: SizingParameters, path: str, op: str, link: Optional[Link] = None) -> tuple[float, str]:
    """Bytes/s of one KV transfer by NIXL `op` on `path` ("same-node" or "cross-node"), and its basis.

    The one rule the sizing and the probe's prediction share. On one node the op matters (a READ
    of scattered blocks is slower than a WRITE, docs/measurements.md); across a 1GbE link the link
    decides, whatever the op. `link` replaces `s.link` (the probe's shaped rate).
    """
    if path == "same-node":
        if s.same_node_bytes_per_second is not None:
            return float(s.same_node_bytes_per_second), "same-node (sizing.sameNodeBytesPerSecond)"
        return float(SAME_NODE_BYTES_PER_SECOND[op]), SAME_NODE_DEFAULT.format(op=op)
    link = link or s.link
    return link_bytes_per_second(link), link_basis(link)


def kv_block_bytes(m: Model) -> int:
    """Bytes of one layer's KV block, the unit vLLM's NIXL connectors move (Qwen3-0.6B: 64 KiB)."""
    return kv_bytes_per_token(1, m.kv_heads, m.head_dim, m.dtype_bytes) * prefix_cache.BLOCK_TOKENS


def kv_layout(m: Model, prompt_tokens: int) -> KvLayout:
    per_layer = kv_block_bytes(m)
    return KvLayout(block_size_tokens=prefix_cache.BLOCK_TOKENS, descriptor_bytes=per_layer, layers=m.layers,
                    block_bytes=per_layer * m.layers,
                    descriptors_per_request=prefix_cache.blocks(prompt_tokens) * m.layers)


def prefill_seconds_estimate(parameters: int, tokens: int, tflops: float) -> float:
    """ESTIMATE: forward-pass FLOPs ~= 2 x parameters x tokens, at the class's effective TFLOP/s."""
    return 2 * parameters * tokens / (tflops * 1e12)


# --- The report ---------------------------------------------------------------------------------


def gpu_budget(cls: GpuClass, memory: Optional[int] = None) -> int:
    """What the workers sharing a class's GPU may plan to use: its memory (or `memory`, what a node's
    GPU reports) less the class's reserve."""
    return math.floor((cls.memory if memory is None else memory) * (1 - cls.memory_reserve))


def _workers_by_class(cfg: StackConfig) -> dict[str, list[WorkerGroup]]:
    by_class: dict[str, list[WorkerGroup]] = {}
    for g in cfg.workers:
        if g.replicas > 0:
            by_class.setdefault(g.gpu_class, []).append(g)
    return by_class


def _pools(cfg: StackConfig, weights: int) -> dict[str, int]:
    """KV pool per worker: as configured, or what the GPU's budget leaves shared evenly."""
    overhead = cfg.sizing.gpu_overhead_per_worker
    pools: dict[str, int] = {g.name: g.kv_cache_bytes for g in cfg.workers if g.kv_cache_bytes is not None}
    for cls_name, groups in _workers_by_class(cfg).items():
        cls = cfg.gpu_classes[cls_name]
        budget = gpu_budget(cls)
        workers = sum(g.replicas for g in groups)
        fixed = sum(g.replicas * g.kv_cache_bytes for g in groups if g.kv_cache_bytes is not None)
        derived = [g for g in groups if g.kv_cache_bytes is None]
        if not derived:
            continue
        n = sum(g.replicas for g in derived)
        left = budget - workers * (weights + overhead) - fixed
        pool = max(0, math.floor(left / n / units.MI) * units.MI)
        for g in derived:
            pools[g.name] = pool
    return pools


def _shown(nbytes: int) -> str:
    """A byte figure as a user would write it: 5837Mi when whole MiB, else the bytes."""
    text = units.format_bytes(nbytes)
    return text if text.endswith(("Mi", "Ki")) else f"{nbytes:,} bytes"


def _below_floor(cfg: StackConfig, g: WorkerGroup, pool: int, per_request: int, limit: int, floor: int) -> str:
    """Why `limit` is too low for this worker, in its role's terms, and the fixes."""
    s = cfg.sizing
    if not g.cpu_buffers:
        why = ("an aggregated worker keeps no KV host mirror" if g.role == "agg"
               else "with bufferDevice cuda it keeps no KV host mirror")
        return (f"{_shown(limit)} is below the {units.fmt_bytes(floor)} ({_shown(floor)}) this worker needs: its "
                f"vLLM base resident memory (sizing.vllmBaseMemory; {why}), and the pod would be OOMKilled "
                f"loading the model. Raise memoryLimit to at least {_shown(floor)}, or lower "
                "sizing.vllmBaseMemory if you measured less")
    mirror = units.fmt_bytes(pool * (1 + s.host_headroom_percent / 100))
    largest = largest_pool_for_limit(limit, s.vllm_base_memory, s.host_headroom_percent)
    # The smallest pool vLLM starts with: one sequence of the group's max_model_len and the null block.
    context = cfg.context_length(g)[0]
    smallest_pool = blocks_for_sequence(context) * kv_layout(cfg.model, cfg.workload.input_tokens).block_bytes
    if largest >= smallest_pool:
        second = (f"or set workers.{g.name}.kvCacheBytes <= {largest // units.MI}Mi, the largest "
                  f"KV pool whose host mirror fits {_shown(limit)} "
                  f"({largest / per_request:.1f} requests of {units.fmt_bytes(per_request)})")
    else:
        smallest = host_memory_floor(s.vllm_base_memory, smallest_pool, s.host_headroom_percent, True)
        second = (f"or shrink the pool with workers.{g.name}.kvCacheBytes, which needs a limit too: "
                  f"{_shown(limit)} leaves {units.fmt_bytes(max(0, limit - s.vllm_base_memory))} "
                  f"above the vLLM base, and even the smallest pool vLLM starts with "
                  f"({units.fmt_bytes(smallest_pool)}: one {context:,}-token sequence and the null block) "
                  f"needs memoryLimit >= {_shown(smallest)}")
    return (f"{_shown(limit)} is below the {units.fmt_bytes(floor)} ({_shown(floor)}) this worker needs "
            f"({units.fmt_bytes(s.vllm_base_memory)} vLLM base + {mirror} KV host mirror "
            f"of its {units.fmt_bytes(pool)} pool incl. {s.host_headroom_percent:g}% "
            f"headroom); with kv_buffer_device=cpu vLLM mirrors the whole KV pool in "
            f"host memory and the pod is OOMKilled as it fills. Raise memoryLimit to at "
            f"least {_shown(floor)}, {second}")


def _memory(cfg: StackConfig, g: WorkerGroup, pool: int, per_request: int, problems: list) -> tuple[int, int, int, str]:
    s = cfg.sizing
    floor = host_memory_floor(s.vllm_base_memory, pool, s.host_headroom_percent, g.cpu_buffers)
    limit, source = (floor, "floor") if g.memory_limit is None else (g.memory_limit, "config")
    request = limit if g.memory_request is None else g.memory_request
    if limit < floor:
        problems.append((f"workers.{g.name}.memoryLimit", _below_floor(cfg, g, pool, per_request, limit, floor)))
    if request > limit:
        given = ("memoryLimit" if g.memory_limit is not None
                 else "the host memory floor (the limit while memoryLimit is unset)")
        problems.append((f"workers.{g.name}.memoryRequest",
                         f"{_shown(request)} is above {given}, {_shown(limit)}; Kubernetes rejects a request "
                         f"above its limit. Lower memoryRequest to at most {_shown(limit)}"
                         + ("" if g.memory_limit is not None else ", or set memoryLimit >= memoryRequest")))
    return floor, limit, request, source


def blocks_for_sequence(tokens: int) -> int:
    """Pool blocks one sequence of `tokens` needs in vLLM: its blocks, plus the null block the block
    pool holds back (vllm/v1/core/block_pool.py: block 0 is never handed out)."""
    return prefix_cache.blocks(tokens) + 1


def _short_pool(cfg: StackConfig, g: WorkerGroup, pool: int, block: int, tokens: int, source: str) -> str:
    """Why this group's pool cannot hold one sequence of its max_model_len, and the fixes."""
    w, need = cfg.workload, blocks_for_sequence(tokens)
    have = pool // block
    at_least = units.to_mi_quantity(need * block)
    longest = (have - 1) * prefix_cache.BLOCK_TOKENS  # what this pool can hold, null block aside
    sized = w.input_tokens + w.output_tokens
    where = {"extraArgs": f"workers.{g.name}.extraArgs --max-model-len",
             "workload.maxModelLen": "workload.maxModelLen",
             "derived": "workload.maxModelLen (default: inputTokens + outputTokens, block-aligned)"}[source]
    if g.kv_cache_bytes is not None:
        pool_is = f"the {units.fmt_bytes(pool)} KV pool"
        grow = f"raise workers.{g.name}.kvCacheBytes to at least {at_least}"
    else:
        cls = cfg.gpu_classes[g.gpu_class]
        workers = sum(o.replicas for o in cfg.workers if o.gpu_class == g.gpu_class)
        pool_is = (f"the {g.gpu_class} GPU ({units.fmt_bytes(cls.memory)}, {units.fmt_bytes(gpu_budget(cls))} after "
                   f"its {cls.memory_reserve:.0%} reserve) leaves {units.fmt_bytes(pool)} of KV pool per worker for "
                   f"{workers} workers (each {units.fmt_bytes(cfg.model.parameters * cfg.model.dtype_bytes)} weights + "
                   f"{units.fmt_bytes(cfg.sizing.gpu_overhead_per_worker)} overhead), which")
        grow = f"run fewer workers on this GPU (each needs a pool of at least {at_least})"
    shrink = (f", or shorten the context with {where}: at most {longest:,} tokens fit, and it must hold the "
              f"{sized:,} (inputTokens + outputTokens) the stack is sized for" if longest >= sized else
              f" (a shorter context does not help: this pool cannot hold even the sized requests, {sized:,} tokens)")
    return (f"{pool_is} holds {have:,} blocks of {prefix_cache.BLOCK_TOKENS} tokens "
            f"({block:,} bytes each across {cfg.model.layers} layers), but one sequence of max_model_len "
            f"{tokens:,} ({source}) needs {need:,}: its {need - 1:,} blocks and vLLM's null block. vLLM refuses "
            f"to start (\"To serve at least one request with the model's max seq len ...\") and the pod "
            f"crash-loops. Fix: {grow}{shrink}")


def _decode_hit_probability(cfg: StackConfig, decode_pool: int, per_token: int) -> float:
    """The chance a decode worker holds a request's prefix, requests spread evenly over all decode workers."""
    w = cfg.workload
    decoders = sum(g.replicas for g in cfg.workers if g.role == "decode")
    return prefix_cache.steady_state_hit_probability(
        w.prefix_types, w.prefix_tokens, w.input_tokens, w.output_tokens,
        prefix_cache.pool_blocks(decode_pool, per_token), w.concurrency / max(decoders, 1))


def _transfers(cfg: StackConfig, per_token: int, pools: dict[str, int]) -> list[TransferSizing]:
    s, w = cfg.sizing, cfg.workload
    cold = per_token * w.input_tokens
    warm = per_token * (w.input_tokens - prefix_cache.reusable_prefix_tokens(w.prefix_tokens))
    active = [g for g in cfg.workers if g.replicas > 0]
    measured = {(m.from_group, m.to_group): m.bytes_per_second for m in s.measured}
    # What a transfer to a decode group carries (its prefix hits) and the prefill it saves depend
    # on that group alone, whichever prefill group sends.
    decodes = []
    for d in (g for g in active if g.role == "decode"):
        hit = _decode_hit_probability(cfg, pools[d.name], per_token)
        saved = prefill_seconds_estimate(cfg.model.parameters, w.input_tokens,
                                         cfg.gpu_classes[d.gpu_class].effective_tflops)
        decodes.append((d, hit, hit * warm + (1 - hit) * cold, saved))
    out = []
    for p in (g for g in active if g.role == "prefill"):
        for d, hit, expected, saved in decodes:
            same = p.gpu_class == d.gpu_class
            path = "same-node" if same else "cross-node"
            op = p.kv_transfer.op
            if (p.name, d.name) in measured:
                bps, source = float(measured[(p.name, d.name)]), "measured (sizing.measured)"
            else:
                bps, source = path_throughput(s, path, op)
            expected_seconds = transfer_seconds(expected, bps)
            out.append(TransferSizing(
                from_group=p.name, to_group=d.name, path=path, op=op, throughput_bytes_per_s=bps,
                throughput_source=source, cold_bytes=cold, warm_bytes=warm, decode_prefix_hit_probability=hit,
                expected_bytes=expected, cold_seconds=transfer_seconds(cold, bps),
                warm_seconds=transfer_seconds(warm, bps), expected_seconds=expected_seconds,
                prefill_seconds_estimate=saved, in_flight_bytes=w.concurrency * cold,
                link_max_requests_per_s=None if same else bps / expected,
                transfer_over_prefill=expected_seconds / saved))
    return out


def model_cache(cfg: StackConfig, problems: list) -> ModelCacheSizing:
    """Disk for the model's files in one cache; refuses a claim dynamo-lab would create too small for them."""
    m, mc = cfg.model, cfg.model_cache
    weights = m.stored_parameters * m.dtype_bytes
    need = weights + m.tokenizer_bytes
    claim = mc.pvc.size if cfg.creates_model_cache_claim else None
    if claim is not None and claim < need:
        problems.append(("modelCache.pvc.size",
                         f"{units.fmt_bytes(claim)} is below the {units.fmt_bytes(need)} ({need:,} B) "
                         f"the model cache holds: {m.name}'s weights as stored, {m.stored_parameters:,} "
                         f"parameters x {m.dtype_bytes} B = {weights:,} B, plus {m.tokenizer_bytes:,} B of "
                         "config and tokenizer files; the download would fill the volume and fail. Raise "
                         f"modelCache.pvc.size to at least {math.ceil(need / units.GI)}Gi"))
    pods = sum(g.replicas for g in cfg.workers)
    locations = {"off": [], "hostPath": cfg.worker_nodes,
                 "pvc": [cfg.model_cache_claim]}[mc.mode]
    return ModelCacheSizing(mode=mc.mode, stored_parameters=m.stored_parameters, weights_bytes=weights,
                            tokenizer_bytes=m.tokenizer_bytes, bytes_per_cache=need, locations=locations,
                            claim_bytes=claim, downloads=len(locations) if locations else pods)


def size(cfg: StackConfig, stack: str) -> StackSizing:
    """Size every worker group; raises ConfigError if a worker cannot fit its GPU or its memory limit."""
    m = cfg.model
    per_token = kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, m.dtype_bytes)
    per_request = per_token * cfg.workload.input_tokens
    weights = m.parameters * m.dtype_bytes
    overhead = cfg.sizing.gpu_overhead_per_worker
    problems: list[tuple[str, str]] = []
    pools = _pools(cfg, weights)
    layout = kv_layout(m, cfg.workload.input_tokens)

    groups = []
    for g in cfg.workers:
        pool = pools.get(g.name, 0)
        cls = cfg.gpu_classes[g.gpu_class]
        per_worker = weights + pool + overhead
        util = math.ceil(per_worker / cls.memory * 100) / 100
        floor, limit, request, source = _memory(cfg, g, pool, per_request, problems)
        context, context_source = cfg.context_length(g)
        # A group with no replicas and no pool of its own starts no worker: nothing to hold.
        if (g.replicas or g.kv_cache_bytes is not None) and pool // layout.block_bytes < blocks_for_sequence(context):
            problems.append((f"workers.{g.name}.kvCacheBytes",
                             _short_pool(cfg, g, pool, layout.block_bytes, context, context_source)))
        groups.append(GroupSizing(
            name=g.name, role=g.role, gpu_class=g.gpu_class, replicas=g.replicas,
            kv_cache_bytes=pool, kv_cache_source="config" if g.kv_cache_bytes is not None else "derived",
            max_model_len=context, max_model_len_source=context_source,
            pool_blocks=pool // layout.block_bytes, blocks_for_max_len=blocks_for_sequence(context),
            weights_bytes=weights, gpu_overhead_bytes=overhead, gpu_bytes_per_worker=per_worker,
            gpu_memory_utilization=util, cpu_buffers=g.cpu_buffers, host_memory_floor_bytes=floor,
            memory_limit_bytes=limit, memory_request_bytes=request, memory_source=source,
            steady_state_bytes=cfg.workload.concurrency * per_request if g.cpu_buffers else 0,
            requests_in_pool=pool / per_request))

    gpus = []
    for cls_name in _workers_by_class(cfg):
        cls = cfg.gpu_classes[cls_name]
        budget = gpu_budget(cls)
        sized = [s for s in groups if s.gpu_class == cls_name and s.replicas > 0]
        planned = sum(s.replicas * s.gpu_bytes_per_worker for s in sized)
        gpus.append(GpuFit(cls_name, sum(s.replicas for s in sized), cls.memory, budget, planned))
        if planned > budget:
            each = "; ".join(
                f"{s.replicas} x {s.name} = {s.replicas} x ({units.fmt_bytes(s.weights_bytes)} weights + "
                f"{units.fmt_bytes(s.kv_cache_bytes)} KV + {units.fmt_bytes(s.gpu_overhead_bytes)} overhead)"
                for s in sized)
            problems.append((f"gpuClasses.{cls_name}",
                             f"the workers sharing this GPU plan {units.fmt_bytes(planned)}, more than its "
                             f"{units.fmt_bytes(budget)} ({units.fmt_bytes(cls.memory)} less "
                             f"{cls.memory_reserve:.0%} reserve): {each}. Time-slicing does not isolate "
                             "memory, so a worker would fail to start or crash. Lower kvCacheBytes, "
                             "or run fewer replicas on this class"))
    cache = model_cache(cfg, problems)
    if problems:
        raise ConfigError(stack_file(stack), problems)
    return StackSizing(stack=stack, model=m.name, kv_bytes_per_token=per_token,
                  kv_bytes_per_request=per_request, kv_layout=layout, input_tokens=cfg.workload.input_tokens,
                  concurrency=cfg.workload.concurrency, prefix_types=cfg.workload.prefix_types,
                  groups=groups, gpus=gpus,
                  transfers=_transfers(cfg, per_token, pools), model_cache=cache)
