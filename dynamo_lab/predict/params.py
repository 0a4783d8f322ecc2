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

from infra.catalogue import LAB_PREFILL_EFFICIENCY


@dataclass(frozen=True)
class LabParams:
    # Frontend + router per request (HTTP, tokenization, routing), seconds. FITTED.
    frontend_s: float = 0.005466688923636528
    # The host side of one vLLM engine step, by mechanism (costs.HostCost). FITTED on the lab's
    # desktop CPU running Qwen3-0.6B, so extrapolated on any other host or model:
    # - the scheduler's pass and input preparation, once per step, seconds: the engine core's
    #   thread, which with vLLM 0.31.0's async scheduling does it while the GPU runs the last step
    #   (costs.pipelined);
    schedule_s: float = 0.0032845682255746326
    # - each request that samples a token: its output processing in the worker's process beside the
    #   engine core (vLLM's AsyncLLM output handler, Dynamo's Python handler streaming the token;
    #   Dynamo detokenizes in its Rust frontend), per request, not per token of the batch, seconds:
    #   it delays the token, not the next step. vLLM 0.31.0's own part of it measures 10-26 us a
    #   request (tests/engine/output_cost.py) and public vLLM serving on an H100 streams at 80 us a
    #   token or less: on a data-centre host this value is implausible, and the peer comparison
    #   leaves it out of what it compares (docs/peer.md, "The worker's output handling").
    output_per_request_s: float = 0.0011127704642462347
    # ESTIMATES (no published cell separates them from the fitted ones; each with its range below):
    # - the scheduler's and input preparation's share per scheduled request (block tables,
    #   positions, its update after the step): tens of microseconds of Python; 30 us (10-100 us);
    schedule_per_request_s: float = 30e-6
    # - kernel launches where no CUDA graph replays the step (a batch above the captured sizes,
    #   costs.Limits.cudagraph_tokens): a Qwen3 decoder layer is 10-15 kernels after vLLM's
    #   compilation fuses its elementwise ops, each launched from the host in 3-8 us, so 40 us a
    #   layer (15-100 us), growing with the model's layers;
    launch_per_layer_s: float = 40e-6
    # - a prefill or mixed batch within the captured sizes (piecewise graphs): each layer replays its
    #   captured pieces and launches attention between them, 10 us a layer (5-25 us);
    piecewise_per_layer_s: float = 10e-6
    # - a decode-only batch within the captured sizes: one full graph's launch, 30 us (10-100 us),
    #   whatever the layers.
    graph_replay_s: float = 30e-6
    # The fraction of the card's DRAM bandwidth a step's memory traffic reaches. FITTED, within (0, 1].
    bandwidth_efficiency: float = 0.7408182206817179
    # A step's math runs at the stack's effectiveTflops, the one prefill efficiency the sizing reads
    # too (infra/sizing/formulas.py, prefill_flops_per_second). The lab's default classes carry it as
    # this fraction of each card's peak (infra/catalogue.py, LAB_PREFILL_EFFICIENCY, where the fit's
    # value is pasted): the fit varies it there, for the lab's classes only (validate.lab_cards), and
    # the simulation reads nothing else. FITTED.
    prefill_efficiency: float = LAB_PREFILL_EFFICIENCY
    # Disaggregated only: the prefill's answer back to the router and the decode request out
    # (Dynamo's request plane), seconds. FITTED.
    handoff_s: float = 0.05
    # Copies between GPU blocks and the host KV buffers (kv_buffer_device cpu): the prefill worker's
    # after its forward, the decode worker's at the step that notices the pull; bytes/s of a
    # block-scattered copy over PCIe. FITTED.
    host_copy_bytes_per_s: float = 3132274660.566108
    # How many KV flows one host's TCP software path moves at once, each at its rate (the sizing's
    # same-node figure): every same-node flow of a host, whichever prefill/decode pair it joins, goes
    # through the host's CPU-bound TCP stack, in the order posted. FITTED, within 1 (what the probe
    # measured on 2 cores: several flows moved no more than one, finishing in order;
    # docs/measurements.md, "Several flows at once") and 4 (one per prefill/decode pair of the lab's
    # same-server stack, each pair's agents on cores of their own).
    host_transfer_parallelism: float = 3.6193496721438385
    # A NIXL agent pair's first transfer waits for their metadata exchange (vLLM's NixlConnector
    # handshake, once per prefill/decode pair), seconds. ESTIMATE: no published cell isolates it.
    handshake_s: float = 0.05
    # Run-to-run spread. ESTIMATES: the sigma of a lognormal factor on each request's frontend time
    # (Python services' scheduling noise), and the scale of the half-normal slowdown interference adds
    # to a step's GPU time (sim.ServingGraph._slowdown: never below the step's roofline; kernels vary little).
    frontend_jitter: float = 0.25
    step_noise: float = 0.05
    # The lab's KV pools as a multiple of a stack's, per stack, for comparing with the write-up: the
    # lab did not pin its pools, and ran its prefill and decode workers alike, so one factor per
    # stack, applied to every pool of it, decode included; its prefill-side cache token ratios and
    # the concurrency-4 cells constrain it. FITTED.
    # A stack's own prediction (`predict STACK`) uses its pools as configured.
    pool_scale: dict[str, float] = field(default_factory=lambda: {
        "kv-routing": 0.6708238842155612, "same-server": 0.5809171213641416})


# What the hardware allows each FITTED constant: the fit searches inside and reports one at a bound.
BOUNDS: dict[str, tuple[float, float]] = {
    "frontend_s": (0.002, 0.06),          # an HTTP hop, tokenizing 2.4k tokens, a routing decision
    "schedule_s": (0.0005, 0.015),         # vLLM's scheduler pass and input preparation on a desktop CPU
    "output_per_request_s": (2e-5, 3e-3),  # handling one request's token and streaming it, in Python
    "bandwidth_efficiency": (0.2, 1.0),    # achieved/peak DRAM bandwidth cannot exceed 1
    # Prefill's model FLOPs utilisation: AIConfigurator 0.12.0's measured kernels imply 0.51-0.65 for
    # Qwen3-32B on H100 SXM; a small model's narrow matrices reach less, none reaches the peak.
    "prefill_efficiency": (0.3, 0.75),
    "handoff_s": (0.001, 0.05),            # two request-plane messages on one LAN
    "host_copy_bytes_per_s": (2e9, 25e9),  # PCIe 4.0 x16 carries at most ~25 GB/s; scattered copies less
    "host_transfer_parallelism": (1.0, 4.0),  # one flow at a time (2 cores, measured) to one per pair
}

# The ESTIMATES' ranges (params above): what the hardware allows, for anyone varying them.
ESTIMATE_RANGES: dict[str, tuple[float, float]] = {
    "schedule_per_request_s": (10e-6, 100e-6),
    "launch_per_layer_s": (15e-6, 100e-6),
    "piecewise_per_layer_s": (5e-6, 25e-6),
    "graph_replay_s": (10e-6, 100e-6),
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
