"""What an engine step costs on a card and on its host, and what a worker's scheduler may put in one
step: the physics the serving model (sim.py) runs on, from the card's datasheet, the model's
geometry and vLLM 0.31.0's defaults, with the constants no datasheet gives in params.py.

A step's GPU time is the roofline of its work (the slower of the two, not their sum: the kernels
overlap memory traffic with math):
- memory: the weights, read once per step whatever the batch (2 bytes per parameter in bfloat16),
  plus the KV each scheduled token's attention reads (its context) and writes (itself), at a
  fitted fraction of the card's DRAM bandwidth;
- math: 2 FLOPs per parameter per token (each weight multiplies and adds once; the embedding is
  looked up, and the LM head runs for each request's last token only), plus attention's
  4 x layers x attention heads x head_dim FLOPs per token per context token (Q.K and the
  weighted sum over V, 2 FLOPs per multiply-add each): for a chunk of n prompt tokens after c
  already computed, n x c + n (n - 1) / 2 token pairs; at the class's sustained prefill rate
  (`effectiveTflops`, the rate the sizing's prefill estimate uses too: one efficiency, not two).
At Qwen3-0.6B's 2,371-token prompts attention is about a fifth of a prefill's math; at 16k tokens
more than the rest. A decode step of a few requests is memory-bound: 1.19 GB of weights at a
24GB-class card's 936 GB/s is 1.27 ms at the full bandwidth, each running request's KV (2,400
tokens x 114,688 bytes = 275 MB) another 0.29 ms. No step is faster than its floor
(`step_floor_seconds`: its bytes at the full bandwidth, its FLOPs at the dense peak).

A step's host time is split by mechanism (HostCost) and by where it runs, for that decides what it
delays (vLLM 0.31.0 with its default async scheduling, `pipelined`):
- the engine core's thread: the scheduler's pass and kernel launches (none to speak of where a CUDA
  graph replays the step; `host_seconds`), which overlap the previous step's GPU time;
- the worker's own process beside the engine core: each sampled request's output handling
  (`output_seconds`), which delays that token's delivery, not the next step;
- copies between GPU blocks and host KV buffers (`copy_seconds`): synchronous after the step's
  forward, so the engine core waits for that step's GPU time and then the copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra import resolved
from infra.config.schema import GpuClass, Model, StackConfig, WorkerGroup
from infra.errors import UserError
from infra.sizing import prefill_flops_per_second


class PredictError(UserError, ValueError):
    """A stack the predictor cannot model, with the key to write: the command line prints it in one
    line and exits 2, as it does any UserError."""


@dataclass(frozen=True)
class Card:
    """One GPU class's figures (gpuClasses.*): DRAM bytes/s, dense BF16 peak FLOP/s (the bound no
    step exceeds) and the FLOP/s a prefill sustains (`effectiveTflops`, at most the peak); with
    tensorParallel above 1 (`ranks`), one worker's GPUs together and the all-reduces between them
    (tensor_parallel; ESTIMATES, params.py)."""

    bandwidth: float
    peak_flops: float
    sustained_flops: float
    ranks: int = 1
    allreduce_bytes_per_s: float = 0.0
    allreduce_latency_s: float = 0.0


def tensor_parallel(c: Card, ranks: int, bytes_per_s: float, latency_s: float) -> Card:
    """A worker of `ranks` GPUs of this card (vLLM --tensor-parallel-size): each rank reads its
    share of the weights and of the KV heads at its own DRAM bandwidth and does its share of the
    FLOPs, so the worker has `ranks` x the card's; and each layer adds two all-reduces of the
    step's activations (Megatron-style tensor parallelism, which vLLM's linear layers follow: after
    attention's output projection and after the MLP's down projection)."""
    if ranks == 1:
        return c
    return Card(c.bandwidth * ranks, c.peak_flops * ranks, c.sustained_flops * ranks, ranks, bytes_per_s, latency_s)


@dataclass(frozen=True)
class ModelCost:
    weight_bytes: float
    flops_per_token: float  # 2 x the parameters a token multiplies through (Model.token_parameters)
    attention_flops_per_pair: float  # 4 x layers x attention heads x head_dim
    kv_bytes_per_token: int
    # Tensor parallelism's all-reduces: 2 per layer, each of hidden_size x dtype bytes per token.
    allreduces_per_step: int = 0
    activation_bytes_per_token: int = 0
    layers: int = 0  # the decoder layers, each its own kernel launches where no CUDA graph replays the step
    # The LM head, 2 x vocabulary x hidden FLOPs for each scheduled request's last token: vLLM's model
    # runner computes logits at one position per request (gpu_model_runner, logits_indices).
    flops_per_sequence: float = 0.0


@dataclass(frozen=True)
class Efficiency:
    """The fraction of the card's DRAM bandwidth a step's memory traffic reaches (FITTED, params.py).
    Its math runs at the card's sustained prefill rate (Card.sustained_flops, the stack's
    effectiveTflops), the one efficiency the sizing reads too."""

    memory: float


# vLLM 0.31.0 captures CUDA graphs for batches of up to min(2 x max_num_seqs, 512) tokens
# (vllm/config/vllm.py, _set_cudagraph_sizes; 1,024 on data-centre Blackwell, which no class here
# names, so 512), in its default mode FULL_AND_PIECEWISE (vllm/config/compilation.py,
# CompilationConfig.cudagraph_mode; the default optimization level O2): a decode-only batch replays
# one full graph, a prefill or mixed batch piecewise graphs with attention launched between them,
# a larger batch launches every kernel. Dynamo's workers pass no --enforce-eager unless the stack's
# extraArgs do (not read here: a stack that does is predicted with graphs).
CUDAGRAPH_MAX_TOKENS = 512


@dataclass(frozen=True)
class Limits:
    """What vLLM's scheduler puts in one step (SchedulerConfig): the batched-token budget and the
    most requests running at once; and the largest batch, in tokens, a CUDA graph replays."""

    max_num_batched_tokens: int
    max_num_seqs: int

    @property
    def cudagraph_tokens(self) -> int:
        return min(2 * self.max_num_seqs, CUDAGRAPH_MAX_TOKENS)


@dataclass(frozen=True)
class HostCost:
    """The host side of one engine step, by mechanism (params.py has each value, its source and range):
    - `schedule_s`: vLLM's scheduler pass and input preparation, once per step (FITTED on the lab's
      desktop CPU), and `schedule_per_request_s` for each scheduled request (ESTIMATE);
    - kernel launches: where no CUDA graph replays the step, each layer's kernels are launched one
      by one (`launch_per_layer_s`, so they grow with the model's layers); piecewise graphs launch
      only attention between captured pieces (`piecewise_per_layer_s`); a full graph is one replay
      (`graph_replay_s`) whatever the layers (ESTIMATES);
    - `output_per_request_s`: each request that samples a token this step: its output processing in
      the worker's process (vLLM's AsyncLLM output handler and Dynamo's Python handler streaming the
      token; Dynamo detokenizes in its Rust frontend) (FITTED on the lab's desktop CPU);
    - copies between GPU blocks and host KV buffers (kv_buffer_device cpu) at
      `host_copy_bytes_per_s` (FITTED).
    The fitted ones describe the lab's desktop CPU running Qwen3-0.6B: beyond it (another CPU, a
    larger model) their values are extrapolated; what scales with the model (launches with its
    layers) scales. Where each runs, and so what it delays: `pipelined`."""

    schedule_s: float
    schedule_per_request_s: float
    output_per_request_s: float
    launch_per_layer_s: float
    piecewise_per_layer_s: float
    graph_replay_s: float
    host_copy_bytes_per_s: float


def card(name: str, cls: GpuClass) -> Card:
    missing = [key for key, value in (("memoryBandwidth", cls.memory_bandwidth), ("peakTflops", cls.peak_tflops))
               if value is None]
    if missing:
        raise PredictError(
            f"gpuClasses.{name}: the predictor needs the card's {' and '.join(missing)} (a decode step is bounded "
            f"by reading the weights at the DRAM bandwidth, a prefill by the tensor peak); write the card's "
            f"datasheet figures, e.g. memoryBandwidth: 936G and peakTflops: 71 for an RTX 3090")
    return Card(float(cls.memory_bandwidth), float(cls.peak_tflops) * 1e12, prefill_flops_per_second(cls))


def model_cost(m: Model, kv_bytes_per_token: int) -> ModelCost:
    if m.attention_heads is None:
        raise PredictError(f"model.attentionHeads: the predictor needs {m.name}'s attention heads for attention's "
                           "cost (config.json `num_attention_heads`); write model.attentionHeads")
    return ModelCost(weight_bytes=resolved.weight_bytes(m), flops_per_token=2.0 * m.token_parameters,
                     attention_flops_per_pair=4.0 * m.layers * m.attention_heads * m.head_dim,
                     kv_bytes_per_token=kv_bytes_per_token, allreduces_per_step=2 * m.layers,
                     activation_bytes_per_token=(m.hidden_size or m.attention_heads * m.head_dim) * m.dtype_bytes,
                     layers=m.layers, flops_per_sequence=2.0 * m.head_parameters)


def step_work(m: ModelCost, scheduled: list[tuple[int, int]]) -> tuple[int, float, float, bool]:
    """A step's tokens, FLOPs, bytes of DRAM traffic, and whether it only decodes (each scheduled
    request one token: what decides host_seconds' CUDA graph), counted in one pass: the one count of
    a step's work that step_seconds, step_floor_seconds, host_seconds and step_costs read."""
    tokens = kv_touched = 0
    pairs = 0.0
    decodes_only = True
    for c, n in scheduled:  # one pass: this runs once per simulated step
        tokens += n
        pairs += n * c + n * (n - 1) / 2
        kv_touched += c + n
        decodes_only = decodes_only and n == 1
    flops = tokens * m.flops_per_token + len(scheduled) * m.flops_per_sequence + pairs * m.attention_flops_per_pair
    return tokens, flops, m.weight_bytes + kv_touched * m.kv_bytes_per_token, decodes_only


