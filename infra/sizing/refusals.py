"""What the sizing refuses, and the words it refuses it in: a worker's host memory against its
floor, a pool against one max-length sequence, a GPU against its budget, a class's nodes against its
pods. Each message says what is wrong, why (with the numbers) and the fixes."""

from __future__ import annotations

import math
from typing import Optional

from infra import prefix_cache, units
from infra.config.schema import GpuClass, Model, StackConfig, WorkerGroup
from infra.resolved import ContextSource, Ranks, ResolvedStack
from infra.sizing.formulas import (
    blocks_for_sequence,
    gpu_budget,
    host_memory_floor,
    largest_pool_for_limit,
)
from infra.sizing.report import GroupSizing

NAMED = 3  # the pods a refusal names of those that would stay Pending


def below_floor(cfg: StackConfig, g: WorkerGroup, rank: Ranks, pool: int, per_request: int, limit: int, floor: int,
                context: int) -> str:
    """Why `limit` is too low for this worker, in its role's terms, and the fixes; `pool` is a rank's."""
    s = cfg.sizing
    tp = rank.count
    base, ranks = host_base(cfg, rank), (f" x {tp} ranks" if tp > 1 else "")
    if not g.cpu_buffers:
        why = ("an aggregated worker keeps no KV host mirror" if g.role == "agg"
               else "with bufferDevice cuda it keeps no KV host mirror")
        return (f"{units.written(limit)} is below the {units.human(floor)} ({units.written(floor)}) this worker "
                f"needs: its vLLM base resident memory (sizing.vllmBaseMemory{ranks}; {why}), and the pod would be "
                "OOMKilled "
                f"loading the model. Raise memoryLimit to at least {units.written(floor)}, or lower "
                "sizing.vllmBaseMemory if you measured less")
    mirror = units.human(rank.together(pool) * (1 + s.host_headroom_percent / 100))
    # The mirror holds every rank's pool: the largest per-rank pool is the largest mirror over the ranks.
    largest = rank.share(largest_pool_for_limit(limit, base, s.host_headroom_percent)) // units.MI * units.MI
    # The smallest pool vLLM starts with: one sequence of the group's max_model_len and the null block.
    smallest_pool = blocks_for_sequence(context) * rank.block_bytes
    if largest >= smallest_pool:
        second = (f"or set workers.{g.name}.kvCacheBytes <= {largest // units.MI}Mi, the largest "
                  f"KV pool{' per rank' if tp > 1 else ''} whose host mirror fits {units.written(limit)} "
                  f"({rank.together(largest) / per_request:.1f} requests of {units.human(per_request)})")
    else:
        smallest = host_memory_floor(base, rank.together(smallest_pool), s.host_headroom_percent, True)
        second = (f"or shrink the pool with workers.{g.name}.kvCacheBytes, which needs a limit too: "
                  f"{units.written(limit)} leaves {units.human(max(0, limit - base))} "
                  f"above the vLLM base, and even the smallest pool vLLM starts with "
                  f"({units.human(rank.together(smallest_pool))}: one {context:,}-token sequence and the null block) "
                  f"needs memoryLimit >= {units.written(smallest)}")
    pool_words = f"{units.human(pool)} pool" if tp == 1 else f"{tp} ranks' {units.human(pool)} pools"
    return (f"{units.written(limit)} is below the {units.human(floor)} ({units.written(floor)}) this worker needs "
            f"({units.human(base)} vLLM base{ranks} + {mirror} KV host mirror "
            f"of its {pool_words} incl. {s.host_headroom_percent:g}% "
            f"headroom); with kv_buffer_device=cpu vLLM mirrors the whole KV pool in "
            f"host memory and the pod is OOMKilled as it fills. Raise memoryLimit to at "
            f"least {units.written(floor)}, {second}")


def host_base(cfg: StackConfig, rank: Ranks) -> int:
    """ESTIMATE: a replica's host RSS without its KV mirror, the vLLM base for each of its
    tensorParallel ranks (each rank is a worker process of its own, with its own CUDA context)."""
    return rank.together(cfg.sizing.vllm_base_memory)


