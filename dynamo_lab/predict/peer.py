"""The predictor's step costs beside NVIDIA AIConfigurator 0.12.0's, where both model the same thing.

`python3 dev.py peer` (this module, `python -m dynamo_lab.predict.peer`, in an environment with the
`peer` extra) prints the table docs/peer.md shows; the slow tier holds the two within TOLERANCE.

Both price one engine step of one worker on a card from its datasheet: the predictor from its own
physics (costs.py: the roofline of the step's FLOPs and bytes at its efficiencies, tensor
parallelism's all-reduces; the engine core's host side of a step, costs.host_seconds, and what of it
overlaps the GPU's time, costs.pipelined; params.py's constants), AIConfigurator from kernels
measured per GPU and vLLM version (its wheel ships the model configs and the per-GPU data; nothing is
downloaded). Compared, for a few models, GPUs and tensor-parallel degrees AIConfigurator has vLLM
data for (CASES):
- the static prefill: one request's PREFILL_TOKENS-token prompt alone on an aggregated worker, to
  its first token (AIConfigurator's `static_ctx` estimate; the predictor's chunks of the scheduler's
  batched-token budget, each a step with its host cost, each launched while the last runs on the
  GPU). No queueing and no KV transfer on either side: what a loaded graph adds is the
  simulation's (sim.py), which AIConfigurator does not model.
- the decode step: B requests each at DECODE_CONTEXT tokens of context, one token each
  (AIConfigurator's `static_gen` TPOT; the predictor's time between two steps of those B requests
  decoding steadily: the slower of the engine core's host time and the GPU's, which overlap).

What is compared is the engine's step only (StepCost.engine). The worker process's output handling
(costs.output_seconds: vLLM's output processor and Dynamo's handler streaming each token), which
runs beside the engine core, is priced and shown (StepCost.output, and the step as the predictor
delivers it with it, StepCost.seconds) but not compared: AIConfigurator's static TPOT and TTFT are
the sums of its measured kernels (its sdk/backends/base_backend.py `run_static`: `tpot =
generation_latency / (osl - 1)`, the latency the sum of its ops' measured times; "Silicon benchmarks
measure isolated kernel time", its `_prefill_dispatch_overhead_ms`, which only its aggregated TTFT
adds), so it has no such term, and the predictor's is fitted on the lab's desktop CPU
(params.output_per_request_s), so on a data-centre node's host it is extrapolated (docs/peer.md).

Both price the same card: the predictor's GPU class is the shipped example's 80GB class
(Pulumi.two-node-rdma.yaml) with the peer's datasheet figures for the system (memory, DRAM
bandwidth, dense BF16 peak: its systems/<system>.yaml), and the same model: the project's built-in
geometry, checked against the peer's config.json (`geometry_differs`). The GPU jitter (params.py)
has median 1 and is left out: this compares the step's cost, not its spread.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Optional

from dynamo_lab import stack_files
from dynamo_lab.paths import ROOT
from dynamo_lab.predict import cells, costs, params
from dynamo_lab.predict.specs import Timing
from dynamo_lab.sizing_text import text_table
from infra.config.schema import GpuClass, Model, WorkerGroup
from infra.errors import UserError
from infra.resolved import model_kv_bytes_per_token

PEER = "aiconfigurator"
PEER_VERSION = "0.12.0"
# The vLLM version whose kernel data AIConfigurator 0.12.0 holds for these systems (its
# systems/query_versions.yaml: `vllm: {current: "0.24.0"}`); named, so no call reads its version index.
PEER_BACKEND, PEER_BACKEND_VERSION = "vllm", "0.24.0"

# The project's built-in model (infra/catalogue.py BUILTIN_MODELS) and the peer's name for the same
# weights' geometry (its model_configs/): Llama 3.1's base and instruct models share one config.
MODELS = {
    "Qwen/Qwen3-8B": "Qwen/Qwen3-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "Qwen/Qwen3-32B": "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
}
# AIConfigurator's systems with vLLM data: the H100 SXM, and the H200 SXM (the same GH100 compute,
# 989 TFLOP/s, with 4.8 TB/s of HBM3e for 3.35: decode steps part from prefills).
SYSTEMS = ("h100_sxm", "h200_sxm")
# (model, tensor parallelism): the 8B models on one GPU; Qwen3-32B and Llama 3.1 70B on as few GPUs
# as hold their weights and the decode batch's KV, and on twice as many.
CASES = (("Qwen/Qwen3-8B", 1), ("meta-llama/Llama-3.1-8B-Instruct", 1), ("Qwen/Qwen3-32B", 2),
         ("Qwen/Qwen3-32B", 4), ("meta-llama/Llama-3.1-70B-Instruct", 4), ("meta-llama/Llama-3.1-70B-Instruct", 8))
PREFILL_TOKENS = 8192
DECODE_CONTEXT = 4096
DECODE_BATCHES = (1, 64)
# The example stack whose 80GB class is the predictor's card here (its figures other than the
# datasheet's: effectiveTflops scales with the peak, the rest only places pods).
EXAMPLE_STACK, EXAMPLE_CLASS = "two-node-rdma", "gpu-80gb"

# How far apart the two may be, |predictor / peer - 1|, where the physics should agree
# (docs/peer.md, "Tolerances"; the shares measured 2026-12-06):
# - prefill: compute-bound on both sides. The peer's measured kernels reach 63-77% of the peak on
#   the predictor's count of FLOPs (61-69% counting the lm_head for the last token only, as vLLM
#   runs it), so one efficiency can be within about 10% of each case; the all-reduces (up to a
#   third of a prefill at TP 8, priced differently by the two) and the host's side take the rest.
# - decode: DRAM-bound. The peer's kernels reach 51-85% of the bandwidth, less at batch 1 and high
#   tensor parallelism, where fixed per-kernel latencies weigh more than a roofline has them; one
#   bandwidth efficiency near 0.8 with a host cost of a millisecond or two a step (what CUDA
#   graphs and vLLM's overlapped scheduling leave on a data-centre node) is within 25% of each.
TOLERANCE = {"prefill": 0.20, "decode": 0.25}


class PeerError(UserError):
    """The peer is missing, another version, or models something else than the predictor here."""


@dataclass(frozen=True)
class StepCost:
    """One step's cost on one side, seconds. `engine`: the engine's step, its host side overlapping
    the GPU's time as costs.pipelined runs them with no output handling: what both sides model and
    what is compared (the peer's is its whole step). `seconds`: the step as the predictor delivers
    it, its worker process's output handling included (the peer's: its step). Of the predictor's:
    its engine core's host side (`host`: scheduling and launches, which overlap the GPU's time; the
    peer has none) and its worker process's output handling (`output`, not compared: the peer does
    not model it); the GPU's (`gpu`, all-reduces included) and of it tensor parallelism's
    all-reduces; `share`: the step's work (the predictor's count of FLOPs for a prefill, of bytes
    for a decode step) over its GPU time less the all-reduces, as a fraction of the worker's peak
    FLOP/s or DRAM bandwidth."""

    engine: float
    seconds: float
    host: float
    output: float
    gpu: float
    allreduce: float
    share: float


@dataclass(frozen=True)
class Comparison:
    model: str
    system: str
    tp: int
    quantity: str  # prefill | decode
    batch: int  # requests in the step (1 for a prefill)
    tokens: int  # the prompt (prefill) or each request's context (decode)
    predictor: StepCost
    peer: StepCost
    card: tuple[float, float]  # the predictor's card: DRAM bytes/s, dense BF16 TFLOP/s

    @property
    def ratio(self) -> float:
        """The compared quantity, predictor / peer: the engine's step on both sides (no output handling)."""
        return self.predictor.engine / self.peer.engine

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= TOLERANCE[self.quantity]

    @property
    def delivered_ratio(self) -> float:
        """Shown, not compared: the predictor's step with its worker's output handling, over the peer's."""
        return self.predictor.seconds / self.peer.seconds