def _allreduces(card: Card, m: ModelCost, tokens: int) -> float:
    if card.ranks == 1:
        return 0.0
    # A ring all-reduce moves 2 (r - 1) / r of the buffer through each rank's link (NCCL's bus
    # bandwidth), after a fixed latency; the ranks wait for it, so it adds to the step.
    moved = 2 * (card.ranks - 1) / card.ranks * tokens * m.activation_bytes_per_token
    return m.allreduces_per_step * (card.allreduce_latency_s + moved / card.allreduce_bytes_per_s)


def step_seconds(card: Card, eff: Efficiency, m: ModelCost, scheduled: list[tuple[int, int]]) -> float:
    """GPU seconds of one step: each scheduled request as (tokens already computed, tokens now); a
    decoding request is (its context, 1). Never below step_floor_seconds: the math runs at the
    sustained rate (at most the peak), the traffic at a fraction of the bandwidth (at most 1)."""
    return _gpu_seconds(card, eff, m, step_work(m, scheduled))


def _gpu_seconds(card: Card, eff: Efficiency, m: ModelCost, work: tuple[int, float, float, bool]) -> float:
    tokens, flops, nbytes, _ = work
    roofline = max(flops / card.sustained_flops, nbytes / (card.bandwidth * eff.memory))
    return roofline + _allreduces(card, m, tokens)


