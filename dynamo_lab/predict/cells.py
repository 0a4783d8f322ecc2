"""Predict every cell of a stack's benchmark matrix, and compare with the published table.

A cell is (prefix types, concurrency): a warm-up run (the lab did not restart workers between
runs, so caches are warm), then `runs` measured runs of `requests_per_concurrency x concurrency`
requests each; TTFT p50 and p99 are taken over each run's requests as AIPerf does (linear
interpolation), and the cell reports the median over the runs, as the write-up did.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Optional, Sequence

from dynamo_lab import published
from dynamo_lab.predict import costs, placement
from dynamo_lab.predict.kvcache import Cache
from dynamo_lab.predict.objectives import Objective, meets_all
from dynamo_lab.predict.params import LAB, LabParams
from dynamo_lab.predict.sim import Load, ServingGraph, Stats, Timing, WorkerSpec
from infra.config.schema import StackConfig
from infra.sizing import StackSizing


@dataclass(frozen=True)
class WorkerUse:
    """One simulated worker over a cell's measured runs: its pool, the most blocks its requests
    held at once (never above the pool: vLLM admits only what fits), and the requests it preempted."""

    name: str
    cache_blocks: int
    kv_blocks_peak: int
    preemptions: int


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
    # The lowest and highest TTFT p50 of the cell's measured runs (their spread, from the jitter
    # and routing's random ties; the cell reports their median).
    ttft_p50_ms_range: tuple[float, float] = (0.0, 0.0)
    workers: tuple[WorkerUse, ...] = ()
    rate: Optional[float] = None  # open loop: requests/s arriving (concurrency is then 0)
    # Open loop: requests completed per second over requests arrived per second, between the
    # KEEP_UP_TRIM and 1 - KEEP_UP_TRIM marks of each run (median over runs; `keeps_up`).
    completion_ratio: Optional[float] = None
    # The decode side (docs/predictor.md, "Decode figures"), each the median over the measured runs
    # of the run's percentile: ITL over every gap between two consecutive tokens of a request (all
    # requests' gaps together), TPOT over the requests' means per output token after the first,
    # end-to-end over the requests' sent-to-last-token latencies; output tokens completed per second.
    # ITL and TPOT are None where no request had two output tokens (no gap between tokens: AIPerf
    # reports no inter-token latency below two).
    itl_p50_ms: Optional[float] = None
    itl_p99_ms: Optional[float] = None
    tpot_p50_ms: Optional[float] = None
    tpot_p99_ms: Optional[float] = None
    e2e_p50_ms: float = 0.0
    e2e_p99_ms: float = 0.0
    output_tokens_per_s: float = 0.0
    # Under objectives (objectives.py; None without): the requests/s that met every one (median over
    # the runs; never above requests_per_s), and the share of the measured requests that did.
    goodput_requests_per_s: Optional[float] = None
    attainment: Optional[float] = None
    requests: int = 0  # measured, over every run (what `preemptions` counts over)

    @property
    def keeps_up(self) -> Optional[bool]:
        """Open loop: whether it completes requests as fast as they arrive (None in a closed loop,
        which sends only as fast as it completes)."""
        return None if self.completion_ratio is None else self.completion_ratio >= KEEPS_UP

    @property
    def preemptions(self) -> int:
        return sum(w.preemptions for w in self.workers)


# The Row's decode figures, in its order (RunFigures has each).
DECODE_FIGURES = ("itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
                  "output_tokens_per_s")


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, which AIPerf reports)."""
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def topology(cfg: StackConfig, sizing: StackSizing, lab: LabParams,
             pool_scale: float = 1.0) -> tuple[list[WorkerSpec], dict]:
    """One simulated worker per replica, on a node and GPU of its class, and the KV paths between
    the nodes (placement.py). `pool_scale` scales every worker's KV pool, decode included
    (params.LabParams.pool_scale)."""
    specs = placement.workers(cfg, sizing, pool_scale)
    return specs, placement.paths(cfg, sizing, specs, lab.host_transfer_parallelism)