# --- The predictor's side: its own step costs ------------------------------------------------------

@dataclass(frozen=True)
class PricedWorker:
    """What the predictor prices one worker's step with."""

    card: costs.Card
    model: costs.ModelCost
    limits: costs.Limits
    timing: Timing
    peak_flops: float  # the worker's, all ranks
    bandwidth: float


@functools.cache
def _example_class() -> GpuClass:
    return stack_files.load(EXAMPLE_STACK, ROOT).config.gpu_classes[EXAMPLE_CLASS]


def project_class(spec: dict) -> GpuClass:
    """The predictor's GPU class for one of the peer's systems: the example stack's 80GB class with
    the system's datasheet figures (its systems/<system>.yaml `gpu`)."""
    example = _example_class()
    peak = spec["bfloat16_tc_flops"] / 1e12
    return example.model_copy(update={"memory": int(spec["mem_capacity"]), "memory_bandwidth": int(spec["mem_bw"]),
                                      "peak_tflops": peak,
                                      "effective_tflops": example.effective_tflops * peak / example.peak_tflops})


def worker(model: str, system: str, tp: int, cls: GpuClass) -> PricedWorker:
    """A comparison's case: the model by name, one aggregated worker of `tp` ranks of the system's card."""
    group = WorkerGroup(name="peer", role="agg", replicas=1, gpuClass=system, tensorParallel=tp)
    return priced_worker(Model(name=model), group, cls)


