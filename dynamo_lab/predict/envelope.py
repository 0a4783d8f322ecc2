"""The envelope: whether a figure's inputs are inside what the predictor's validation covered.

The predictor's constants were fitted to, and checked against, one lab's published table
(dynamo_lab/published.py, docs/lab.md). Its error (`predict --validate`, the uncertainty within
which advise calls two layouts tied) holds only for inputs like those; outside them a figure is the
model's physics alone, with no measured error (advise takes the validated one as a floor there).
`envelope` says which inputs of one figure (a stack at one point) are outside, each in a few words;
`predict` and `advise` attach it to every figure they print (docs/predictor.md, "Envelope"). Each
bound, and why it is that bound:

- GPU classes (the classes that run workers): the lab's two, as the default classes describe
  them (infra/catalogue.py DEFAULT_GPU_CLASSES: 24GB and 8GB; the cards behind them are the ones
  the lab's nodes report in tests/data/preflight/lab.json, an RTX 3090 and an RTX 3070 Laptop GPU).
  A class is the lab's when every figure the sizing and predictor read of it equals a default
  class's (its memory, reserve, TFLOP/s and bandwidth figures); its name and node selector only
  pick nodes, so they do not matter. Which class a role runs on and how many replicas it has are
  what advise searches: inside, as long as each class is the lab's.
- The link, wherever a request's KV may cross it: a prefill and a decode group on different
  classes, or on one class of several nodes (the placement's kv_path, as the sizing takes the
  cross-node path), or KV over RDMA (through the NIC even on one node): 1 Gbit/s at efficiency
  0.92, the stack defaults, which are the lab's 1GbE (docs/lab.md: "1GbE between the nodes";
  110-117 MB/s of payload).
- The KV transport (disaggregated groups only): UCX over TCP with CPU buffers, no RDMA
  (docs/lab.md: `UCX_TLS=tcp,self`, `kv_buffer_device: cpu`, "no RDMA"): a `ucxTls` enabling a
  transport that moves GPU memory or RDMA, or `bufferDevice: cuda`, is outside. A same-node or
  measured throughput in `sizing` replaces the rate the lab's stacks were predicted with: outside.
- The model: Qwen/Qwen3-0.6B in bfloat16 with its built-in geometry (docs/lab.md; published.py's
  KV bytes per request rest on it).
- The request shape: 2,000 shared-prefix + 371 unique tokens, 64 output tokens (published.py's
  docstring; docs/lab.md, "The workload"). The lab ran this one shape, so any other is outside: a
  prompt's prefill and KV bytes, and so every cost the model adds up, scale with its length.
- Prefix types: 2 to 24 (the published cells are at 2, 7, 12 and 24; between them the caches'
  behaviour was seen on both sides). Not checked without a shared prefix: then there is nothing
  for a prefix type to vary, and the prefix's own bound already says so.
- Concurrency: 1 to 8, closed loop (published.py: the steady-state cells are at concurrency 4,
  fitted, and 8, held out; the cross-server first requests at 1 and 4). Above 8 admission and
  queueing reach regimes the lab never loaded; an open-loop rate was never measured at all.

Steady-state cross-node P/D was published only as its first requests (published.py): that layout
is inside by the rules above when its classes and link are the lab's, but its validated error is
the table's, measured on same-node P/D and aggregated workers.

A worker on a card other than the lab's runs on another host than the lab's desktop, whose CPU the
host side was fitted on (params.py: the scheduler's pass, the worker process's output handling per
sampled request): so each GPU class of another card (another memory than the lab's two) names its
host as outside too (`_host`). Where the
output handling sets a decode's pace (many requests a step), ITL, TPOT and throughput rest on that
extrapolation (docs/peer.md, "The worker's output handling"); where, at the figure's concurrency,
that output handling would outlast a decoding worker's engine step by more than the peer
comparison's decode tolerance, the list names the group's "decode pace" as well (`_output_paced`).

What agreement with the peer adds (docs/peer.md): the lab measured none of the cards, models or
tensor-parallel degrees AIConfigurator has kernel data for, and AIConfigurator models no loaded
graph. A figure outside only in its GPU classes (and so their hosts), model and tensorParallel,
each a case where the predictor's engine step (its host side overlapping the GPU) agrees with
AIConfigurator 0.12.0's (PEER_AGREES), rests on the lab for what a loaded graph adds and on the
peer for the engine's steps: its basis is "lab+peer", not "physics". The agreement does not cover
the worker's output handling, which the peer does not model: that stays the lab's desktop's,
extrapolated. Its error is still not validated (`extrapolated`): the lab's error was measured on
the lab's steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from dynamo_lab.predict import peer
from dynamo_lab.predict.params import LAB
from infra import units
from infra.catalogue import BUILTIN_MODELS, DEFAULT_GPU_CLASSES, DEFAULT_MODEL, SAME_NODE_BYTES_PER_SECOND
from infra.config.fields import GPU_CAPABLE_TLS, expand_tls
from infra.config.gpu_classes import GpuClass
from infra.config.schema import Model, StackConfig, WorkerGroup
from infra.resolved import ResolvedStack

# The validated request shape (published.py, docs/lab.md "The workload").
PREFIX_TOKENS, UNIQUE_TOKENS, OUTPUT_TOKENS = 2000, 371, 64
PROMPT_TOKENS = PREFIX_TOKENS + UNIQUE_TOKENS
# The published prefix types run from 2 to 24 (published.py's table).
PREFIX_TYPES = (2, 24)
# The published concurrencies, closed loop: 4 (fitted) and 8 (held out); cross-server also at 1.
MAX_CONCURRENCY = 8
# The lab's link (docs/lab.md): the stack defaults of sizing.link.
LINK_BITS_PER_S, LINK_EFFICIENCY = 10**9, 0.92
# The lab's KV transport (docs/lab.md): UCX over TCP, CPU buffers.
LAB_UCX_TLS, LAB_BUFFER_DEVICE = "tcp,self", "cpu"
MODEL, MODEL_DTYPE = DEFAULT_MODEL, "bfloat16"
# The model figures the sizing and predictor read (its built-in geometry).
_GEOMETRY = ("layers", "kv_heads", "head_dim", "hidden_size", "attention_heads", "parameters")
# A GPU class's figures that only choose nodes (or bound the sizing's worst case, as slicesPerGpu
# does); the rest are what the sizing and predictor read: the lab's classes are one node of one
# time-sliced GPU each, so more nodes, more GPUs a node or whole GPUs are outside.
_SELECTS_NODES = {"node_selector", "resource", "rdma_resource", "slices_per_gpu"}


# Where the predictor's engine step agrees with AIConfigurator 0.12.0's (docs/peer.md): (model,
# tensorParallel, memoryBandwidth bytes/s, peakTflops), each a case whose static prefill and decode
# steps, the engine's (its host side overlapping the GPU, without the worker's output handling,
# which the peer does not model), are all within their tolerances (dynamo_lab/predict/peer.py; the
# slow tier holds this set to what the comparison finds). Measured 2026-12-06: every case compared,
# on the H100 SXM (3.35 TB/s) and the H200 SXM (4.8 TB/s), both 989 dense BF16 TFLOP/s.
_H100, _H200, _PEAK = 3350e9, 4800e9, 989.0
PEER_AGREES: frozenset[tuple[str, int, float, float]] = frozenset(
    (model, tp, bandwidth, _PEAK)
    for model, tp in (("Qwen/Qwen3-8B", 1), ("meta-llama/Llama-3.1-8B-Instruct", 1), ("Qwen/Qwen3-32B", 2),
                      ("Qwen/Qwen3-32B", 4), ("meta-llama/Llama-3.1-70B-Instruct", 4),
                      ("meta-llama/Llama-3.1-70B-Instruct", 8))
    for bandwidth in (_H100, _H200))


@dataclass(frozen=True)
class Envelope:
    """`outside`: each input outside what the validation covered, in a few words; empty: inside.
    `peer`: what is outside is only GPU classes, model and tensorParallel where the predictor's step
    costs agree with the peer's (PEER_AGREES)."""

    outside: tuple[str, ...] = ()
    peer: bool = False

    @property
    def extrapolated(self) -> bool:
        return bool(self.outside)

    @property
    def basis(self) -> str:
        """What the figure rests on: the lab's validation, the lab's and the peer's together, or physics."""
        return "lab" if not self.outside else "lab+peer" if self.peer else "physics"

    def as_dict(self) -> dict:
        return {"extrapolated": self.extrapolated, "basis": self.basis, "outside": list(self.outside)}

    def __or__(self, other: "Envelope") -> "Envelope":
        """Both figures' inputs: what either has outside, each once, in order; on the peer where every
        one with anything outside is."""
        outside = tuple(dict.fromkeys(self.outside + other.outside))
        return Envelope(outside, bool(outside) and all(e.peer for e in (self, other) if e.outside))