def timing(lab: LabParams) -> Timing:
    host = costs.HostCost(schedule_s=lab.schedule_s, schedule_per_request_s=lab.schedule_per_request_s,
                          output_per_request_s=lab.output_per_request_s, launch_per_layer_s=lab.launch_per_layer_s,
                          piecewise_per_layer_s=lab.piecewise_per_layer_s, graph_replay_s=lab.graph_replay_s,
                          host_copy_bytes_per_s=lab.host_copy_bytes_per_s)
    return Timing(frontend_s=lab.frontend_s, host=host, efficiency=costs.Efficiency(lab.bandwidth_efficiency),
                  handoff_s=lab.handoff_s, handshake_s=lab.handshake_s, frontend_jitter=lab.frontend_jitter,
                  step_noise=lab.step_noise)


# Simulated runs per cell: the write-up's medians over 3 runs of 32 or 64 requests are noisy, and a
# prediction should be their expected value, so the model takes the median over many runs, on
# independent simulated graphs.
SIMULATED_GRAPHS = 3
RUNS_PER_GRAPH = 5

# The first of the numbered random streams (sim.ServingGraph's `stream`): every simulated graph draws from
# its own, numbered from here by cell and graph, so a prediction comes out the same on every run.
STREAM = 2371


def _load(cfg: StackConfig, sizing: StackSizing, prefix_types: int) -> Load:
    b = cfg.benchmark
    return Load(prefix_types, b.prefix_tokens, b.prefix_tokens + b.unique_tokens, b.output_tokens,
                costs.model_cost(cfg.model, sizing.kv_bytes_per_token))


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


def predicted_point(stack: str, prefix_types: int, concurrency: int) -> tuple[float, float, float]:
    """TTFT p50 (ms), requests/s and ITL p99 (ms) of one cell of Pulumi.<stack>.yaml as configured
    (`report --predicted`)."""
    from dynamo_lab import stack_files

    s = stack_files.load(stack)
    row = predict_cell(s.config, s.sizing, prefix_types, concurrency)
    return row.ttft_p50_ms, row.requests_per_s, row.itl_p99_ms


# Requests per measured run of an open-loop cell (`rate`): enough for a p99 to rest on a few.
OPEN_LOOP_REQUESTS = 128

def run_requests(cfg: StackConfig, concurrency: int, rate: Optional[float] = None) -> int:
    """The requests of one measured run of a cell: the benchmark's per-concurrency count times the
    concurrency (closed loop), or OPEN_LOOP_REQUESTS at a `rate`."""
    return OPEN_LOOP_REQUESTS if rate else cfg.benchmark.requests_per_concurrency * concurrency


# Whether an open-loop graph keeps up, from the middle of each run: the first and last
# KEEP_UP_TRIM of its requests are left out, since the run's requests/s (its count over first sent
# to last done) counts the last request's whole latency too, which at 50 requests/s is most of a
# 2.5 s run even for a graph that keeps up. In the middle, a graph that keeps up completes as fast
# as requests arrive (a ratio near 1: the same requests, each shifted by its latency); one that
# falls behind completes at its capacity, so the ratio is its capacity's share of the rate.
KEEP_UP_TRIM = 0.1
# Below this ratio it falls behind: its backlog grows for as long as the load lasts. Leaves room
# for a run's latency jitter (over the middle 102 requests at 50/s, about 2 s, a 0.1 s spread of
# latency at either end moves the ratio by about 7%).
KEEPS_UP = 0.9


def completion_ratio(done: list) -> float:
    """Completions per second over arrivals per second between the KEEP_UP_TRIM marks of one
    open-loop run's requests (`done`: every request of the run)."""
    sent, finished = sorted(r.sent for r in done), sorted(r.done for r in done)
    k1 = int(len(done) * KEEP_UP_TRIM)
    k2 = len(done) - 1 - k1
    span = finished[k2] - finished[k1]
    # No time between the marks' completions (they finished on one step): as fast as can be measured.
    return (sent[k2] - sent[k1]) / span if span > 0 else 1.0


