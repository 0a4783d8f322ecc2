"""What an engine step costs on a card, and what a worker's scheduler may put in one step: the
physics the serving model (sim.py) runs on, from the card's datasheet, the model's geometry and
vLLM 0.31.0's defaults, with the two efficiencies fitted within (0, 1] (params.py).

A step's GPU time is the roofline of its work (the slower of the two, not their sum: the kernels
overlap memory traffic with math):
- memory: the weights, read once per step whatever the batch (2 bytes per parameter in bfloat16),
  plus the KV each scheduled token's attention reads (its context) and writes (itself);
- math: 2 FLOPs per parameter per token (each weight multiplies and adds once), plus attention's
  4 x layers x attention heads x head_dim FLOPs per token per context token (Q.K and the
  weighted sum over V, 2 FLOPs per multiply-add each): for a chunk of n prompt tokens after c
  already computed, n x c + n (n - 1) / 2 token pairs.
At Qwen3-0.6B's 2,371-token prompts attention is about a fifth of a prefill's math; at 16k tokens
more than the rest. A decode step of a few requests is memory-bound: 1.19 GB of weights at a
24GB-class card's 936 GB/s is 1.27 ms before efficiency, each running request's KV (2,400
tokens x 114,688 bytes = 275 MB) another 0.29 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra import resolved
from infra.config.schema import GpuClass, Model, StackConfig, WorkerGroup
from infra.errors import UserError


class PredictError(UserError, ValueError):
    """A stack the predictor cannot model, with the key to write: the command line prints it in one
    line and exits 2, as it does any UserError."""


@dataclass(frozen=True)
class Card:
    """One GPU class's figures: DRAM bytes/s and dense BF16 FLOP/s (gpuClasses.*); with
    tensorParallel above 1 (`ranks`), one worker's GPUs together and the all-reduces between them
    (tensor_parallel; ESTIMATES, params.py)."""

    bandwidth: float
    peak_flops: float
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
    return Card(c.bandwidth * ranks, c.peak_flops * ranks, ranks, bytes_per_s, latency_s)


@dataclass(frozen=True)
class ModelCost:
    weight_bytes: float
    flops_per_token: float  # 2 x parameters
    attention_flops_per_pair: float  # 4 x layers x attention heads x head_dim
    kv_bytes_per_token: int
    # Tensor parallelism's all-reduces: 2 per layer, each of hidden_size x dtype bytes per token.
    allreduces_per_step: int = 0
    activation_bytes_per_token: int = 0


@dataclass(frozen=True)
class Efficiency:
    """The fraction of the card's peak a step's math gets, and of its bandwidth its memory traffic."""

    math: float
    memory: float


@dataclass(frozen=True)
class Limits:
    """What vLLM's scheduler puts in one step (SchedulerConfig): the batched-token budget and the
    most requests running at once."""

    max_num_batched_tokens: int
    max_num_seqs: int


def card(name: str, cls: GpuClass) -> Card:
    missing = [key for key, value in (("memoryBandwidth", cls.memory_bandwidth), ("peakTflops", cls.peak_tflops))
               if value is None]
    if missing:
        raise PredictError(
            f"gpuClasses.{name}: the predictor needs the card's {' and '.join(missing)} (a decode step is bounded "
            f"by reading the weights at the DRAM bandwidth, a prefill by the tensor peak); write the card's "
            f"datasheet figures, e.g. memoryBandwidth: 936G and peakTflops: 71 for an RTX 3090")
    return Card(float(cls.memory_bandwidth), float(cls.peak_tflops) * 1e12)


def model_cost(m: Model, kv_bytes_per_token: int) -> ModelCost:
    if m.attention_heads is None:
        raise PredictError(f"model.attentionHeads: the predictor needs {m.name}'s attention heads for attention's "
                           "cost (config.json `num_attention_heads`); write model.attentionHeads")
    return ModelCost(weight_bytes=resolved.weight_bytes(m), flops_per_token=2.0 * m.parameters,
                     attention_flops_per_pair=4.0 * m.layers * m.attention_heads * m.head_dim,
                     kv_bytes_per_token=kv_bytes_per_token, allreduces_per_step=2 * m.layers,
                     activation_bytes_per_token=(m.hidden_size or m.attention_heads * m.head_dim) * m.dtype_bytes)


def step_seconds(card: Card, eff: Efficiency, m: ModelCost, scheduled: list[tuple[int, int]]) -> float:
    """GPU seconds of one step: each scheduled request as (tokens already computed, tokens now); a
    decoding request is (its context, 1)."""
    tokens = kv_touched = 0
    pairs = 0.0
    for c, n in scheduled:  # one pass: this runs once per simulated step
        tokens += n
        pairs += n * c + n * (n - 1) / 2
        kv_touched += c + n
    flops = tokens * m.flops_per_token + pairs * m.attention_flops_per_pair
    nbytes = m.weight_bytes + kv_touched * m.kv_bytes_per_token
    roofline = max(flops / (card.peak_flops * eff.math), nbytes / (card.bandwidth * eff.memory))
    if card.ranks == 1:
        return roofline
    # A ring all-reduce moves 2 (r - 1) / r of the buffer through each rank's link (NCCL's bus
    # bandwidth), after a fixed latency; the ranks wait for it, so it adds to the step.
    moved = 2 * (card.ranks - 1) / card.ranks * tokens * m.activation_bytes_per_token
    return roofline + m.allreduces_per_step * (card.allreduce_latency_s + moved / card.allreduce_bytes_per_s)


def limits(group: WorkerGroup, cls: GpuClass) -> Limits:
    """The scheduler limits a worker runs with: its group's engine settings on a card of `cls`, the
    flags its extraArgs give or vLLM 0.31.0's defaults by the card's memory (infra/resolved.py,
    EngineSettings)."""
    engine = resolved.engine_settings(group, cls)
    return Limits(engine.max_num_batched_tokens, engine.max_num_seqs)


def cards(cfg: StackConfig) -> dict[str, Card]:
    """The card of every class a worker runs on."""
    return {g.gpu_class: card(g.gpu_class, cfg.gpu_classes[g.gpu_class]) for g in cfg.workers}