INSIDE = Envelope()


@functools.cache
def _lab_classes() -> dict[str, GpuClass]:
    return {name: GpuClass.model_validate(raw) for name, raw in DEFAULT_GPU_CLASSES.items()}


def _figures(c: GpuClass) -> dict:
    return {k: v for k, v in c.model_dump().items() if k not in _SELECTS_NODES}


def _gb(nbytes: int) -> str:
    """As the lab names its classes: 24,564 MiB is the 24GB class."""
    return f"{nbytes / 2**30:.0f}GB"


def _alias(field: str) -> str:
    return GpuClass.model_fields[field].alias or field


def gpu_class(name: str, c: GpuClass) -> Optional[str]:
    """None for one of the lab's classes (by its figures, whatever its name), else what differs."""
    lab = _lab_classes()
    mine = _figures(c)
    if any(_figures(known) == mine for known in lab.values()):
        return None
    same_memory = next(((k, known) for k, known in lab.items() if known.memory == c.memory), None)
    if same_memory is None:
        return (f"GPU class {name}: {_gb(c.memory)} (validated: the lab's "
                f"{' and '.join(_gb(k.memory) for k in lab.values())} classes)")
    lab_name, known = same_memory
    theirs = _figures(known)
    differ = [f for f in mine if mine[f] != theirs[f]]
    return (f"GPU class {name}: " + ", ".join(f"{_alias(f)} {_value(f, mine[f])}" for f in differ)
            + f" (validated: the lab's {_gb(known.memory)} class: "
            + ", ".join(_value(f, theirs[f]) for f in differ) + ")")