@dataclass(frozen=True)
class RunFigures:
    """One measured run's figures (Row holds the median of each over the runs)."""

    ttft_p50_ms: float
    ttft_p99_ms: float
    requests_per_s: float
    itl_p50_ms: Optional[float]  # None: no request had a gap between tokens (one output token each)
    itl_p99_ms: Optional[float]
    tpot_p50_ms: Optional[float]
    tpot_p99_ms: Optional[float]
    e2e_p50_ms: float
    e2e_p99_ms: float
    output_tokens_per_s: float
    met: int  # requests that met every objective
    goodput_requests_per_s: float


def run_figures(done: list, objectives: Sequence[Objective] = ()) -> RunFigures:
    """The figures of one run's requests (sim.Request, each completed with its token times)."""
    span = max(r.done for r in done) - min(r.sent for r in done)
    ttft, tpot, e2e, gaps = [], [], [], []
    met = 0
    for r in done:
        times = r.token_times
        first = (r.first_token - r.sent) * 1000
        mine = [(b - a) * 1000 for a, b in pairwise(times)]
        # A request of one output token has no TPOT (no token after its first), as AIPerf leaves it out.
        mean = (times[-1] - times[0]) * 1000 / (len(times) - 1) if len(times) > 1 else None
        ttft.append(first)
        if mean is not None:
            tpot.append(mean)
        e2e.append((r.done - r.sent) * 1000)
        gaps += mine
        met += meets_all(objectives, first, mean, mine)

    def pct(values: list[float], q: float) -> Optional[float]:
        return percentile(values, q) if values else None
    return RunFigures(percentile(ttft, 50), percentile(ttft, 99), len(done) / span,
                      pct(gaps, 50), pct(gaps, 99), pct(tpot, 50), pct(tpot, 99),
                      percentile(e2e, 50), percentile(e2e, 99), sum(len(r.token_times) for r in done) / span,
                      met, met / span)


# Each cell this process simulated, by everything its simulation reads (the workers, paths, load,
# timings, cell, fidelity and request count): a simulation is a function of these alone (each graph
# draws from its own numbered stream), so one met again (advise's candidates shared by several
# searches, a command's predictions of a cell it already made) is the same figures, not made twice.
_SIMULATED: dict[bytes, tuple[Row, Usage]] = {}
_SIMULATED_MAX = 4096


def forget() -> None:
    """Forget every cell simulated so far: the next simulation of each runs again (a test comparing
    two ways of simulating a cell must not be handed the first way's figures, and one that changes a
    constant the simulation reads besides its inputs, in params.py or sim.py, must not be handed the
    figures made before the change)."""
    _SIMULATED.clear()


def _cell(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, lab: LabParams,
          pool_scale: float, graphs: int, runs: int, rate: Optional[float],
          objectives: Sequence[Objective]) -> tuple[bytes, tuple]:
    """A cell's key in _SIMULATED, and the arguments of its _simulate."""
    specs, paths = topology(cfg, sizing, lab, pool_scale)
    load = _load(cfg, sizing, prefix_types)
    n = run_requests(cfg, concurrency, rate)
    key = hashlib.sha256(pickle.dumps((specs, paths, load, timing(lab), prefix_types, concurrency, graphs, runs,
                                       rate, n, tuple(objectives)))).digest()
    return key, (specs, paths, load, lab, prefix_types, concurrency, graphs, runs, rate, n, tuple(objectives))


def cell_key(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, lab: LabParams = LAB,
             pool_scale: float = 1.0, graphs: int = SIMULATED_GRAPHS, runs: int = RUNS_PER_GRAPH,
             rate: Optional[float] = None, objectives: Sequence[Objective] = ()) -> bytes:
    """The key of the cell `simulate` would simulate with these arguments (for recall and remember)."""
    return _cell(cfg, sizing, prefix_types, concurrency, lab, pool_scale, graphs, runs, rate, objectives)[0]


def recall(key: bytes) -> Optional[tuple[Row, Usage]]:
    """A cell this process has simulated or been handed (remember), as a copy; None if neither."""
    return copy.deepcopy(_SIMULATED[key]) if key in _SIMULATED else None


