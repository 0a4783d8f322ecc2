"""What a configuration costs before it deploys: KV bytes, GPU fit, host memory, transfer time.

Pure arithmetic over a resolved stack (infra/resolved.py); no Pulumi here, and no report prose (the lab's
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
Assumption, stated in docs/sizing.md: one node, with one GPU, per GPU class.
"""

from __future__ import annotations

import math

from infra import prefix_cache, units
from infra.config.schema import WorkerGroup
from infra.errors import ConfigError, stack_file
from infra.resolved import ResolvedStack, kv_bytes_per_token
from infra.sizing.formulas import (
    blocks_for_sequence,
    gpu_budget,
    host_memory_floor,
    kv_block_bytes,
    kv_layout,
    largest_pool_for_limit,
    link_basis,
    link_bytes_per_second,
    path_throughput,
    prefill_flops_per_second,
    prefill_seconds_estimate,
    transfer_seconds,
)
from infra.sizing.refusals import gpu_overplanned, memory, short_pool, sliced_short, small_claim, whole_gpus_short
from infra.sizing.report import (
    GpuFit,
    GroupSizing,
    KvLayout,
    ModelCacheSizing,
    RankReadSizing,
    StackSizing,
    ThroughputBasis,
    TransferSizing,
)

__all__ = [
    "GpuFit", "GroupSizing", "KvLayout", "ModelCacheSizing", "RankReadSizing", "StackSizing", "ThroughputBasis",
    "TransferSizing",
    "blocks_for_sequence", "gpu_budget", "host_memory_floor", "kv_block_bytes", "kv_layout",
    "largest_pool_for_limit", "link_basis", "link_bytes_per_second", "model_cache", "path_throughput",
    "prefill_flops_per_second", "prefill_seconds_estimate", "size", "transfer_seconds",
]


def _pools(r: ResolvedStack) -> dict[str, int]:
    """KV pool per GPU of each worker: as configured, or what one GPU's budget leaves, shared evenly
    among the workers that may share it at worst (Placement.sharing_one_gpu: with `c` of them on
    one GPU, a derived pool must fit whichever `c` workers of the class land together)."""
    cfg = r.config
    overhead = cfg.sizing.gpu_overhead_per_worker
    pools: dict[str, int] = {g.name: g.kv_cache_bytes for g in cfg.workers if g.kv_cache_bytes is not None}
    for cls_name in r.worker_classes:
        groups = r.placement.active_on(cls_name)
        budget = gpu_budget(cfg.gpu_classes[cls_name])
        derived = [g for g in groups if g.kv_cache_bytes is None]
        if not derived:
            continue
        c = r.placement.sharing_one_gpu(cls_name)
        if c == 1:  # each worker's ranks own their GPUs
            for g in derived:
                pools[g.name] = _mi_floor(budget - r.ranks(g).weight_bytes - overhead)
            continue
        # Time-sliced (tensorParallel 1): any c of the class's workers may share one GPU.
        fixed = [(g.kv_cache_bytes, g.replicas) for g in groups if g.kv_cache_bytes is not None]
        n = sum(g.replicas for g in derived)
        weights = r.weight_bytes  # one rank of one GPU: the model's whole
        pool = min((budget - c * (weights + overhead) - largest(fixed, c - k)) / k for k in range(1, min(c, n) + 1))
        for g in derived:
            pools[g.name] = _mi_floor(pool)
    return pools


def largest(items: list[tuple[int, int]], c: int) -> int:
    """The sum of the `c` largest values of a multiset given as (value, count) pairs."""
    total = 0
    for value, count in sorted(items, reverse=True):
        take = max(0, min(count, c))
        total, c = total + take * value, c - take
    return total


def _mi_floor(nbytes: float) -> int:
    return max(0, math.floor(nbytes / units.MI) * units.MI)


def _decode_hit_probability(r: ResolvedStack, decode: WorkerGroup, decode_pool: int) -> float:
    """The chance a decode worker holds a request's prefix, requests spread evenly over all decode
    workers; it holds as many blocks as each rank's pool (a rank holds its share of every block)."""
    cfg = r.config
    w = cfg.workload
    decoders = sum(g.replicas for g in cfg.workers if g.role == "decode")
    return prefix_cache.steady_state_hit_probability(
        w.prefix_types, w.prefix_tokens, w.input_tokens, w.output_tokens,
        r.ranks(decode).pool_blocks(decode_pool), w.concurrency / max(decoders, 1))