def priced_worker(model: Model, group: WorkerGroup, cls: GpuClass) -> PricedWorker:
    """One worker of `group` (its tensorParallel ranks of `cls`, its scheduler's limits) serving
    `model`, priced as the predictor prices it: the one home of that pricing, which the comparison
    and the envelope's check of a decode's pace (envelope._output_paced) both read."""
    tp = group.tensor_parallel
    card = costs.tensor_parallel(costs.card(group.gpu_class, cls), tp, params.ALLREDUCE_BYTES_PER_S,
                                 params.ALLREDUCE_LATENCY_S)
    return PricedWorker(card, costs.model_cost(model, model_kv_bytes_per_token(model)),
                        costs.limits(group, cls), cells.timing(params.LAB), float(cls.peak_tflops) * 1e12 * tp,
                        float(cls.memory_bandwidth) * tp)


def _count(w: PricedWorker, scheduled: list[tuple[int, int]], what: str) -> float:
    """The step's FLOPs or bytes as the predictor counts them (costs.step_work)."""
    _, flops, nbytes, _ = costs.step_work(w.model, scheduled)
    return flops if what == "flops" else nbytes


def _priced(w: PricedWorker, steps: list[tuple[list[tuple[int, int]], int]], what: str) -> StepCost:
    """Steps run back to back from an idle engine (costs.pipelined: vLLM 0.31.0's async scheduling
    launches each step while the last runs on the GPU), each step its scheduled requests and how
    many of them sample a token; `seconds` is when the last one's outputs are handled, the first
    decode step after it launched first (a request goes on decoding), `engine` the same run with no
    output handling (when the engine core hands the last one's outputs over). A decode step's cost
    is the steady state's, the time between two of them (`predictor_decode`)."""
    eff = w.timing.efficiency
    alone = dataclasses.replace(w.card, ranks=1)  # the same worker without its all-reduces
    host = [costs.host_seconds(w.timing.host, w.model, w.limits, s) for s, _ in steps]
    gpu = [costs.step_seconds(w.card, eff, w.model, s) for s, _ in steps]
    output = [costs.output_seconds(w.timing.host, sampled) for _, sampled in steps]
    roofline = sum(costs.step_seconds(alone, eff, w.model, s) for s, _ in steps)
    last = steps[-1][0]
    following = [(c + n, 1) for c, n in last]  # each request's first decode after its last chunk
    after = (costs.host_seconds(w.timing.host, w.model, w.limits, following), 0.0, 0.0)
    handled = costs.pipelined(list(zip(host, gpu, output, strict=True)) + [after])
    engine = costs.pipelined([(h, g, 0.0) for h, g in zip(host, gpu, strict=True)] + [after])
    work = sum(_count(w, s, what) for s, _ in steps)
    peak = w.peak_flops if what == "flops" else w.bandwidth
    return StepCost(engine[len(steps) - 1], handled[len(steps) - 1], sum(host), sum(output), sum(gpu),
                    sum(gpu) - roofline, work / roofline / peak)


def predictor_prefill(w: PricedWorker, tokens: int) -> StepCost:
    """One prompt alone: vLLM's scheduler gives it up to the batched-token budget a step (sim.py)."""
    budget = w.limits.max_num_batched_tokens
    # Only the chunk that computes the prompt's last token samples one.
    return _priced(w, [([(done, min(budget, tokens - done))], int(done + budget >= tokens))
                       for done in range(0, tokens, budget)], "flops")