def remember(key: bytes, cell: tuple[Row, Usage]) -> None:
    """Keep a cell simulated elsewhere (pool.py's processes) as this process's own."""
    if len(_SIMULATED) >= _SIMULATED_MAX:
        _SIMULATED.clear()
    _SIMULATED[key] = copy.deepcopy(cell)


def simulate(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, lab: LabParams = LAB,
             pool_scale: float = 1.0, graphs: int = SIMULATED_GRAPHS, runs: int = RUNS_PER_GRAPH,
             rate: Optional[float] = None, objectives: Sequence[Objective] = ()) -> tuple[Row, Usage]:
    """One cell: its Row (medians over `graphs` x `runs` measured runs) and its Usage. Fewer graphs
    and runs are a coarser, cheaper estimate of the same cell (advise screens with one). With
    `rate`, requests arrive open-loop (Poisson, `rate` per second; `concurrency` is then 0 in the Row).
    With `objectives`, the Row's goodput and attainment under them."""
    key, args = _cell(cfg, sizing, prefix_types, concurrency, lab, pool_scale, graphs, runs, rate, objectives)
    if key not in _SIMULATED:
        remember(key, _simulate(*args))
    return copy.deepcopy(_SIMULATED[key])


def _simulate(specs: list[WorkerSpec], paths: dict, load: Load, lab: LabParams, prefix_types: int, concurrency: int,
              graphs: int, runs: int, rate: Optional[float], n: int,
              objectives: Sequence[Objective]) -> tuple[Row, Usage]:
    figures: list[RunFigures] = []
    ratios = []
    measured = Stats()  # the measured runs of every graph count into one; warm-ups do not
    elapsed = 0.0
    gpu_busy: dict[str, float] = defaultdict(float)  # seconds with work in flight, over the measured runs
    path_busy: dict[tuple[str, str], float] = defaultdict(float)
    parts = {"prefill": 0.0, "transfer": 0.0, "first_token": 0.0}
    count = 0
    peaks: dict[str, int] = defaultdict(int)
    preempted: dict[str, int] = defaultdict(int)
    for g in range(graphs):
        stream = STREAM + 1000 * prefix_types + 10 * concurrency + g + (round(rate * 1000) * 100 if rate else 0)
        graph = ServingGraph(specs, paths, timing(lab), load, stream=stream)
        run = (lambda: graph.run_open(rate, n)) if rate else (lambda: graph.run(concurrency, n))  # noqa: B023
        run()  # warm-up: caches as a long-running lab has them
        graph.stats = measured
        for w in graph.workers:
            w.cache.peak, w.preemptions = w.cache.in_use(), 0
        servers = [(gpu_busy, name, gpu) for name, gpu in graph.gpus.items()] + [
            (path_busy, key[:2], path) for key, path in graph.paths.items()]  # a pair's path counts as its nodes'
        pairs = Counter(key[:2] for key in graph.paths)
        for _ in range(runs):
            start, before = graph.sim.now, [server.busy_until_now() for _, _, server in servers]
            done = run()
            elapsed += graph.sim.now - start
            for (busy, name, server), was in zip(servers, before, strict=True):
                busy[name] += server.busy_until_now() - was
            figures.append(run_figures(done, objectives))
            if rate:
                ratios.append(completion_ratio(done))
            for r in done:
                arrived = r.prefilled if r.joined is None else r.joined
                parts["prefill"] += r.prefilled - r.sent
                parts["transfer"] += arrived - r.prefilled
                parts["first_token"] += r.first_token - arrived
            count += len(done)
        for w in graph.workers:
            peaks[w.name] = max(peaks[w.name], w.cache.peak)
            preempted[w.name] += w.preemptions
    uses = tuple(WorkerUse(s.name, s.cache_blocks, peaks[s.name], preempted[s.name]) for s in specs)

    def median(name: str) -> Optional[float]:
        """Over the runs; None where a run has none (every run has the same output tokens a request)."""
        values = [getattr(f, name) for f in figures]
        return None if None in values else statistics.median(values)

    p50s = [f.ttft_p50_ms for f in figures]
    row = Row(prefix_types, concurrency, median("ttft_p50_ms"), median("ttft_p99_ms"),
              median("requests_per_s"), measured.prefill_cache_ratio, measured.decode_hit_ratio,
              (min(p50s), max(p50s)), uses, rate, statistics.median(ratios) if ratios else None,
              *(median(name) for name in DECODE_FIGURES),
              goodput_requests_per_s=median("goodput_requests_per_s") if objectives else None,
              attainment=sum(f.met for f in figures) / count if objectives else None, requests=count)
    return row, Usage({k: v / elapsed for k, v in gpu_busy.items()},
                      {k: v / elapsed / pairs[k] for k, v in path_busy.items()},
                      TtftParts(**{k: v * 1000 / count for k, v in parts.items()}))