def memory(cfg: StackConfig, g: WorkerGroup, rank: Ranks, pool: int, per_request: int, context: int,
           problems: list) -> tuple[int, int, int, str]:
    """The group's host memory floor, limit, request and where the limit came from; a limit below the
    floor or a request above the limit is a problem. `pool` is a rank's, `context` what size() resolved."""
    s = cfg.sizing
    floor = host_memory_floor(host_base(cfg, rank), rank.together(pool), s.host_headroom_percent, g.cpu_buffers)
    limit, source = (floor, "floor") if g.memory_limit is None else (g.memory_limit, "config")
    request = limit if g.memory_request is None else g.memory_request
    if limit < floor:
        problems.append((f"workers.{g.name}.memoryLimit",
                         below_floor(cfg, g, rank, pool, per_request, limit, floor, context)))
    if request > limit:
        given = ("memoryLimit" if g.memory_limit is not None
                 else "the host memory floor (the limit while memoryLimit is unset)")
        problems.append((f"workers.{g.name}.memoryRequest",
                         f"{units.written(request)} is above {given}, {units.written(limit)}; Kubernetes rejects a "
                         f"request above its limit. Lower memoryRequest to at most {units.written(limit)}"
                         + ("" if g.memory_limit is not None else ", or set memoryLimit >= memoryRequest")))
    return floor, limit, request, source


def short_pool(cfg: StackConfig, g: WorkerGroup, rank: Ranks, pool: int, tokens: int, source: ContextSource,
               workers: int) -> str:
    """Why this group's pool cannot hold one sequence of its max_model_len, and the fixes; `rank` is
    what each of its ranks holds, `workers` may share one of its class's GPUs (the resolved stack's)."""
    w, need = cfg.workload, blocks_for_sequence(tokens)
    block, have = rank.block_bytes, rank.pool_blocks(pool)
    at_least = units.to_mi_quantity(need * block)
    longest = (have - 1) * prefix_cache.BLOCK_TOKENS  # what this pool can hold, null block aside
    sized = w.input_tokens + w.output_tokens
    where = {ContextSource.EXTRA_ARGS: f"workers.{g.name}.extraArgs --max-model-len",
             ContextSource.WORKLOAD: "workload.maxModelLen",
             ContextSource.DERIVED: "workload.maxModelLen (default: inputTokens + outputTokens, block-aligned)"}[source]
    if g.kv_cache_bytes is not None:
        pool_is = f"the {units.human(pool)} KV pool"
        grow = f"raise workers.{g.name}.kvCacheBytes to at least {at_least}"
    else:
        cls = cfg.gpu_classes[g.gpu_class]
        weights = rank.weight_bytes
        sharing = f"for {workers} workers" if workers > 1 else "for one worker's rank"
        pool_is = (f"the {g.gpu_class} GPU ({units.human(cls.memory)}, {units.human(gpu_budget(cls))} after "
                   f"its {cls.memory_reserve:.0%} reserve) leaves {units.human(pool)} of KV pool per worker "
                   f"{sharing} (each {units.human(weights)} weights + "
                   f"{units.human(cfg.sizing.gpu_overhead_per_worker)} overhead), which")
        spread = (f", or spread them over the class's {cls.nodes} nodes (workers.{g.name}.spread: even; the "
                  "scheduler may otherwise put them all on one)" if cls.nodes > 1 and g.spread == "none" else "")
        grow = (f"run fewer workers on this GPU (each needs a pool of at least {at_least}){spread}" if workers > 1 else
                f"raise tensorParallel to split the weights over more GPUs (this rank needs a pool of at least "
                f"{at_least})")
    shrink = (f", or shorten the context with {where}: at most {longest:,} tokens fit, and it must hold the "
              f"{sized:,} (inputTokens + outputTokens) the stack is sized for" if longest >= sized else
              f" (a shorter context does not help: this pool cannot hold even the sized requests, {sized:,} tokens)")
    return (f"{pool_is} holds {have:,} blocks of {prefix_cache.BLOCK_TOKENS} tokens "
            f"({block:,} bytes each across {cfg.model.layers} layers), but one sequence of max_model_len "
            f"{tokens:,} ({source}) needs {need:,}: its {need - 1:,} blocks and vLLM's null block. vLLM refuses "
            f"to start (\"To serve at least one request with the model's max seq len ...\") and the pod "
            f"crash-loops. Fix: {grow}{shrink}")


def gpu_overplanned(cls: GpuClass, budget: int, planned: int, sized: list[GroupSizing], sharing: int) -> str:
    """The workers that may share one GPU plan more than its budget."""
    each = "; ".join(
        f"{s.replicas} x {s.name} = {s.replicas} x ({units.human(s.weights_bytes)} weights + "
        f"{units.human(s.kv_cache_bytes)} KV + {units.human(s.gpu_overhead_bytes)} overhead)"
        for s in sized)
    if sharing == 1:
        return (f"one worker's rank plans {units.human(planned)} on its GPU, more than its {units.human(budget)} "
                f"({units.human(cls.memory)} less {cls.memory_reserve:.0%} reserve): {each}. It would fail to "
                "start. Lower kvCacheBytes, or raise tensorParallel to split the weights over more GPUs")
    total = sum(s.replicas for s in sized)
    who = "the workers sharing this GPU" if sharing >= total else f"the {sharing} of them that may share one GPU"
    return (f"{who} plan {units.human(planned)}, more than its "
            f"{units.human(budget)} ({units.human(cls.memory)} less "
            f"{cls.memory_reserve:.0%} reserve): {each}. Time-slicing does not isolate "
            "memory, so a worker would fail to start or crash. Lower kvCacheBytes, "
            "or run fewer replicas on this class")


