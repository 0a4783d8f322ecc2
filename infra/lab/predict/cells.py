"""Predict every cell of a stack's benchmark matrix, and compare with the published table.

A cell is (prefix types, concurrency): a warm-up run (the lab did not restart workers between
runs, so caches are warm), then `runs` measured runs of `requests_per_concurrency x concurrency`
requests each; TTFT p50 and p99 are taken over each run's requests as AIPerf does (linear
interpolation), and the cell reports the median over the runs, as the write-up did.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Optional

from infra import prefix_cache
from infra.config.models import StackConfig
from infra.lab import published
from infra.lab.predict.params import LAB, LabParams
from infra.lab.predict.sim import Graph, Load, Stats, Timing, WorkerSpec
from infra.sizing import StackSizing, link_bytes_per_second


@dataclass(frozen=True)
class Row:
    prefix_types: int
    concurrency: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    requests_per_s: float
    # Share of prompt tokens the first worker (prefill or aggregated) found in its prefix cache.
    prefill_cache_ratio: float
    # Share of transfers whose decode worker already held the prefix (disaggregated only).
    decode_hit_ratio: Optional[float]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, which AIPerf reports)."""
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def topology(cfg: StackConfig, sizing: StackSizing, lab: LabParams,
             pool_scale: float = 1.0) -> tuple[list[WorkerSpec], dict]:
    """One simulated worker per replica on its class's GPU (one node per class), and the paths.
    `pool_scale` scales every worker's KV pool, decode included (params.LabParams.pool_scale)."""
    tflops = {name: c.effective_tflops for name, c in cfg.gpu_classes.items()}
    fastest = max(tflops[g.gpu_class] for g in cfg.workers)
    specs = []
    for g in cfg.workers:
        rate = tflops[g.gpu_class] * 1e12 / (2 * cfg.model.parameters) * lab.prefill_scale
        pool = int(sizing.group(g.name).kv_cache_bytes * pool_scale)
        blocks = prefix_cache.pool_blocks(pool, sizing.kv_bytes_per_token)
        specs += [WorkerSpec(f"{g.name}-{i}", g.role, g.gpu_class, g.gpu_class, rate,
                             fastest / tflops[g.gpu_class], blocks) for i in range(g.replicas)]
    measured = {(m.from_group, m.to_group): m.bytes_per_second for m in cfg.sizing.measured}
    paths = {}
    for p in (g for g in cfg.workers if g.role == "prefill"):
        for d in (g for g in cfg.workers if g.role == "decode"):
            same = p.gpu_class == d.gpu_class
            paths[(p.gpu_class, d.gpu_class)] = measured.get(
                (p.name, d.name), lab.same_node_bytes_per_s if same else link_bytes_per_second(cfg.sizing.link))
    return specs, paths


def timing(lab: LabParams) -> Timing:
    return Timing(frontend_s=lab.frontend_s, step_cpu_s=lab.step_cpu_s, decode_gpu_s=lab.decode_gpu_s,
                  decode_per_request_gpu_s=lab.decode_per_request_gpu_s, transfer_s=lab.transfer_s)


# Simulated runs per cell: the write-up's medians over 3 runs of 32 or 64 requests are noisy, and a
# prediction should be their expected value, so the model takes the median over many runs, on
# independent simulated graphs.
SIMULATED_GRAPHS = 3
RUNS_PER_GRAPH = 5

# The first of the numbered random streams (sim.Graph's `stream`): every simulated graph draws from
# its own, numbered from here by cell and graph, so a prediction comes out the same on every run.
STREAM = 2371


def _load(cfg: StackConfig, sizing: StackSizing, prefix_types: int) -> Load:
    b = cfg.benchmark
    return Load(prefix_types, b.prefix_tokens, b.prefix_tokens + b.unique_tokens, b.output_tokens,
                    sizing.kv_bytes_per_token)


@dataclass(frozen=True)
class TtftParts:
    """A mean TTFT in parts, ms: sent to prompt prefilled (frontend, queue, prefill); to KV arrived
    on the decode worker (transfer wait and its fixed cost; 0 aggregated); to first token."""

    prefill: float
    transfer: float
    first_token: float

    @property
    def total(self) -> float:
        return self.prefill + self.transfer + self.first_token


@dataclass(frozen=True)
class Usage:
    """Where one cell's time went, over its measured runs (what `advise` says binds a layout)."""

    # Share of the measured time each GPU (by class) had work, and each KV path (prefill class,
    # decode class) a transfer.
    gpu_busy: dict[str, float]
    path_busy: dict[tuple[str, str], float]
    ttft_parts_ms: TtftParts  # mean over the measured requests


def predict_cell(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int,
                 lab: LabParams = LAB, pool_scale: float = 1.0) -> Row:
    return simulate(cfg, sizing, prefix_types, concurrency, lab, pool_scale)[0]


def predicted_point(stack: str, prefix_types: int, concurrency: int) -> tuple[float, float]:
    """TTFT p50 (ms) and requests/s of one cell of Pulumi.<stack>.yaml as configured (`report --predicted`)."""
    from infra.lab import stack_files

    s = stack_files.load(stack)
    row = predict_cell(s.config, s.sizing, prefix_types, concurrency)
    return row.ttft_p50_ms, row.requests_per_s