# What the decode workers may have served before the write-up's first cross-server requests: its
# prefill worker was OOMKilled and restarted (at concurrency 4, and after 4 requests at concurrency
# 1), its decode workers were not, so whichever run came second met decode caches holding prefixes.
EARLIER_REQUESTS = 4


def first_requests(cfg: StackConfig, sizing: StackSizing, prefix_types: int, concurrency: int, count: int,
                   lab: LabParams = LAB, after_earlier: bool = False) -> list[float]:
    """TTFT (ms) of the first `count` requests to complete, median over simulated graphs: on freshly
    started workers (cold caches), or `after_earlier`: once EARLIER_REQUESTS requests at concurrency 1
    have run, with the prefill workers restarted (their caches and NIXL agents new) and the decode
    workers keeping their caches."""
    specs, paths = topology(cfg, sizing, lab)
    load = _load(cfg, sizing, prefix_types)
    per_graph = []
    for g in range(SIMULATED_GRAPHS * RUNS_PER_GRAPH):
        graph = ServingGraph(specs, paths, timing(lab), load, stream=STREAM + g)
        if after_earlier:
            graph.run(1, EARLIER_REQUESTS)
            for w in (w for w in graph.workers if w.role == "prefill"):
                w.cache = Cache(w.cache.capacity)
                graph.shaken = {pair for pair in graph.shaken if w.name not in pair}
        done = graph.run(concurrency, cfg.benchmark.requests_per_concurrency * concurrency, stop_after=count)
        per_graph.append(sorted((r.first_token - r.sent) * 1000 for r in done))
    return [statistics.median(ttfts[i] for ttfts in per_graph) for i in range(count)]


def predict(cfg: StackConfig, sizing: StackSizing, lab: LabParams = LAB, pool_scale: float = 1.0,
            rates: Optional[list[float]] = None) -> list[Row]:
    """Every cell of the stack's benchmark matrix; with `rates`, each prefix type open-loop at each rate."""
    b = cfg.benchmark
    if rates:
        return [simulate(cfg, sizing, p, 0, lab, pool_scale, rate=r)[0] for r in rates for p in b.prefix_types]
    return [predict_cell(cfg, sizing, p, c, lab, pool_scale=pool_scale) for c in b.concurrency for p in b.prefix_types]


def _spec(s: WorkerSpec) -> dict:
    """A worker as the JSON gives it: its card's tensor-parallel figures only where it has ranks."""
    out = asdict(s)
    del out["group"]  # its name says it (`<group>-<replica>`)
    # The model's KV over the worker's ranks (infra.resolved.Ranks), a fact of the stack, not an input
    # the prediction adds: the JSON keeps the figures it had.
    del out["rank_kv_bytes_per_token"]
    if s.card.ranks == 1:
        out["card"] = {"bandwidth": s.card.bandwidth, "peak_flops": s.card.peak_flops,
                       "sustained_flops": s.card.sustained_flops}
    return out


def inputs(cfg: StackConfig, sizing: StackSizing, lab: LabParams = LAB) -> dict:
    """What the prediction rests on, for the JSON output."""
    specs, paths = topology(cfg, sizing, lab)
    return {"lab": asdict(lab), "workers": [_spec(s) for s in specs],
            "paths": {f"{a}->{b}": {"capacity_bytes_per_s": p.capacity, "per_flow_bytes_per_s": p.per_flow}
                      for (a, b), p in paths.items()},
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