def _value(field: str, value: object) -> str:
    if field == "memory_bandwidth" and isinstance(value, (int, float)):
        return f"{units.human_si(value)}/s"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _changed_geometry(m: Model) -> list[str]:
    """The geometry fields in which a built-in model differs from its built-in figures."""
    builtin = BUILTIN_MODELS[m.name]
    return [f for f in _GEOMETRY if builtin.get(_camel(f)) is not None and getattr(m, f) != builtin[_camel(f)]]


def _model(cfg: StackConfig) -> list[str]:
    m = cfg.model
    if m.name != MODEL:
        return [f"model {m.name} (validated: {MODEL})"]
    out = [] if m.dtype == MODEL_DTYPE else [f"model dtype {m.dtype} (validated: {MODEL_DTYPE})"]
    changed = _changed_geometry(m)
    if changed:
        out.append(f"model {MODEL} with {', '.join(f'{_camel(f)} {getattr(m, f)}' for f in changed)} "
                   "(validated: its built-in geometry)")
    return out


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(p.title() for p in rest)


def _shape(cfg: StackConfig) -> list[str]:
    b, w = cfg.benchmark, cfg.workload
    prefix = b.prefix_tokens if b.prefix_tokens is not None else w.prefix_tokens
    unique = b.unique_tokens if b.unique_tokens is not None else w.input_tokens - w.prefix_tokens
    output = b.output_tokens if b.output_tokens is not None else w.output_tokens
    out = []
    if prefix + unique != PROMPT_TOKENS:
        out.append(f"prompt {prefix + unique:,} tokens (validated: {PROMPT_TOKENS:,})")
    if prefix != PREFIX_TOKENS:
        out.append(f"shared prefix {prefix:,} tokens (validated: {PREFIX_TOKENS:,})")
    if output != OUTPUT_TOKENS:
        out.append(f"output {output:,} tokens (validated: {OUTPUT_TOKENS})")
    return out