def _transfers(r: ResolvedStack, per_token: int, pools: dict[str, int]) -> list[TransferSizing]:
    cfg = r.config
    s, w = cfg.sizing, cfg.workload
    cold = per_token * w.input_tokens
    warm = per_token * (w.input_tokens - prefix_cache.reusable_prefix_tokens(w.prefix_tokens))
    active = r.active
    measured = {(m.from_group, m.to_group): m.bytes_per_second for m in s.measured}
    # What a transfer to a decode group carries (its prefix hits) and the prefill it saves depend
    # on that group alone, whichever prefill group sends.
    decodes = []
    for d in (g for g in active if g.role == "decode"):
        hit = _decode_hit_probability(r, d, pools[d.name])
        # Its ranks share the prefill's matrix math: tensorParallel GPUs at the class's rate.
        saved = prefill_seconds_estimate(cfg.model, w.input_tokens,
                                         r.ranks(d).together(prefill_flops_per_second(cfg.gpu_classes[d.gpu_class])))
        decodes.append((d, hit, hit * warm + (1 - hit) * cold, saved))
    out = []
    for p in (g for g in active if g.role == "prefill"):
        for d, hit, expected, saved in decodes:
            path = r.placement.kv_path(p, d)
            same = path == "same-node"
            op = p.kv_transfer.op
            reads = _rank_reads(r, p, d)
            if (p.name, d.name) in measured:
                bps, source, basis = (float(measured[(p.name, d.name)]), "measured (sizing.measured)",
                                      ThroughputBasis.MEASURED)
            else:
                bps, source, basis = path_throughput(s, path, op, transport=p.kv_transfer.transport,
                                                     flows=len(reads))
            expected_seconds = transfer_seconds(expected, bps)
            out.append(TransferSizing(
                from_group=p.name, to_group=d.name, path=path, transport=p.kv_transfer.transport, op=op,
                throughput_bytes_per_s=bps,
                throughput_source=source, throughput_basis=basis, cold_bytes=cold, warm_bytes=warm,
                decode_prefix_hit_probability=hit,
                expected_bytes=expected, cold_seconds=transfer_seconds(cold, bps),
                warm_seconds=transfer_seconds(warm, bps), expected_seconds=expected_seconds,
                prefill_seconds_estimate=saved, in_flight_bytes=w.concurrency * cold,
                link_max_requests_per_s=None if same else bps / expected,
                transfer_over_prefill=expected_seconds / saved, rank_reads=reads))
    return out


def _rank_reads(r: ResolvedStack, prefill: WorkerGroup, decode: WorkerGroup) -> list[RankReadSizing]:
    """What each of the pair's reads moves of one request's prompt (ResolvedStack.kv_reads): its
    KV heads of every prompt token, cold, and of the unique tail, warm."""
    m, w = r.config.model, r.config.workload
    warm = w.input_tokens - prefix_cache.reusable_prefix_tokens(w.prefix_tokens)
    out = []
    for read in r.kv_reads(prefill, decode):
        per_token = kv_bytes_per_token(m.layers, read.heads, m.head_dim, m.dtype_bytes)
        out.append(RankReadSizing(read.decode_rank, read.prefill_rank, read.heads, read.first_head,
                                  per_token * w.input_tokens, per_token * warm))
    return out


def model_cache(r: ResolvedStack, problems: list) -> ModelCacheSizing:
    """Disk for the model's files in one cache; refuses a claim dynamo-lab would create too small for them."""
    cfg = r.config
    m, mc = cfg.model, cfg.model_cache
    weights = m.stored_parameters * m.dtype_bytes
    need = weights + m.tokenizer_bytes
    claim = mc.pvc.size if r.creates_model_cache_claim else None
    if claim is not None and claim < need:
        problems.append(("modelCache.pvc.size", small_claim(m, claim, weights, need)))
    pods = sum(g.replicas for g in cfg.workers)
    locations = list(r.cache_locations)
    # A node cache is one per node of each class with workers; a claim is one cache.
    caches = sum(cfg.gpu_classes[c].nodes for c in locations) if mc.mode in ("nodeVolume", "hostPath") \
        else len(locations)
    return ModelCacheSizing(mode=mc.mode, stored_parameters=m.stored_parameters, weights_bytes=weights,
                            tokenizer_bytes=m.tokenizer_bytes, bytes_per_cache=need, locations=locations,
                            claim_bytes=claim, downloads=caches if locations else pods)


