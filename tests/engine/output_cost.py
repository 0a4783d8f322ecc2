"""Runs in the engine tier's own environment (.venv-engine, tests/engine/requirements.txt), never in
.venv; not a test, a measurement (docs/peer.md, "The worker's output handling"):

    .venv-engine/bin/python tests/engine/output_cost.py

What vLLM 0.31.0's own front-process output path costs per request for one decode step of B
requests (B = 4 and 64), on this machine's CPU, with vLLM's own code, each request as Dynamo 1.6.1's
vLLM worker makes it (dynamo/vllm/handlers.py `build_sampling_params`: `detokenize = False`,
`output_kind = RequestOutputKind.DELTA`):
  (a) decoding the EngineCoreOutputs the engine core sends (vllm/v1/serial_utils.py MsgpackDecoder);
  (b) OutputProcessor.process_outputs (vllm/v1/engine/output_processor.py), with log_stats on (vLLM's
      default) and off, each request's RequestOutput put into its RequestOutputCollector as AsyncLLM's
      output handler does;
  (c) each request's consumer taking it (`q.get_nowait() or await q.get()`, AsyncLLM.generate) and
      turning it into a dict of token ids: a stand-in for Dynamo's handler (`generate_tokens` builds
      a few more fields), without its bridge into Dynamo's Rust runtime and the response stream to
      the frontend, which are not measured here.
Prints each part's median over the steps after a warm-up fifth, in microseconds a request, 3 runs.
"""

import asyncio
import statistics
import sys
import time

from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
from vllm.v1.engine.output_processor import OutputProcessor, RequestOutputCollector
from vllm.v1.metrics.stats import IterationStats
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

STEPS = 300
PROMPT_TOKENS = 2371  # the lab's request shape (2,000 shared + 371 unique tokens)


def requests(op: OutputProcessor, b: int, tag: str) -> dict[str, RequestOutputCollector]:
    """B requests added to the output processor as AsyncLLM.add_request does, each with its queue."""
    queues = {}
    for i in range(b):
        rid = f"{tag}-{i}"
        sp = SamplingParams(max_tokens=10**6, detokenize=False, output_kind=RequestOutputKind.DELTA, ignore_eos=True)
        req = EngineCoreRequest(request_id=rid, prompt_token_ids=list(range(PROMPT_TOKENS)), mm_features=None,
                                sampling_params=sp, pooling_params=None, arrival_time=time.time(), lora_request=None,
                                cache_salt=None, data_parallel_rank=None, external_req_id=rid)
        queues[rid] = RequestOutputCollector(RequestOutputKind.DELTA, rid)
        op.add_request(req, None, None, 0, queues[rid])
    return queues


async def consume(q: RequestOutputCollector, sink: list) -> None:
    """One request's generate() taking its step's output, and a handler's dict of it."""
    out = q.get_nowait() or await q.get()
    first = out.outputs[0]
    sink.append({"index": 0, "token_ids": list(first.token_ids), "finish_reason": first.finish_reason})


def run(b: int, log_stats: bool) -> tuple[float, float, float]:
    """Each part's median seconds a request over STEPS steps of B requests, less a warm-up fifth."""
    op = OutputProcessor(None, log_stats=log_stats)
    queues = requests(op, b, f"b{b}-{log_stats}")
    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(EngineCoreOutputs)
    parts: tuple[list[float], list[float], list[float]] = ([], [], [])

    async def steps() -> None:
        for step in range(STEPS):
            frames = encoder.encode(EngineCoreOutputs(
                outputs=[EngineCoreOutput(request_id=rid, new_token_ids=[1000 + step]) for rid in queues],
                timestamp=time.monotonic()))
            t0 = time.perf_counter()
            got = decoder.decode(frames)
            t1 = time.perf_counter()
            op.process_outputs(got.outputs, got.timestamp, IterationStats() if log_stats else None)
            t2 = time.perf_counter()
            sink: list = []
            await asyncio.gather(*(consume(q, sink) for q in queues.values()))
            t3 = time.perf_counter()
            assert len(sink) == b
            for part, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                part.append(seconds)

    asyncio.run(steps())
    a, p, c = (statistics.median(part[STEPS // 5:]) / b for part in parts)
    return a, p, c


def main() -> None:
    print(f"python {sys.version.split()[0]}; microseconds a request a step, median of {STEPS - STEPS // 5} steps, "
          "3 runs")
    for log_stats in (True, False):
        for b in (4, 64):
            runs = [run(b, log_stats) for _ in range(3)]
            for name, k in (("(a) decode", 0), ("(b) process_outputs", 1), ("(c) generate + handler", 2)):
                print(f"log_stats={log_stats!s:5} B={b:2d} {name:22s} " + " ".join(f"{r[k] * 1e6:6.1f}" for r in runs))


if __name__ == "__main__":
    main()
