"""The constants the predictor needs that no stack file holds, with where each comes from.

Engine and system costs of the lab's hardware cannot be measured on a CPU-only machine; they are
fitted to the write-up's concurrency-4 cells only (`dynamo-lab predict --calibrate`), and the
concurrency-8 cells are the hold-out that judges them (docs/predictor.md). The values are pasted
as the fit printed them, unrounded (those it left where they started, as they were): pools are
whole blocks and routing breaks ties at random, so a prediction moves in steps, and rounding a
constant to three figures moved a fitted cell by several percent.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LabParams:
    # Frontend + router per request (HTTP, tokenization, routing), seconds. FITTED.
    frontend_s: float = 0.02455019543901942
    # Host-side cost of one vLLM engine step (scheduling, kernel launches), seconds: each worker
    # process has its own CPU, so time-slicing does not stretch it. FITTED.
    step_cpu_s: float = 0.00491
    # GPU time of one decode step with one running request on a 24GB-class GPU, seconds, and what
    # each further request in the batch adds; shared when workers time-slice the GPU. FITTED.
    decode_gpu_s: float = 0.0003188595605706292
    decode_per_request_gpu_s: float = 0.0010015952352213954
    # Prefill throughput as a multiple of the GPU class's effectiveTflops estimate. FITTED.
    prefill_scale: float = 1.8644096720213992
    # Same-node KV transfer throughput of the lab's 24GB server, bytes/s. FITTED: the lab's host
    # differs from the development machine, whose loopback measurement is in docs/measurements.md.
    same_node_bytes_per_s: float = 1.2e9
    # Fixed cost of one KV transfer (NIXL handshake, notification, decode scheduling), seconds. FITTED.
    transfer_s: float = 0.14002603460091584
    # The lab's KV pools as a multiple of a stack's, per stack, for comparing with the write-up: the
    # lab did not pin its pools, and ran its prefill and decode workers alike, so one factor per
    # stack, applied to every pool of it, decode included; its prefill-side cache token ratios and
    # the concurrency-4 cells constrain it. FITTED.
    # A stack's own prediction (`predict STACK`) uses its pools as configured.
    pool_scale: dict[str, float] = field(default_factory=lambda: {
        "kv-routing": 0.6069865513504619, "same-server": 0.5256355481880121})


LAB = LabParams()
