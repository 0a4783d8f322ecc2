"""The resolved stack: what a stack file resolves to, worked out once when it loads and read by all.

The schema (infra/config/) says what a user may write; this module says what it means for one
stack: the per-stack defaults filled in (the graph's name and namespace, the benchmark's requests),
each worker group's context length and where it came from, the groups that run workers and the GPU
classes they run on, every name derived from the graph's (infra/names.py), where the model cache
lives, what the model's weights and a token's KV take, what one rank of a worker holds (`Ranks`),
the engine settings a worker's flags give (`EngineSettings`) and which prefill ranks each decode
rank reads its KV from (`kv_reads`). The cross-key checks (infra.validate), the sizing, the
builders, the plan, preflight, predict and advise read these facts here; none works them out again
(tests/infra/test_one_definition.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import Optional, TypeVar

from infra import kv_ranks, names
from infra.config import engine_flags
from infra.config.fields import node_path, vllm_int
from infra.config.gpu_classes import GpuClass
from infra.config.model import Model
from infra.config.model_cache import NODE_CACHE_PREFIX
from infra.config.stack import StackConfig
from infra.config.workers import WorkerGroup
from infra.config.workload import Workload
from infra.placement import Placement, running
from infra.prefix_cache import BLOCK_TOKENS, blocks
from infra.units import GI

N = TypeVar("N", int, float)


class ContextSource(enum.StrEnum):
    """Where a worker's context length (vLLM --max-model-len) comes from; its value is the key a user
    writes (what messages and the sizing's JSON print)."""

    EXTRA_ARGS = "extraArgs"
    WORKLOAD = "workload.maxModelLen"
    DERIVED = "derived"


@dataclass(frozen=True)
class Context:
    """A worker group's context length, in tokens, and where it comes from."""

    tokens: int
    source: ContextSource


def derived_context(w: Workload) -> int:
    """The context when none is given: the sized requests (input + output) rounded up to a block."""
    return blocks(w.input_tokens + w.output_tokens) * BLOCK_TOKENS


def _context(cfg: StackConfig, group: WorkerGroup) -> Optional[Context]:
    """The group's extraArgs `--max-model-len`, else workload.maxModelLen, else the derived length;
    None when extraArgs gives one that is not a token count (infra.validate refuses it)."""
    given = group.extra_arg("--max-model-len")
    if given is not None:
        tokens = vllm_int(given)
        return None if tokens is None else Context(tokens, ContextSource.EXTRA_ARGS)
    if cfg.workload.max_model_len is not None:
        return Context(cfg.workload.max_model_len, ContextSource.WORKLOAD)
    return Context(derived_context(cfg.workload), ContextSource.DERIVED)


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """KV bytes one token takes over `layers`: 2 (K and V) x layers x KV heads x head_dim x dtype bytes."""
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def model_kv_bytes_per_token(m: Model) -> int:
    """What one token's KV takes in the whole model (every layer, every KV head)."""
    return kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, m.dtype_bytes)


def weight_bytes(m: Model) -> int:
    """What the model's weights take in GPU memory: parameters x dtype bytes (the parameters it
    serves; the checkpoint may store tied weights twice, which only the model cache holds)."""
    return m.parameters * m.dtype_bytes


@dataclass(frozen=True)
class Ranks:
    """One worker of a group as its tensorParallel ranks hold it: each rank is a process on a GPU
    (or a time-sliced unit) of its own, holding its share of the weights and of every token's KV
    heads (vLLM shards attention, MLP, embedding and LM head over the ranks; the norms, a few KiB,
    sit on every rank), and its own KV pool of `kvCacheBytes` (--kv-cache-memory-bytes is per rank).
    The sizing plans a GPU by it, the predictor's workers count their blocks by it."""

    count: int  # the ranks: tensorParallel
    weight_bytes: int  # ESTIMATE: one rank's share of the weights, the model's over the ranks, rounded up
    kv_bytes_per_token: int  # one rank's share of a token's KV (tensorParallel divides the KV heads)

    @property
    def block_bytes(self) -> int:
        """What one block of BLOCK_TOKENS tokens costs a rank's pool."""
        return self.kv_bytes_per_token * BLOCK_TOKENS

    def pool_blocks(self, pool_bytes: int) -> int:
        """The blocks a rank's pool of `pool_bytes` holds (vLLM's null block among them)."""
        return pool_bytes // self.block_bytes

    def together(self, each: N) -> N:
        """What the worker's ranks hold (or do) together, `each` per rank: its pools, its host
        mirror, its vLLM base, its FLOPs."""
        return each * self.count

    def share(self, together: int) -> int:
        """One rank's share of what the worker's ranks hold together, rounded down."""
        return together // self.count