def size(r: ResolvedStack) -> StackSizing:
    """Size every worker group; raises ConfigError if a worker cannot fit its GPU or its memory limit."""
    cfg, stack = r.config, r.name
    m = cfg.model
    per_token = r.kv_bytes_per_token
    per_request = per_token * cfg.workload.input_tokens
    overhead = cfg.sizing.gpu_overhead_per_worker
    problems: list[tuple[str, str]] = []
    pools = _pools(r)
    layout = kv_layout(m, cfg.workload.input_tokens)

    groups = []
    for g in cfg.workers:
        pool = pools.get(g.name, 0)
        cls = cfg.gpu_classes[g.gpu_class]
        rank = r.ranks(g)
        tp, weights_gpu = rank.count, rank.weight_bytes
        per_worker = weights_gpu + pool + overhead
        util = math.ceil(per_worker / cls.memory * 100) / 100
        resolved_context = r.context(g)
        context, context_source = resolved_context.tokens, resolved_context.source
        floor, limit, request, source = memory(cfg, g, rank, pool, per_request, context, problems)
        # A rank holds its share of the KV heads: a block of the pool costs its share of a block.
        have, need = rank.pool_blocks(pool), blocks_for_sequence(context)
        # A group with no replicas and no pool of its own starts no worker: nothing to hold.
        if (g.replicas or g.kv_cache_bytes is not None) and have < need:
            problems.append((f"workers.{g.name}.kvCacheBytes",
                             short_pool(cfg, g, rank, pool, context, context_source,
                                        r.placement.sharing_one_gpu(g.gpu_class))))
        groups.append(GroupSizing(
            name=g.name, role=g.role, gpu_class=g.gpu_class, replicas=g.replicas, tensor_parallel=tp,
            kv_cache_bytes=pool, kv_cache_source="config" if g.kv_cache_bytes is not None else "derived",
            max_model_len=context, max_model_len_source=context_source,
            pool_blocks=have, blocks_for_max_len=need,
            weights_bytes=weights_gpu, gpu_overhead_bytes=overhead, gpu_bytes_per_worker=per_worker,
            gpu_memory_utilization=util, cpu_buffers=g.cpu_buffers, host_memory_floor_bytes=floor,
            memory_limit_bytes=limit, memory_request_bytes=request, memory_source=source,
            steady_state_bytes=cfg.workload.concurrency * per_request if g.cpu_buffers else 0,
            requests_in_pool=rank.together(pool) / per_request))

    gpus = []
    for cls_name in r.worker_classes:
        cls = cfg.gpu_classes[cls_name]
        budget = gpu_budget(cls)
        running = {g.name for g in r.placement.active_on(cls_name)}
        sized = [s for s in groups if s.name in running]
        c = r.placement.sharing_one_gpu(cls_name)
        # The most one GPU may carry: the c largest of the class's workers (per GPU) on it at once.
        planned = largest([(s.gpu_bytes_per_worker, s.replicas) for s in sized], c)
        gpus.append(GpuFit(cls_name, sum(s.replicas for s in sized), cls.memory, budget, planned, sharing=c,
                           nodes=cls.nodes, gpus_per_node=cls.gpus_per_node,
                           gpus_needed=r.placement.gpus_needed(cls_name) if cls.sharing == "whole" else None))
        if planned > budget:
            problems.append((f"gpuClasses.{cls_name}", gpu_overplanned(cls, budget, planned, sized, c)))
        if (short := whole_gpus_short(r, cls_name) if cls.sharing == "whole" else sliced_short(r, cls_name)):
            problems.append((f"gpuClasses.{cls_name}", short))
    cache = model_cache(r, problems)
    if problems:
        raise ConfigError(stack_file(stack), problems)
    return StackSizing(stack=stack, model=m.name, kv_bytes_per_token=per_token,
                  kv_bytes_per_request=per_request, kv_layout=layout, input_tokens=cfg.workload.input_tokens,
                  concurrency=cfg.workload.concurrency, prefix_types=cfg.workload.prefix_types,
                  groups=groups, gpus=gpus,
                  transfers=_transfers(r, per_token, pools), model_cache=cache)
