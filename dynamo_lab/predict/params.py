"""The constants the predictor needs that no stack file holds, each with its mechanism, where its
value comes from, and the range the hardware allows (`BOUNDS`: a fit never leaves it).

What is physics comes from elsewhere: the cards' bandwidth and peak (gpuClasses, the lab's cards in
infra/catalogue.py), the model's geometry, the transfer paths' rates (the sizing's, one figure for
both), vLLM's scheduler limits (costs.limits). What is here are the costs no datasheet gives. The
FITTED ones are fitted to the write-up's concurrency-4 cells only (`dynamo-lab predict --calibrate`);
the concurrency-8 cells are the hold-out that judges them (docs/predictor.md). Values are pasted as
the fit printed them, unrounded: pools are whole blocks and routing breaks ties at random, so a
prediction moves in steps, and rounding a constant to three figures can move a cell by percents.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LabParams:
    # Frontend + router per request (HTTP, tokenization, routing), seconds. FITTED.
    frontend_s: float = 0.013445885084303647
    # Host-side cost of one vLLM engine step (scheduling, input preparation, kernel launches),
    # seconds, and what each scheduled request adds to it (its output processing, detokenizing, and
    # Dynamo's Python handler streaming its token); each worker has its own CPU. FITTED.
    step_cpu_s: float = 0.002201711924174385
    step_cpu_per_request_s: float = 0.00033516002301781957
    # The fraction of the card's dense peak a prefill's math reaches, and of its DRAM bandwidth a
    # step's memory traffic reaches (model FLOPs / memory utilisation). FITTED, within (0, 1].
    prefill_efficiency: float = 0.951229424500714
    decode_efficiency: float = 1.0
    # Disaggregated only: the prefill's answer back to the router and the decode request out
    # (Dynamo's request plane), seconds. FITTED.
    handoff_s: float = 0.05
    # Copies between GPU blocks and the host KV buffers (kv_buffer_device cpu): the prefill worker's
    # after its forward, the decode worker's at the step that notices the pull; bytes/s of a
    # block-scattered copy over PCIe. FITTED.
    host_copy_bytes_per_s: float = 2979511822.748466
    # A NIXL agent pair's first transfer waits for their metadata exchange (vLLM's NixlConnector
    # handshake, once per prefill/decode pair), seconds. ESTIMATE: no published cell isolates it.
    handshake_s: float = 0.05
    # Run-to-run spread: the sigma of a lognormal factor on each request's frontend time and on each
    # step's GPU time. ESTIMATES (Python services' scheduling noise; kernels vary little).
    frontend_jitter: float = 0.25
    gpu_jitter: float = 0.05
    # The lab's KV pools as a multiple of a stack's, per stack, for comparing with the write-up: the
    # lab did not pin its pools, and ran its prefill and decode workers alike, so one factor per
    # stack, applied to every pool of it, decode included; its prefill-side cache token ratios and
    # the concurrency-4 cells constrain it. FITTED.
    # A stack's own prediction (`predict STACK`) uses its pools as configured.
    pool_scale: dict[str, float] = field(default_factory=lambda: {
        "kv-routing": 0.6069865513504619, "same-server": 0.5256355481880121})


# What the hardware allows each FITTED constant: the fit searches inside and reports one at a bound.
BOUNDS: dict[str, tuple[float, float]] = {
    "frontend_s": (0.002, 0.06),          # an HTTP hop, tokenizing 2.4k tokens, a routing decision
    "step_cpu_s": (0.001, 0.015),          # vLLM's scheduler and launch path on a desktop CPU
    "step_cpu_per_request_s": (2e-5, 3e-3),
    "prefill_efficiency": (0.05, 1.0),     # achieved/peak tensor FLOP/s cannot exceed 1
    "decode_efficiency": (0.2, 1.0),       # achieved/peak DRAM bandwidth cannot exceed 1
    "handoff_s": (0.001, 0.05),            # two request-plane messages on one LAN
    "host_copy_bytes_per_s": (2e9, 25e9),  # PCIe 4.0 x16 carries at most ~25 GB/s; scattered copies less
}

LAB = LabParams()


# --- Beyond the lab: ESTIMATES, not fitted (the lab ran none of this; every figure that uses them is
# outside the envelope, envelope.py) -----------------------------------------------------------------

# Tensor parallelism's all-reduce (costs.tensor_parallel): NCCL's bus bandwidth between one worker's
# GPUs and its latency per all-reduce. ESTIMATE: 360 GB/s, what nccl-tests' all_reduce_perf reports on
# NVLink 4 (H100 SXM, 900 GB/s bidirectional) for large buffers; plausible range 20 GB/s (GPUs joined
# by PCIe 4.0 x16 only) to 480 GB/s. Latency 10 us per all-reduce of a decode step's few KB (NCCL's
# small-message figures on NVLink; range 5-30 us, more over PCIe). Tensor parallelism is offered only
# on whole GPUs, which in practice are data-centre nodes with NVLink; on a PCIe-only node the
# all-reduces take up to 18x longer for large prefills, and decode steps about 2x their latency.
ALLREDUCE_BYTES_PER_S = 360e9
ALLREDUCE_BYTES_PER_S_RANGE = (20e9, 480e9)
ALLREDUCE_LATENCY_S = 10e-6
ALLREDUCE_LATENCY_S_RANGE = (5e-6, 30e-6)