def sliced_short(r: ResolvedStack, gpu_class: str) -> Optional[str]:
    """A time-sliced class with `slicesPerGpu` whose nodes advertise fewer units than it has workers:
    nodes x gpusPerNode x slicesPerGpu, one per worker (None: they fit, or the slices are not given).
    Every pod asks one unit, so while the units suffice the placement (fewest pods first) leaves none
    pending whatever the spreads."""
    cls = r.config.gpu_classes[gpu_class]
    if cls.slices_per_gpu is None:
        return None
    units, workers = cls.gpus * cls.slices_per_gpu, r.placement.workers_on(gpu_class)
    if workers <= units:
        return None
    return (f"its {workers} workers each take one time-sliced unit, and its nodes advertise {units} "
            f"({cls.nodes} node{'s' * (cls.nodes > 1)} x {cls.gpus_per_node} GPU{'s' * (cls.gpus_per_node > 1)} x "
            f"{cls.slices_per_gpu} slices: nodes, gpusPerNode, slicesPerGpu), so {workers - units} would stay "
            "Pending. Run fewer replicas on this class, or raise slicesPerGpu with the device plugin's replicas")


def whole_gpus_short(r: ResolvedStack, gpu_class: str) -> Optional[str]:
    """A `whole` class whose nodes cannot hold its workers' pods: each needs its tensorParallel GPUs on
    one node, and its group's spread; placed as the scheduler places them (Placement.whole_gpus_fit),
    some find no node (None: they fit)."""
    cls = r.config.gpu_classes[gpu_class]
    if r.placement.whole_gpus_fit(gpu_class):
        return None
    each = r.placement.gpus_per_pod
    want = ", ".join(f"{g.replicas} x {g.name} ({each(g)} GPU{'s' * (each(g) > 1)} each"
                     + (f", spread {g.spread}" if g.spread != "none" else "") + ")"
                     for g in r.placement.active_on(gpu_class))
    needed = r.placement.gpus_needed(gpu_class)
    stuck = r.placement.unplaced(gpu_class)
    nodes = f"{cls.nodes} node{'s' * (cls.nodes > 1)} x {cls.gpus_per_node} GPUs (nodes, gpusPerNode)"
    head = f"its workers need {needed} whole GPUs ({want}), and each pod's GPUs must be on one node: {nodes}"
    if not stuck:  # they fit only in the decision's order: the larger first
        later = _pods(r, r.placement.unplaced_smaller_first(gpu_class), gpu_class)
        return (f"{head} hold them only if the larger pods reach the scheduler first, and the operator creates "
                "each group's pods in no fixed order: where the smaller come first, the scheduler spreads them "
                f"over the nodes (the least allocated first) and {later} would stay Pending. Give the groups of "
                "different tensorParallel classes of their own nodes (a nodeSelector each), or one tensorParallel, "
                "or run fewer replicas")
    return (f"{head} cannot hold them as the scheduler places them, so {_pods(r, stuck, gpu_class)} would stay "
            "Pending. Run fewer replicas, or give the class more nodes" + (", or loosen a spread" if any(
                g.spread != "none" for g in r.placement.active_on(gpu_class)) else ""))


def _pods(r: ResolvedStack, stuck: list[str], gpu_class: str) -> str:
    """Pods that would stay Pending: a few by name; of many (thousands at the schema's bounds), the
    first few and how many."""
    if len(stuck) <= NAMED:
        return ", ".join(stuck)
    return (f"{len(stuck)} of the {r.placement.workers_on(gpu_class)} pods ({', '.join(stuck[:NAMED])} and "
            f"{len(stuck) - NAMED} more)")


def small_claim(m: Model, claim: int, weights: int, need: int) -> str:
    """A claim dynamo-lab would create too small for the model's files."""
    return (f"{units.human(claim)} is below the {units.human(need)} ({need:,} B) "
            f"the model cache holds: {m.name}'s weights as stored, {m.stored_parameters:,} "
            f"parameters x {m.dtype_bytes} B = {weights:,} B, plus {m.tokenizer_bytes:,} B of "
            "config and tokenizer files; the download would fill the volume and fail. Raise "
            f"modelCache.pvc.size to at least {math.ceil(need / units.GI)}Gi")