def simulate(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, lab: LabParams = LAB,
             pool_scale: float = 1.0, graphs: int = SIMULATED_GRAPHS, runs: int = RUNS_PER_GRAPH) -> tuple[Row, Usage]:
    """One cell: its Row (medians over `graphs` x `runs` measured runs) and its Usage. Fewer graphs
    and runs are a coarser, cheaper estimate of the same cell (advise screens with one)."""
    specs, paths = topology(cfg, sizing, lab, pool_scale)
    load = _load(cfg, sizing, prefix_types)
    n = cfg.benchmark.requests_per_concurrency * concurrency
    p50s, p99s, rates = [], [], []
    measured = Stats()  # the measured runs of every graph count into one; warm-ups do not
    elapsed = 0.0
    gpu_busy: dict[str, float] = defaultdict(float)  # seconds with work in flight, over the measured runs
    path_busy: dict[tuple[str, str], float] = defaultdict(float)
    parts = {"prefill": 0.0, "transfer": 0.0, "first_token": 0.0}
    count = 0
    for g in range(graphs):
        graph = Graph(specs, paths, timing(lab), load, stream=STREAM + 1000 * prefix_types + 10 * concurrency + g)
        graph.run(concurrency, n)  # warm-up: caches as a long-running lab has them
        graph.stats = measured
        servers = [(gpu_busy, name, gpu) for name, gpu in graph.gpus.items()] + [
            (path_busy, key, path) for key, path in graph.paths.items()]
        for _ in range(runs):
            start, before = graph.sim.now, [server.busy_until_now() for _, _, server in servers]
            done = graph.run(concurrency, n)
            elapsed += graph.sim.now - start
            for (busy, name, server), was in zip(servers, before, strict=True):
                busy[name] += server.busy_until_now() - was
            ttft = [(r.first_token - r.sent) * 1000 for r in done]
            p50s.append(percentile(ttft, 50))
            p99s.append(percentile(ttft, 99))
            rates.append(len(done) / (max(r.done for r in done) - min(r.sent for r in done)))
            for r in done:
                arrived = r.prefilled if r.joined is None else r.joined
                parts["prefill"] += r.prefilled - r.sent
                parts["transfer"] += arrived - r.prefilled
                parts["first_token"] += r.first_token - arrived
            count += len(done)
    row = Row(prefix_types, concurrency, statistics.median(p50s), statistics.median(p99s),
              statistics.median(rates), measured.prefill_cache_ratio, measured.decode_hit_ratio)
    return row, Usage({k: v / elapsed for k, v in gpu_busy.items()}, {k: v / elapsed for k, v in path_busy.items()},
                      TtftParts(**{k: v * 1000 / count for k, v in parts.items()}))


def first_requests(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, count: int,
                   lab: LabParams = LAB) -> list[float]:
    """TTFT (ms) of the first `count` requests to complete on freshly started workers (cold caches),
    median over simulated graphs: what the write-up saw of cross-server before its OOM."""
    specs, paths = topology(cfg, sizing, lab)
    load = _load(cfg, sizing, prefix_types)
    per_graph = []
    for g in range(SIMULATED_GRAPHS * RUNS_PER_GRAPH):
        graph = Graph(specs, paths, timing(lab), load, stream=STREAM + g)
        done = graph.run(concurrency, cfg.benchmark.requests_per_concurrency * concurrency, stop_after=count)
        per_graph.append(sorted((r.first_token - r.sent) * 1000 for r in done))
    return [statistics.median(ttfts[i] for ttfts in per_graph) for i in range(count)]


def predict(cfg: StackConfig, sizing: StackSizing, lab: LabParams = LAB, pool_scale: float = 1.0) -> list[Row]:
    """Every cell of the stack's benchmark matrix."""
    b = cfg.benchmark
    return [predict_cell(cfg, sizing, p, c, lab, pool_scale=pool_scale) for c in b.concurrency for p in b.prefix_types]


def inputs(cfg: StackConfig, sizing: StackSizing, lab: LabParams = LAB) -> dict:
    """What the prediction rests on, for the JSON output."""
    specs, paths = topology(cfg, sizing, lab)
    return {"lab": asdict(lab), "workers": [asdict(s) for s in specs],
            "paths_bytes_per_s": {f"{a}->{b}": bps for (a, b), bps in paths.items()},
            "benchmark": {"prefix_tokens": cfg.benchmark.prefix_tokens, "unique_tokens": cfg.benchmark.unique_tokens,
                          "output_tokens": cfg.benchmark.output_tokens, "runs": cfg.benchmark.runs,
                          "requests_per_concurrency": cfg.benchmark.requests_per_concurrency}}


@dataclass(frozen=True)
class Error:
    stack: str
    prefix_types: int
    concurrency: int
    metric: str
    published: float
    predicted: float

    @property
    def relative(self) -> float:
        return (self.predicted - self.published) / self.published


def errors(stack: str, rows: list[Row]) -> list[Error]:
    """Predicted against published, for every cell the write-up published for this stack."""
    out = []
    for r in rows:
        cell = published.cell(stack, r.prefix_types, r.concurrency)
        if cell is None:
            continue
        for metric in ("ttft_p50_ms", "ttft_p99_ms", "requests_per_s"):
            value = getattr(cell, metric)
            if value is not None:
                out.append(Error(stack, r.prefix_types, r.concurrency, metric, value, getattr(r, metric)))
    return out