def ranks(cfg: StackConfig, group: WorkerGroup) -> Ranks:
    """A worker of `group` by its ranks (`Ranks`); `ResolvedStack.ranks` for a resolved stack, this
    for the readers handed the config alone (the predictor's cells, in worker processes)."""
    tp = group.tensor_parallel
    return Ranks(tp, -(-weight_bytes(cfg.model) // tp), model_kv_bytes_per_token(cfg.model) // tp)


# vLLM 0.31.0's scheduler defaults for Dynamo's usage context (OPENAI_API_SERVER: dynamo/vllm/main.py
# passes it), by the card's memory: vllm/engine/arg_utils.py,
# _set_default_max_num_seqs_and_batched_tokens_args. (memory from, --max-num-batched-tokens,
# --max-num-seqs), largest first; below the last, SMALL_CARD_DEFAULTS. The 70 GiB step is vLLM's
# for a card that is not an A100, as the predictor's costs took it before; an A100 class is not
# told apart here.
ENGINE_DEFAULTS = ((160 * GI, 16384, 1024), (70 * GI, 8192, 1024))
SMALL_CARD_DEFAULTS = (2048, 256)


@dataclass(frozen=True)
class EngineSettings:
    """The vLLM scheduler settings one worker of a group runs with: its extraArgs'
    `--max-num-batched-tokens` and `--max-num-seqs` (engine_flags.count: the last one given, in any
    spelling vLLM's parser accepts, read with vLLM's type for the flag by the reader the extraArgs
    check uses, which refused at load any value vLLM would not run with), else vLLM 0.31.0's
    defaults by the card's memory (ENGINE_DEFAULTS): 16,384 / 1,024 from 160 GiB, 8,192 / 1,024 from
    70 GiB, else 2,048 / 256. The lab's cards get 2,048 / 256: a 2,371-token prompt takes two steps.
    (The context, --max-model-len, is `Context`, with where it comes from.)"""

    max_num_batched_tokens: int
    max_num_seqs: int


def engine_settings(group: WorkerGroup, cls: GpuClass) -> EngineSettings:
    """`group`'s settings on a card of `cls` (`EngineSettings`); `ResolvedStack.engine` for a
    resolved stack, this for the readers handed the config alone."""
    tokens, seqs = next(((t, s) for floor, t, s in ENGINE_DEFAULTS if cls.memory >= floor), SMALL_CARD_DEFAULTS)
    given_tokens = engine_flags.count(group.extra_args, "--max-num-batched-tokens")
    given_seqs = engine_flags.count(group.extra_args, "--max-num-seqs")
    return EngineSettings(tokens if given_tokens is None else given_tokens, seqs if given_seqs is None else given_seqs)


@dataclass(frozen=True)
class ResolvedStack:
    """One stack, resolved. Built by `resolve`; frozen, so every reader sees the same facts."""

    name: str  # the stack's
    config: StackConfig  # the stack file, per-stack defaults filled in
    # Each worker group's context, in the order of `config.workers` (by position, not name: two
    # groups may share a name until infra.validate refuses it, and each keeps its own); None for a
    # group whose extraArgs length is not a token count (infra.validate refuses that too).
    contexts: tuple[Optional[Context], ...]
    # The groups that start workers (replicas > 0), in the file's order, and the GPU classes they
    # run on, each once in that order.
    active: tuple[WorkerGroup, ...]
    worker_classes: tuple[str, ...]

    @property
    def graph(self) -> str:
        return self.config.graph.name

    @property
    def namespace(self) -> str:
        return self.config.graph.namespace

    def context(self, group: WorkerGroup) -> Optional[Context]:
        """The context of `group`, one of `config.workers` (None: its extraArgs length is no count)."""
        for g, context in zip(self.config.workers, self.contexts, strict=True):
            if g is group:
                return context
        raise ValueError(f"worker group {group.name!r} is not one of this stack's")

    @cached_property
    def placement(self) -> Placement:
        """Where the running groups' replicas may land and are expected to (infra/placement/)."""
        return Placement(self.config, self.active)

    # --- What the model and a worker's ranks hold ----------------------------------------------------

    @property
    def weight_bytes(self) -> int:
        """The model's weights in GPU memory (`weight_bytes`)."""
        return weight_bytes(self.config.model)

    @property
    def kv_bytes_per_token(self) -> int:
        """One token's KV in the whole model (`model_kv_bytes_per_token`)."""
        return model_kv_bytes_per_token(self.config.model)

    def ranks(self, group: WorkerGroup) -> Ranks:
        """What each of `group`'s ranks holds (`Ranks`)."""
        return ranks(self.config, group)

    def engine(self, group: WorkerGroup) -> EngineSettings:
        """The scheduler settings `group`'s workers run with (`EngineSettings`)."""
        return engine_settings(group, self.config.gpu_classes[group.gpu_class])

    def kv_reads(self, prefill: WorkerGroup, decode: WorkerGroup) -> tuple[kv_ranks.RankRead, ...]:
        """The reads one request's KV takes from a `prefill` worker to a `decode` worker, rank by
        decode rank (infra/kv_ranks.py: which prefill ranks, which KV heads); for a pair
        infra.validate took."""
        return kv_ranks.reads(prefill.tensor_parallel, decode.tensor_parallel, self.config.model.kv_heads)

    def service(self, group: WorkerGroup) -> str:
        return names.service(self.graph, group.name)

    # --- The model cache ---------------------------------------------------------------------------

    @property
    def node_cache_directory(self) -> str:
        """The directory on each GPU node that a node cache (nodeVolume, hostPath) really is: the
        stack's own `<modelCache.hostPath>/dynamo-lab-cache.<graph namespace>` (NODE_CACHE_PREFIX),
        normalized (fields.node_path), the path the PersistentVolume or the pods' hostPath and the
        pre-pull's root step use, and the one infra.validate judges."""
        return node_path(f"{self.config.model_cache.host_path}/{NODE_CACHE_PREFIX}{self.namespace}")

    @property
    def model_cache_claim(self) -> str:
        """The model cache's claim: the one named, else the one dynamo-lab creates, <graph>-model-cache."""
        return self.config.model_cache.pvc.claim_name or names.model_cache_claim(self.graph)

    @property
    def creates_model_cache_claim(self) -> bool:
        """Whether dynamo-lab creates the model cache's claim: a pvc cache with no claimName given."""
        mc = self.config.model_cache
        return mc.mode == "pvc" and mc.pvc.claim_name is None

    def node_cache_claim(self, gpu_class: str) -> str:
        return names.node_cache_claim(self.graph, gpu_class)

    def node_cache_volume(self, gpu_class: str) -> str:
        return names.node_cache_volume(self.namespace, gpu_class)

    @property
    def cache_locations(self) -> tuple[str, ...]:
        """Where the model caches are: the GPU classes that run workers (a directory on each one's
        node), the claim (pvc), or none (off: every worker pod downloads)."""
        mode = self.config.model_cache.mode
        if mode == "off":
            return ()
        return (self.model_cache_claim,) if mode == "pvc" else self.worker_classes


def resolve(cfg: StackConfig, stack: str) -> ResolvedStack:
    """`cfg` (schema-valid) as stack `stack` resolves it. Raises nothing: what cannot resolve is left
    out for infra.validate to refuse with its key."""
    w, b = cfg.workload, cfg.benchmark
    cfg = cfg.model_copy(update={
        "graph": cfg.graph.model_copy(update={
            "name": cfg.graph.name or stack,
            "namespace": cfg.graph.namespace or names.default_graph_namespace(stack)}),
        "benchmark": b.model_copy(update={
            "prefix_tokens": w.prefix_tokens if b.prefix_tokens is None else b.prefix_tokens,
            "unique_tokens": w.unique_tokens if b.unique_tokens is None else b.unique_tokens,
            "output_tokens": w.output_tokens if b.output_tokens is None else b.output_tokens})})
    contexts = tuple(_context(cfg, g) for g in cfg.workers)
    active = running(cfg)
    return ResolvedStack(name=stack, config=cfg, contexts=contexts, active=active,
                         worker_classes=tuple(dict.fromkeys(g.gpu_class for g in active)))