def step_floor_seconds(card: Card, m: ModelCost, scheduled: list[tuple[int, int]]) -> float:
    """The least GPU time a step can take: its bytes at the card's full DRAM bandwidth (the HBM or
    GDDR floor) or its FLOPs at the dense peak, whichever is slower. No noise takes a step below it."""
    tokens, flops, nbytes, _ = step_work(m, scheduled)
    return max(flops / card.peak_flops, nbytes / card.bandwidth) + _allreduces(card, m, tokens)


def host_seconds(h: HostCost, m: ModelCost, limits: Limits, scheduled: list[tuple[int, int]]) -> float:
    """The engine core's host seconds of one step (`scheduled` as for step_seconds): the scheduler's
    pass, each scheduled request's share of it (its input preparation and its update after the
    step), and the kernel launches. A step that schedules no token (vLLM's engine loop passing only
    a KV connector's work, `kv_connector_no_forward`) prepares and launches nothing: none."""
    return _host_seconds(h, m, limits, step_work(m, scheduled), len(scheduled))


def _host_seconds(h: HostCost, m: ModelCost, limits: Limits, work: tuple[int, float, float, bool],
                  requests: int) -> float:
    tokens, _, _, decodes_only = work
    if tokens == 0:
        return 0.0
    graphed = tokens <= limits.cudagraph_tokens
    if graphed and decodes_only:
        launches = h.graph_replay_s  # a decode-only batch: one full CUDA graph
    elif graphed:
        launches = m.layers * h.piecewise_per_layer_s  # piecewise graphs, attention launched per layer
    else:
        launches = m.layers * h.launch_per_layer_s  # beyond the captured sizes: every kernel launched
    return h.schedule_s + h.schedule_per_request_s * requests + launches