def _transfers(stack: ResolvedStack) -> list[str]:
    """The link (when a prefill/decode pair crosses nodes), the transport, the configured rates."""
    cfg = stack.config
    disaggregated = [g for g in stack.active if g.role != "agg"]
    if not disaggregated:
        return []
    out = []
    link = cfg.sizing.link
    if crosses_link(stack):
        if link.rate != LINK_BITS_PER_S:
            out.append(f"link {_rate(link.rate)} (validated: {_rate(LINK_BITS_PER_S)})")
        if link.efficiency != LINK_EFFICIENCY:
            out.append(f"link efficiency {link.efficiency:g} (validated: {LINK_EFFICIENCY:g})")
    for g in disaggregated:
        t = g.kv_transfer
        if t.transport != "tcp" or expand_tls(t.ucx_tls) & GPU_CAPABLE_TLS or t.buffer_device != LAB_BUFFER_DEVICE:
            out.append(f"KV transport of {g.name}: UCX {t.ucx_tls}, {t.buffer_device} buffers (validated: "
                       f"{LAB_UCX_TLS}, {LAB_BUFFER_DEVICE} buffers: TCP, no RDMA)")
    same_node = cfg.sizing.same_node_bytes_per_second
    default = SAME_NODE_BYTES_PER_SECOND[disaggregated[0].kv_transfer.op]
    if same_node is not None and same_node != default:
        out.append(f"same-node KV throughput {units.human_si(same_node)}/s (validated: the default, "
                   f"{units.human_si(default)}/s)")
    names = {g.name for g in disaggregated}
    for m in cfg.sizing.measured:
        if m.from_group in names and m.to_group in names:
            out.append(f"measured KV throughput {m.from_group} -> {m.to_group} {units.human_si(m.bytes_per_second)}/s "
                       "(validated: the sizing's rates)")
    return out


def crosses_link(stack: ResolvedStack) -> bool:
    """Whether some request's KV may cross the link: a prefill and a decode group that may be on two
    nodes (the placement's kv_path: two classes, or one class of several nodes), or KV over RDMA,
    which goes through the NIC even between two pods of one node (the sizing's path_throughput)."""
    prefill = [g for g in stack.active if g.role == "prefill"]
    decode = [g for g in stack.active if g.role == "decode"]
    return any(stack.placement.kv_path(p, d) == "cross-node" or p.rdma
               for p in prefill for d in decode)


def _rate(bits_per_s: float) -> str:
    for unit, size in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6)):
        if bits_per_s >= size:
            return f"{bits_per_s / size:g} {unit}"
    return f"{bits_per_s:g} bit/s"


def envelope(stack: ResolvedStack, prefix_types: int, concurrency: int, *,
             rate: Optional[float] = None) -> Envelope:
    """What of one figure's inputs (the stack, at prefix types x concurrency, or at an open-loop
    `rate` of requests/s) is outside what the validation covered (this module's docstring)."""
    cfg = stack.config
    differs = {name: why for name in stack.worker_classes
               if (why := gpu_class(name, cfg.gpu_classes[name])) is not None}
    classes = list(differs.values())
    hosts = [_host(name) for name in differs if _another_card(cfg.gpu_classes[name])]
    model = _model(cfg)
    tp = [f"tensorParallel {g.tensor_parallel} of {g.name} (validated: 1, one GPU a worker)"
          for g in stack.active if g.tensor_parallel != 1]
    paced = [] if rate is not None else _output_paced(stack, concurrency)
    out = classes + hosts + paced + _transfers(stack) + model + _shape(cfg) + tp
    prefix = cfg.benchmark.prefix_tokens if cfg.benchmark.prefix_tokens is not None else cfg.workload.prefix_tokens
    low, high = PREFIX_TYPES
    if prefix and not low <= prefix_types <= high:
        out.append(f"prefix types {prefix_types} (validated: {low} to {high})")
    if rate is not None:
        out.append(f"open loop at {rate:g} requests/s (validated: closed loop, concurrency 1 to {MAX_CONCURRENCY})")
    elif concurrency > MAX_CONCURRENCY:
        out.append(f"concurrency {concurrency} > {MAX_CONCURRENCY} (validated up to {MAX_CONCURRENCY})")
    on_peer = out == classes + hosts + model + tp and all(_peer_case(cfg, g) in PEER_AGREES for g in stack.active)
    return Envelope(tuple(out), bool(out) and on_peer)


