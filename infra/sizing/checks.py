"""The fit checks and their messages: a worker's host memory against its floor, a pool against one
max-length sequence. Each message says what is wrong, why (with the numbers) and the fixes."""

from __future__ import annotations

import math

from infra import prefix_cache, units
from infra.config.models import GpuClass, Model, StackConfig, WorkerGroup
from infra.resolved import ContextSource
from infra.sizing.formulas import (
    blocks_for_sequence,
    gpu_budget,
    host_memory_floor,
    largest_pool_for_limit,
)
from infra.sizing.report import GroupSizing, KvLayout


def below_floor(cfg: StackConfig, g: WorkerGroup, pool: int, per_request: int, limit: int, floor: int,
                context: int, layout: KvLayout) -> str:
    """Why `limit` is too low for this worker, in its role's terms, and the fixes."""
    s = cfg.sizing
    if not g.cpu_buffers:
        why = ("an aggregated worker keeps no KV host mirror" if g.role == "agg"
               else "with bufferDevice cuda it keeps no KV host mirror")
        return (f"{units.written(limit)} is below the {units.human(floor)} ({units.written(floor)}) this worker "
                f"needs: its vLLM base resident memory (sizing.vllmBaseMemory; {why}), and the pod would be OOMKilled "
                f"loading the model. Raise memoryLimit to at least {units.written(floor)}, or lower "
                "sizing.vllmBaseMemory if you measured less")
    mirror = units.human(pool * (1 + s.host_headroom_percent / 100))
    largest = largest_pool_for_limit(limit, s.vllm_base_memory, s.host_headroom_percent)
    # The smallest pool vLLM starts with: one sequence of the group's max_model_len and the null block.
    smallest_pool = blocks_for_sequence(context) * layout.block_bytes
    if largest >= smallest_pool:
        second = (f"or set workers.{g.name}.kvCacheBytes <= {largest // units.MI}Mi, the largest "
                  f"KV pool whose host mirror fits {units.written(limit)} "
                  f"({largest / per_request:.1f} requests of {units.human(per_request)})")
    else:
        smallest = host_memory_floor(s.vllm_base_memory, smallest_pool, s.host_headroom_percent, True)
        second = (f"or shrink the pool with workers.{g.name}.kvCacheBytes, which needs a limit too: "
                  f"{units.written(limit)} leaves {units.human(max(0, limit - s.vllm_base_memory))} "
                  f"above the vLLM base, and even the smallest pool vLLM starts with "
                  f"({units.human(smallest_pool)}: one {context:,}-token sequence and the null block) "
                  f"needs memoryLimit >= {units.written(smallest)}")
    return (f"{units.written(limit)} is below the {units.human(floor)} ({units.written(floor)}) this worker needs "
            f"({units.human(s.vllm_base_memory)} vLLM base + {mirror} KV host mirror "
            f"of its {units.human(pool)} pool incl. {s.host_headroom_percent:g}% "
            f"headroom); with kv_buffer_device=cpu vLLM mirrors the whole KV pool in "
            f"host memory and the pod is OOMKilled as it fills. Raise memoryLimit to at "
            f"least {units.written(floor)}, {second}")


def memory(cfg: StackConfig, g: WorkerGroup, pool: int, per_request: int, context: int, layout: KvLayout,
           problems: list) -> tuple[int, int, int, str]:
    """The group's host memory floor, limit, request and where the limit came from; a limit below the
    floor or a request above the limit is a problem. `context` and `layout` are what size() resolved."""
    s = cfg.sizing
    floor = host_memory_floor(s.vllm_base_memory, pool, s.host_headroom_percent, g.cpu_buffers)
    limit, source = (floor, "floor") if g.memory_limit is None else (g.memory_limit, "config")
    request = limit if g.memory_request is None else g.memory_request
    if limit < floor:
        problems.append((f"workers.{g.name}.memoryLimit",
                         below_floor(cfg, g, pool, per_request, limit, floor, context, layout)))
    if request > limit:
        given = ("memoryLimit" if g.memory_limit is not None
                 else "the host memory floor (the limit while memoryLimit is unset)")
        problems.append((f"workers.{g.name}.memoryRequest",
                         f"{units.written(request)} is above {given}, {units.written(limit)}; Kubernetes rejects a "
                         f"request above its limit. Lower memoryRequest to at most {units.written(limit)}"
                         + ("" if g.memory_limit is not None else ", or set memoryLimit >= memoryRequest")))
    return floor, limit, request, source


def short_pool(cfg: StackConfig, g: WorkerGroup, pool: int, block: int, tokens: int, source: ContextSource,
               workers: int) -> str:
    """Why this group's pool cannot hold one sequence of its max_model_len, and the fixes; `workers`
    share its GPU class's node (the resolved stack's count)."""
    w, need = cfg.workload, blocks_for_sequence(tokens)
    have = pool // block
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
        pool_is = (f"the {g.gpu_class} GPU ({units.human(cls.memory)}, {units.human(gpu_budget(cls))} after "
                   f"its {cls.memory_reserve:.0%} reserve) leaves {units.human(pool)} of KV pool per worker for "
                   f"{workers} workers (each {units.human(cfg.model.parameters * cfg.model.dtype_bytes)} weights + "
                   f"{units.human(cfg.sizing.gpu_overhead_per_worker)} overhead), which")
        grow = f"run fewer workers on this GPU (each needs a pool of at least {at_least})"
    shrink = (f", or shorten the context with {where}: at most {longest:,} tokens fit, and it must hold the "
              f"{sized:,} (inputTokens + outputTokens) the stack is sized for" if longest >= sized else
              f" (a shorter context does not help: this pool cannot hold even the sized requests, {sized:,} tokens)")
    return (f"{pool_is} holds {have:,} blocks of {prefix_cache.BLOCK_TOKENS} tokens "
            f"({block:,} bytes each across {cfg.model.layers} layers), but one sequence of max_model_len "
            f"{tokens:,} ({source}) needs {need:,}: its {need - 1:,} blocks and vLLM's null block. vLLM refuses "
            f"to start (\"To serve at least one request with the model's max seq len ...\") and the pod "
            f"crash-loops. Fix: {grow}{shrink}")


def gpu_overplanned(cls: GpuClass, budget: int, planned: int, sized: list[GroupSizing]) -> str:
    """The workers sharing one GPU plan more than its budget."""
    each = "; ".join(
        f"{s.replicas} x {s.name} = {s.replicas} x ({units.human(s.weights_bytes)} weights + "
        f"{units.human(s.kv_cache_bytes)} KV + {units.human(s.gpu_overhead_bytes)} overhead)"
        for s in sized)
    return (f"the workers sharing this GPU plan {units.human(planned)}, more than its "
            f"{units.human(budget)} ({units.human(cls.memory)} less "
            f"{cls.memory_reserve:.0%} reserve): {each}. Time-slicing does not isolate "
            "memory, so a worker would fail to start or crash. Lower kvCacheBytes, "
            "or run fewer replicas on this class")


def small_claim(m: Model, claim: int, weights: int, need: int) -> str:
    """A claim dynamo-lab would create too small for the model's files."""
    return (f"{units.human(claim)} is below the {units.human(need)} ({need:,} B) "
            f"the model cache holds: {m.name}'s weights as stored, {m.stored_parameters:,} "
            f"parameters x {m.dtype_bytes} B = {weights:,} B, plus {m.tokenizer_bytes:,} B of "
            "config and tokenizer files; the download would fill the volume and fail. Raise "
            f"modelCache.pvc.size to at least {math.ceil(need / units.GI)}Gi")