def step_costs(card: Card, eff: Efficiency, h: HostCost, m: ModelCost, limits: Limits,
               scheduled: list[tuple[int, int]]) -> tuple[float, float]:
    """(host_seconds, step_seconds) of one step from one step_work count (the simulation calls this
    once per simulated step)."""
    work = step_work(m, scheduled)
    return _host_seconds(h, m, limits, work, len(scheduled)), _gpu_seconds(card, eff, m, work)


def output_seconds(h: HostCost, sampled: int) -> float:
    """The worker process's seconds for one step's outputs: `sampled` requests' tokens (or a
    prefill's answer) handled and streamed, after the engine core hands them over."""
    return h.output_per_request_s * sampled


def copy_seconds(h: HostCost, copied_bytes: float) -> float:
    """Seconds to copy `copied_bytes` between GPU blocks and host KV buffers (one rank's share)."""
    return copied_bytes / h.host_copy_bytes_per_s


# vLLM 0.31.0 turns async scheduling on by default (vllm/config/vllm.py, VllmConfig.__post_init__:
# `async_scheduling` None becomes True unless the model is a pooling one, a speculative method other
# than EAGLE/MTP/draft model/n-gram is set, or the executor or pipeline parallelism cannot have it;
# the uniproc and multiproc executors both can), and Dynamo 1.6's vLLM worker leaves it so (it sets
# no async_scheduling; its optional InstrumentedScheduler subclasses AsyncScheduler). Its engine
# core then keeps a batch queue of 2 steps (VllmConfig.max_concurrent_batches):
# vllm/v1/engine/core.py `step_with_batch_queue`.
BATCH_QUEUE = 2


def pipelined(steps: list[tuple[float, float, float]]) -> list[float]:
    """When each of `steps` (engine host, GPU and output seconds, none copying to or from host
    buffers), run back to back on one worker from an idle engine, is delivered by its worker's
    process: the engine core's loop with async scheduling (EngineCore.step_with_batch_queue):
    - it schedules and launches step i+1 (its host seconds) while step i runs on the GPU: the
      scheduler counts step i's tokens as computed when it schedules them, and a request's next
      token is a placeholder the GPU fills from the token step i samples (AsyncScheduler's
      `num_output_placeholders`; the model runner reads the previous step's sampled tokens on the
      GPU), so a decode never waits for its last token to come back to the host;
    - with 2 steps queued it waits for the older one's GPU time and then processes its outputs:
      step i's outputs come out once step i+1 is launched, and step i+2 is not scheduled before;
    - the GPU runs a worker's steps in order (one CUDA stream), each once launched;
    - the worker's process handles each step's outputs after the engine core, one step after another.
    So steps come at max(host, GPU, output) apart, not host + GPU. The simulation (sim.ServingGraph) runs
    these rules under load; this is the idle engine's case of them, in closed form."""
    launched, gpu_end, delivered = 0.0, [0.0, 0.0], 0.0  # gpu_end: of every step so far, two zeros before
    out = []
    for i, (host, gpu, output) in enumerate(steps):
        launched = max(launched, gpu_end[-2]) + host  # once the step two before is off the GPU
        gpu_end.append(max(gpu_end[-1], launched) + gpu)
        # Its outputs: once off the GPU, and once the next step is launched where one follows.
        processed = gpu_end[-1]
        if i + 1 < len(steps):
            processed = max(processed, max(launched, gpu_end[-2]) + steps[i + 1][0])
        delivered = max(delivered, processed) + output
        out.append(delivered)
    return out


def limits(group: WorkerGroup, cls: GpuClass) -> Limits:
    """The scheduler limits a worker runs with: its group's engine settings on a card of `cls`, the
    flags its extraArgs give or vLLM 0.31.0's defaults by the card's memory (infra/resolved.py,
    EngineSettings)."""
    engine = resolved.engine_settings(group, cls)
    return Limits(engine.max_num_batched_tokens, engine.max_num_seqs)


def cards(cfg: StackConfig) -> dict[str, Card]:
    """The card of every class a worker runs on."""
    return {g.gpu_class: card(g.gpu_class, cfg.gpu_classes[g.gpu_class]) for g in cfg.workers}