def predictor_decode(w: PricedWorker, batch: int, context: int) -> StepCost:
    """One step of a batch decoding steadily: the engine's steps come max(host, GPU) apart, and
    with the worker's output handling max(host, GPU, output handling) (costs.pipelined), whichever
    binds."""
    one = _priced(w, [([(context, 1)] * batch, batch)], "bytes")
    steady = costs.pipelined([(one.host, one.gpu, one.output)] * 4)
    engine = costs.pipelined([(one.host, one.gpu, 0.0)] * 4)
    return dataclasses.replace(one, engine=engine[2] - engine[1], seconds=steady[2] - steady[1])


# --- The peer's side --------------------------------------------------------------------------------

def peer_api():
    """AIConfigurator's estimate entry (`aiconfigurator cli estimate`'s, in-process), its system
    files and model configs; a PeerError with the fix when it is not installed, or not 0.12.0."""
    try:
        version = metadata.version(PEER)
    except metadata.PackageNotFoundError:
        version = None
    if version != PEER_VERSION:
        has = "does not have it" if version is None else f"has {version}"
        raise PeerError(f"the comparison is with {PEER}=={PEER_VERSION} (the `peer` extra); this Python "
                        f"({sys.executable}) {has}. Run it as `python3 dev.py peer`: dev.py installs the version "
                        "uv.lock pins into .venv and runs it there")
    # Its own modules announce that this distribution is deprecated for `aisimulate`, and log each
    # fallback data file they load: neither changes an estimate here.
    logging.getLogger(PEER).setLevel(logging.ERROR)
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from aiconfigurator.cli.api import cli_estimate
        from aiconfigurator.sdk.perf_database import load_system_spec
        from aiconfigurator.sdk.utils import get_model_config_from_model_path
    return cli_estimate, load_system_spec, get_model_config_from_model_path


def geometry_differs(model: Model, peer_config: dict) -> Optional[str]:
    """What of the model's geometry the predictor reads differs from the peer's config for it."""
    head_dim = peer_config.get("d") or peer_config["hidden_size"] // peer_config["n"]
    pairs = {"layers": (model.layers, peer_config["layers"]),
             "attentionHeads": (model.attention_heads, peer_config["n"]),
             "kvHeads": (model.kv_heads, peer_config["n_kv"]), "headDim": (model.head_dim, head_dim),
             "hiddenSize": (model.hidden_size, peer_config["hidden_size"])}
    differ = [f"{key} {ours} (the peer: {theirs})" for key, (ours, theirs) in pairs.items() if ours != theirs]
    return ", ".join(differ) or None


def _allreduce_ms(latency: dict) -> float:
    # AIConfigurator's ops: context_/generation_ embedding_ar, ar_1 and ar_2 (its models' all-reduces).
    return sum(v for k, v in latency.items() if k.endswith(("_ar", "_ar_1", "_ar_2")))


def peer_step(estimate, model: str, system: str, tp: int, mode: str, batch: int, tokens: int, work: float,
              peak: float) -> StepCost:
    """`estimate`: cli_estimate. `work` (FLOPs or bytes, the predictor's count) over `peak` (its
    worker's FLOP/s or bytes/s) gives the share of the peak the peer's non-all-reduce time reaches."""
    r = estimate(MODELS[model], system, mode=mode, backend_name=PEER_BACKEND, backend_version=PEER_BACKEND_VERSION,
                 tp_size=tp, isl=tokens, osl=2, batch_size=batch)
    if r.kv_cache_warning:
        raise PeerError(f"{MODELS[model]} on {system} at TP {tp}, {batch} x {tokens} tokens: {r.kv_cache_warning} "
                        "(a case of peer.CASES that does not fit is no comparison: give it more GPUs)")
    if mode == "static_ctx":
        ms, latency = r.ttft, r.summary.get_context_latency_dict()
    else:
        ms, latency = r.tpot, r.summary.get_generation_latency_dict()
    allreduce = _allreduce_ms(latency) / 1e3
    return StepCost(ms / 1e3, ms / 1e3, 0.0, 0.0, ms / 1e3, allreduce, work / (ms / 1e3 - allreduce) / peak)


# --- Both, and the table ------------------------------------------------------------------------------