def _output_paced(stack: ResolvedStack, concurrency: int) -> list[str]:
    """Each decoding group on another card whose worker's output handling, fitted on the lab's
    desktop (params.py), would set its decode pace at this concurrency: its figures' ITL, TPOT and
    throughput then rest on that extrapolation, which the peer does not model (docs/peer.md, "The
    worker's output handling"), so they are not "lab+peer". Closed loop: the concurrency spread
    evenly over the decoding replicas (at most the scheduler's max_num_seqs each), every request at
    its prompt plus half its output of context; paced where the output handling of one step exceeds
    the engine's step (costs.pipelined: the slower of its host side and GPU) by more than the peer
    comparison's decode tolerance."""
    cfg = stack.config
    decoding = [g for g in stack.active if g.role != "prefill"]
    replicas = sum(g.replicas for g in decoding)
    b = cfg.benchmark
    context = b.prefix_tokens + b.unique_tokens + b.output_tokens // 2
    out = []
    for g in decoding:
        cls = cfg.gpu_classes[g.gpu_class]
        if not _another_card(cls):
            continue  # the lab's card on the lab's host, where the output handling was fitted
        w = peer.priced_worker(cfg.model, g, cls)
        batch = max(1, min(-(-concurrency // replicas), w.limits.max_num_seqs))
        step = peer.predictor_decode(w, batch, context)
        engine, output = step.engine, step.output
        if output > engine * (1 + peer.TOLERANCE["decode"]):
            out.append(f"decode pace of {g.name} at {batch} requests a step: the worker's output handling "
                       f"({output * 1e3:.1f} ms a step, as fitted on the lab's desktop CPU) outlasts its engine's step "
                       f"({engine * 1e3:.1f} ms), so ITL, TPOT and throughput rest on that extrapolation "
                       "(validated: the lab's host; docs/peer.md)")
    return out


def _another_card(c: GpuClass) -> bool:
    """A class of another memory than either of the lab's is another card, so on another host than
    the lab's desktop; a lab class with other figures (an efficiency, a bandwidth) is taken for the
    lab's card on its host."""
    return all(known.memory != c.memory for known in _lab_classes().values())


def _host(name: str) -> str:
    """Another card's workers run on another host than the lab's desktop, whose CPU the host side
    was fitted on (params.py)."""
    return (f"host of {name}'s workers: the scheduler's pass ({LAB.schedule_s * 1e3:.1f} ms a step) and the worker's "
            f"output handling ({LAB.output_per_request_s * 1e3:.2f} ms a sampled request) as fitted on the lab's "
            "desktop CPU (validated: that CPU; docs/peer.md)")


def _peer_case(cfg: StackConfig, g: WorkerGroup) -> Optional[tuple[str, int, float, float]]:
    """A worker group's (model, tensorParallel, card) as PEER_AGREES names it; None for a model the
    peer comparison does not price as written (not built in, changed, or not bfloat16)."""
    m, cls = cfg.model, cfg.gpu_classes[g.gpu_class]
    if m.name not in BUILTIN_MODELS or m.dtype != MODEL_DTYPE or _changed_geometry(m) or cls.peak_tflops is None:
        return None
    return m.name, g.tensor_parallel, float(cls.memory_bandwidth or 0), float(cls.peak_tflops)


PHYSICS_ONLY = "physics only, no validated error applies (docs/predictor.md, Envelope)"
PEER_BASIS = ("outside only in GPU classes (and their hosts), model and tensorParallel where the predictor's engine "
              "step (its host side overlapping the GPU) agrees with AIConfigurator 0.12.0's (docs/peer.md): lab+peer, "
              "the engine's steps on the peer, the rest on the lab; the worker's output handling, which the peer "
              "does not model, is the lab's desktop's, extrapolated")


def outside_lines(figures: list[tuple[str, Envelope]], every: str = "every figure") -> list[str]:
    """What is outside, once per input, with the figures (by label) it applies to; `every` names
    them all where it applies to each. Empty when every figure is inside."""
    by_input: dict[str, list[str]] = {}
    for label, env in figures:
        for why in env.outside:
            by_input.setdefault(why, []).append(label)
    if not by_input:
        return []
    on_peer = [label for label, env in figures if env.basis == "lab+peer"]
    return [f"Outside what the validation covered, {PHYSICS_ONLY}:"] + [
        f"  {every if len(labels) == len(figures) else ', '.join(labels)}: {why}" for why, labels in by_input.items()
    ] + ([f"  {every if len(on_peer) == len(figures) else ', '.join(on_peer)}: {PEER_BASIS}"] if on_peer else [])