def compare() -> list[Comparison]:
    estimate, system_spec, model_config = peer_api()
    for model, peer_model in MODELS.items():
        if (why := geometry_differs(Model(name=model), model_config(peer_model))) is not None:
            raise PeerError(f"{model} and the peer's {peer_model} differ in {why}: they would not price one model")
    rows = []
    for system in SYSTEMS:
        cls = project_class(system_spec(system)["gpu"])
        card = (float(cls.memory_bandwidth), float(cls.peak_tflops))
        for model, tp in CASES:
            w = worker(model, system, tp, cls)
            ours = predictor_prefill(w, PREFILL_TOKENS)
            work = _count(w, [(0, PREFILL_TOKENS)], "flops")
            theirs = peer_step(estimate, model, system, tp, "static_ctx", 1, PREFILL_TOKENS, work, w.peak_flops)
            rows.append(Comparison(model, system, tp, "prefill", 1, PREFILL_TOKENS, ours, theirs, card))
            for batch in DECODE_BATCHES:
                ours = predictor_decode(w, batch, DECODE_CONTEXT)
                work = _count(w, [(DECODE_CONTEXT, 1)] * batch, "bytes")
                theirs = peer_step(estimate, model, system, tp, "static_gen", batch, DECODE_CONTEXT, work, w.bandwidth)
                rows.append(Comparison(model, system, tp, "decode", batch, DECODE_CONTEXT, ours, theirs, card))
    return rows


def agreeing(rows: list[Comparison]) -> frozenset[tuple[str, int, float, float]]:
    """The cases whose every compared step (the engine's: Comparison.ratio) is within its tolerance,
    as envelope.PEER_AGREES names them (model, tensorParallel, the card's DRAM bytes/s and peak
    TFLOP/s)."""
    within: dict[tuple[str, int, float, float], bool] = {}
    for r in rows:
        case = (r.model, r.tp, *r.card)
        within[case] = within.get(case, True) and r.within
    return frozenset(case for case, ok in within.items() if ok)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}" if seconds >= 0.1 else f"{seconds * 1e3:.2f}"


def table(rows: list[Comparison]) -> str:
    head = ["model", "GPU", "TP", "step", "engine ms", "host", "GPU", "all-reduce", "peer ms", "all-reduce",
            "share of peak", "ratio", "within", "output", "with output ms", "ratio with output"]
    body = [[r.model.split("/")[1], r.system, str(r.tp),
             f"prefill {r.tokens:,}" if r.quantity == "prefill" else f"decode {r.batch} x {r.tokens:,}",
             _ms(r.predictor.engine), _ms(r.predictor.host), _ms(r.predictor.gpu), _ms(r.predictor.allreduce),
             _ms(r.peer.engine), _ms(r.peer.allreduce),
             f"{'FLOP/s' if r.quantity == 'prefill' else 'DRAM'} {r.predictor.share:.0%} / {r.peer.share:.0%}",
             f"{r.ratio:.2f}", "yes" if r.within else "no",
             _ms(r.predictor.output), _ms(r.predictor.seconds), f"{r.delivered_ratio:.2f}"] for r in rows]
    tolerance = ", ".join(f"{q} {t:.0%}" for q, t in TOLERANCE.items())
    return "\n".join([
        f"The predictor's engine step beside {PEER} {PEER_VERSION}'s ({PEER_BACKEND} {PEER_BACKEND_VERSION} kernel "
        f"data), ms; ratio = predictor / peer, within: |ratio - 1| <= {tolerance}.",
        "prefill N: one N-token prompt alone, to its first token; decode B x C: one step of B requests at C tokens "
        "of context. engine: the predictor's step as both model it, its engine core's host side (scheduling and "
        "launches) overlapping the GPU, each step's host while the last is on the GPU: not their sum. share of "
        "peak: the step's FLOPs (prefill) or bytes (decode), as the predictor counts them, over its GPU time less "
        "all-reduce, of the worker's peak (predictor / peer).",
        "Not compared: output, the worker process's output handling, which the peer does not model and the "
        "predictor fits on the lab's desktop CPU (extrapolated here), runs beside the engine core; with output: "
        "the predictor's step with it, as its figures have it, and its ratio to the peer's.",
        text_table(head, body),
        "Cases where every engine step agrees (envelope.PEER_AGREES: their figures rest on the lab and the peer, "
        "the worker's output handling on the lab alone, extrapolated): "
        + (", ".join(f"{m.split('/')[1]} at TP {tp} on {bw / 1e12:g} TB/s, {peak:g} TFLOP/s"
                     for m, tp, bw, peak in sorted(agreeing(rows))) or "none")])


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(f"usage: python -m dynamo_lab.predict.peer (no arguments; got {' '.join(args)}): it prints the "
              "comparison docs/peer.md shows", file=sys.stderr)
        return 2
    try:
        print(table(compare()))
    except PeerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
