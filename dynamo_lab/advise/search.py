"""Search the layouts a cluster allows, keep what the sizing and preflight accept, and rank the rest.

Every candidate is the base stack file with its `workers` replaced (and, for a traffic given on
the command line, its `workload` and `benchmark`: stack_file.py), loaded and sized as `pulumi up` would, then
preflighted against the cluster: a refused candidate keeps the first reason. Accepted ones are
predicted in two passes (docs/advise.md): a screening pass of one simulated run per traffic
point for every candidate, then the predictor's full estimate (as `dynamo-lab predict` makes it)
for the best REFINED_PER_FAMILY of each family; the ranking is over the refined candidates whose
TTFT p99 stays within the goal's bound, and those over it are kept apart, unranked.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from dynamo_lab import stack_files
from dynamo_lab.advise import candidates
from dynamo_lab.advise.candidates import ClassNode, Layout
from dynamo_lab.advise.inputs import Base, Goal
from dynamo_lab.advise.stack_file import StackDoc, candidate_config, gpu_classes
from dynamo_lab.advise.traffic import Point, Traffic
from dynamo_lab.advise.uncertainty import Uncertainty
from dynamo_lab.predict import cells, placement, pool
from dynamo_lab.predict.cells import Row, TtftParts, Usage
from dynamo_lab.predict.envelope import INSIDE, Envelope, envelope
from dynamo_lab.predict.params import LAB, LabParams
from dynamo_lab.preflight.checks import check
from dynamo_lab.preflight.cluster_data import ClusterData
from infra import prefix_cache
from infra.errors import ConfigError, UserError
from infra.plan import Stack, load_stack

# The screening pass: one simulated graph, one measured run after its warm-up, per point.
SCREEN_GRAPHS, SCREEN_RUNS = 1, 1
REFINED_PER_FAMILY = 2
# Beyond this many layouts (two classes of one node of 6 units give 150; the lab's 68) the search
# keeps only layouts of at most as many workers as the traffic's most requests in flight: a closed
# loop of C requests keeps at most C workers busy at any instant, so each further worker adds only
# prefix-cache capacity and routing choice (docs/advise.md, "What it searches").
MAX_LAYOUTS = 400
# A bounded search (over MAX_LAYOUTS) screens in two steps, for its time: every accepted layout at
# the traffic's heaviest point alone (most requests in flight, or the highest rate, and most prefix
# types: where layouts differ most), then the best SHORTLIST of each family at every point; and it
# predicts each family's best in full (BOUNDED_REFINED), not two. On eight nodes (132 accepted) a
# screening at every point took 32 s and two a family in full 48 s on 2 busy cores (2026-12-03).
SHORTLIST = 4
BOUNDED_REFINED = 1
# How often a long stage of the search says how far it is (search's `progress`).
PROGRESS_S = 5.0


# --- Evaluation ---------------------------------------------------------------------------------

REFUSED_CONFIG, REFUSED_PREFLIGHT, SCREENED, REFINED = "sizing", "preflight", "screened", "refined"
# A bounded search's layout screened at the heaviest point only, not shortlisted (SHORTLIST).
SCREENED_HEAVIEST = "screened at the heaviest point"


@dataclass(frozen=True)
class Binding:
    # "GPU time-slices" ("GPU time" on whole GPUs), "the link", "the same-node KV path",
    # "prefix-cache capacity", "host memory"
    resource: str
    level: float  # 0..1: busy share, missed share of reusable prefix, or share of allocatable requested
    detail: str


@dataclass
class Candidate:
    layout: Layout
    config: StackDoc
    status: str = ""
    reason: str = ""  # why the sizing or preflight refused it
    stack: Optional[Stack] = None
    rows: list[Row] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    host_memory: tuple[float, str] = (0.0, "")  # the fullest node's share of allocatable memory requested
    score: float = math.nan  # the goal's metric, geometric mean over the traffic's points
    worst_p99_ms: float = math.nan
    over_bound: bool = False
    binding: Optional[Binding] = None
    envelopes: list[Envelope] = field(default_factory=list)  # each point's (predict/envelope.py)
    runs: int = 0  # simulated measured runs per point (the rows' preemptions are summed over them)

    @property
    def envelope(self) -> Envelope:
        """Every point's inputs: what any of them has outside what the validation covered."""
        return functools.reduce(operator.or_, self.envelopes, INSIDE)

    def mean(self, metric: str) -> float:
        return geomean([getattr(r, metric) for r in self.rows])

    @property
    def preemptions(self) -> int:
        """Its requests preempted over the simulated runs of every point: where its KV did not fit."""
        return sum(r.preemptions for r in self.rows)

    @property
    def ttft_parts_ms(self) -> TtftParts:
        """The mean over the traffic's points."""
        return TtftParts(*(sum(getattr(u.ttft_parts_ms, f.name) for u in self.usage) / len(self.usage)
                           for f in dataclasses.fields(TtftParts)))


@dataclass(frozen=True)
class KvOverflow:
    """Where a layout's KV did not fit: the worker, at the point, that preempted the most."""

    preemptions: int  # over every point's simulated runs
    worker: str
    kv_blocks_peak: int
    cache_blocks: int
    point: int  # index into the traffic's points
    runs: int


def kv_overflow(c: Candidate) -> Optional[KvOverflow]:
    """None when every request's KV fitted at every point (vLLM never preempted)."""
    if not c.preemptions:
        return None
    i, w = max(((i, w) for i, r in enumerate(c.rows) for w in r.workers), key=lambda iw: iw[1].preemptions)
    return KvOverflow(c.preemptions, w.name, w.kv_blocks_peak, w.cache_blocks, i, c.runs)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(max(v, 1e-9)) for v in values) / len(values))


def _first(reasons: list[str]) -> str:
    """The first of a refusal's reasons, and how many more there were."""
    return reasons[0] + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")


def _accept(c: Candidate, stack_name: str, data: ClusterData) -> None:
    raw, secrets = stack_files.config_from_doc(c.config)
    try:
        c.stack = load_stack(stack_name, raw, secrets)
    except ConfigError as exc:
        c.status, c.reason = REFUSED_CONFIG, _first([f"{path}: {message}" for path, message in exc.problems])
        return
    report = check(c.stack, data)
    if not report.fits:
        c.status, c.reason = REFUSED_PREFLIGHT, _first([f"{p.where}: {p.check}: {p.problem}" for p in report.problems])
        return
    fullest = max(((float(n.needs / n.has), row.name) for row in report.nodes for n in row.resources
                   if n.resource == "memory" and n.has), default=(0.0, ""))
    c.host_memory = fullest


def _predict(found: list[Candidate], traffic: Traffic, goal: Goal, lab: LabParams, graphs: int, runs: int,
             workers: Optional[int], done: Callable[[int], None] = lambda n: None) -> None:
    """Every candidate's rows at every point of the traffic, `graphs` x `runs` measured runs each,
    simulated on `workers` processes (pool.py: the figures do not depend on it); `done` is told how
    many candidates are predicted as they are."""
    points = traffic.points
    jobs = [pool.Job(c.stack.config, c.stack.sizing, pt.prefix_types, pt.concurrency, lab, graphs, runs, pt.rate)
            for c in found for pt in points]
    results = pool.simulate(jobs, workers, done=lambda n: done(n // len(points)) if n % len(points) == 0 else None)
    for k, c in enumerate(found):
        mine = results[k * len(points):(k + 1) * len(points)]
        c.rows, c.usage = [row for row, _ in mine], [usage for _, usage in mine]
        c.envelopes = [envelope(c.stack.resolved, pt.prefix_types, pt.concurrency, rate=pt.rate) for pt in points]
        c.runs = graphs * runs
        c.score = c.mean(goal.metric)
        c.worst_p99_ms = max(r.ttft_p99_ms for r in c.rows)
        c.over_bound = goal.ttft_p99_max_ms is not None and c.worst_p99_ms > goal.ttft_p99_max_ms
        c.binding = binding(c, traffic)


def binding(c: Candidate, traffic: Traffic) -> Binding:
    """The resource nearest its limit, by four shares (docs/advise.md, "What binds"): the busiest
    GPU's busy share, the busiest KV path's, the share of reusable prefix tokens the caches still
    recomputed or re-sent, and the fullest node's share of allocatable memory requested. A KV pool
    that fills is not among them: it fills as requests queue behind whichever of these binds
    (preemptions, where the KV does not fit, are said apart: `kv_overflow`)."""
    where = [pt.where(bool(traffic.prefix_tokens)) for pt in traffic.points]
    options = []
    gpu = max(((share, g, i) for i, u in enumerate(c.usage) for g, share in u.gpu_busy.items()), default=None)
    if gpu:
        specs = placement.workers(c.stack.config, c.stack.sizing)
        workers = sum(s.gpu == gpu[1] for s in specs)
        group = next(s.group for s in specs if s.gpu == gpu[1])
        cls = next(g.gpu_class for g in c.stack.config.workers if g.name == group)
        if c.stack.config.gpu_classes[cls].sharing == "whole":
            # Whole GPUs: one worker owns them, nothing is time-sliced.
            options.append(Binding("GPU time", gpu[0], f"{gpu[1]} busy {gpu[0]:.0%} of the run, owned by one worker "
                                   f"({where[gpu[2]]})"))
        else:
            # The simulation names a class's one GPU by the class ("gpu-24gb's GPU"), any other by itself
            # ("gpu-24gb[2] GPU 0"), which needs no "'s GPU" after it.
            gpu_words = f"{gpu[1]}'s GPU" if gpu[1] in c.stack.config.gpu_classes else gpu[1]
            options.append(Binding("GPU time-slices", gpu[0], f"{gpu_words} busy {gpu[0]:.0%} of the run, shared "
                                   f"by {workers} worker{'s' * (workers > 1)} ({where[gpu[2]]})"))
    path = max(((share, k, i) for i, u in enumerate(c.usage) for k, share in u.path_busy.items()), default=None)
    if path:
        a, b = path[1]
        name, route = ("the same-node KV path", f"host TCP on {a}'s node") if a == b else ("the link", f"{a} -> {b}")
        options.append(Binding(name, path[0], f"{route} busy {path[0]:.0%} of the run ({where[path[2]]})"))
    reusable = prefix_cache.reusable_prefix_tokens(traffic.prefix_tokens) / traffic.input_tokens
    if reusable > 0:
        misses = []
        for i, r in enumerate(c.rows):
            misses.append((max(0.0, 1 - r.prefill_cache_ratio / reusable), "recomputed", i))
            if r.decode_hit_ratio is not None:
                misses.append((1 - r.decode_hit_ratio, "re-sent to a decode worker lacking it", i))
        miss = max(misses)
        options.append(Binding("prefix-cache capacity", miss[0], f"{miss[0]:.0%} of the reusable prefix {miss[1]} "
                               f"({where[miss[2]]})"))
    if c.host_memory[1]:
        options.append(Binding("host memory", c.host_memory[0], f"{c.host_memory[0]:.0%} of node "
                               f"{c.host_memory[1]}'s allocatable memory requested"))
    return max(options, key=lambda b: b.level)


# --- The search ---------------------------------------------------------------------------------


@dataclass
class Family:
    name: str
    looked_at: int = 0
    refused_config: list[Candidate] = field(default_factory=list)
    refused_preflight: list[Candidate] = field(default_factory=list)
    refined: list[Candidate] = field(default_factory=list)  # best first

    @property
    def best(self) -> Optional[Candidate]:
        return self.refined[0] if self.refined else None


@dataclass
class Advice:
    stack: str  # the name the written file (and every candidate) is loaded as
    base: str
    source: str
    nodes: list[ClassNode]
    left_out: list[str]
    traffic: Traffic
    goal: Goal
    uncertainty: Uncertainty
    candidates: list[Candidate]
    ranked: list[Candidate]  # refined within the goal's bound, best first
    over: list[Candidate]  # refined over the goal's TTFT p99 bound, not ranked: the least over first
    families: list[Family]
    full: tuple[int, int]  # simulated graphs and runs per point of the refined candidates
    refined_per_family: int
    seconds: float
    # Over MAX_LAYOUTS: the most workers a layout had (the traffic's most requests in flight), and how
    # many layouts the heaviest point's screening shortlisted; None and 0 for a search within it.
    bounded: Optional[int] = None
    shortlisted: int = 0

    @property
    def winner(self) -> Optional[Candidate]:
        return self.ranked[0] if self.ranked else None

    def relative_gap(self, a: Candidate, b: Candidate) -> float:
        """How much worse b is than a on the goal's metric, as a fraction of a."""
        return a.score / b.score - 1 if self.goal.higher_is_better else b.score / a.score - 1

    @property
    def compared(self) -> Envelope:
        """The best two's inputs: outside what the validation covered, no validated error applies to
        their comparison, and it is physics only (never "too close to call" nor "beyond the error")."""
        return functools.reduce(operator.or_, (c.envelope for c in self.ranked[:2]), INSIDE)

    @property
    def close_call(self) -> Optional[tuple[Candidate, float, float]]:
        """The runner-up, its gap and the threshold, when the best two are within the predictor's
        held-out median error of the goal's metric; None outside the envelope (`compared`)."""
        if len(self.ranked) < 2 or self.compared.extrapolated:
            return None
        gap = self.relative_gap(self.ranked[0], self.ranked[1])
        threshold = self.uncertainty.metrics[self.goal.metric].holdout_median
        return (self.ranked[1], gap, threshold) if gap < threshold else None


def _order(goal: Goal):
    """The goal's order; layouts over the p99 bound last, the least over first."""
    return lambda c: (c.over_bound, c.worst_p99_ms if c.over_bound else -c.score if goal.higher_is_better else c.score)


def search(base: Base, stack_name: str, data: ClusterData, traffic: Traffic, goal: Goal, uncertainty: Uncertainty,
           lab: LabParams = LAB, refined_per_family: int = REFINED_PER_FAMILY,
           full: tuple[int, int] = (cells.SIMULATED_GRAPHS, cells.RUNS_PER_GRAPH),
           progress: Callable[[str], None] = lambda message: None, workers: Optional[int] = None) -> Advice:
    """`base`: the base stack, read once; `stack_name`: the name candidates load as; `traffic`:
    checked already (inputs.check_traffic); `full`:
    the simulated graphs and runs per point of a refined candidate (the predictor's own by default);
    `progress`: told what the search does as it starts each stage, and every PROGRESS_S within one
    (a default search takes tens of seconds); `workers`: the processes that simulate (None: one per
    core; the figures are the same for any number)."""
    started = time.monotonic()
    said = [started]

    def tell(message: str, due: bool = True) -> None:
        if due or time.monotonic() - said[0] >= PROGRESS_S:
            said[0] = time.monotonic()
            progress(f"advise: {message} ({said[0] - started:.0f} s)")
    nodes, left_out = candidates.class_nodes(base.config, data)
    if not nodes:
        raise UserError(f"no GPU class of {base.name} has a node to run workers on in {data.source}: "
                        + "; ".join(left_out) + ". Run `dynamo-lab preflight " + base.name + "` against it for "
                        "the fix")
    layouts = candidates.layouts(nodes)
    bounded = None
    if len(layouts) > MAX_LAYOUTS:
        bounded = max(traffic.concurrency)
        layouts = candidates.layouts(nodes, max_workers=bounded)
    classes = gpu_classes(base.doc, base.config, nodes)
    found = [Candidate(layout, candidate_config(base.doc, layout, traffic, classes)) for layout in layouts]
    families: dict[str, Family] = {}
    tell(f"{len(found)} layouts to size and preflight")
    for c in found:
        fam = families.setdefault(c.layout.family, Family(c.layout.family))
        fam.looked_at += 1
        _accept(c, stack_name, data)
        if c.status == REFUSED_CONFIG:
            fam.refused_config.append(c)
        elif c.status == REFUSED_PREFLIGHT:
            fam.refused_preflight.append(c)
        else:
            c.status = SCREENED
    screening = [c for c in found if c.status == SCREENED]
    order = _order(goal)
    shortlisted = 0
    if bounded is not None:
        heavy = heaviest(traffic)
        tell(f"{len(screening)} accepted; screening each with one simulated run at the heaviest point "
             f"({heavy.where(bool(traffic.prefix_tokens))})")
        one = dataclasses.replace(traffic, prefix_types=(heavy.prefix_types,), concurrency=(heavy.concurrency,),
                                  rates=(heavy.rate,) if heavy.rate is not None else ())
        _predict(screening, one, goal, lab, SCREEN_GRAPHS, SCREEN_RUNS, workers,
                 done=lambda n: tell(f"{n} of {len(screening)} layouts screened at that point", due=False))
        for c in screening:
            c.status = SCREENED_HEAVIEST
        screening = [c for fam in families.values()
                     for c in sorted((c for c in screening if c.layout.family == fam.name), key=order)[:SHORTLIST]]
        for c in screening:
            c.status = SCREENED
        shortlisted = len(screening)
        refined_per_family = min(refined_per_family, BOUNDED_REFINED)
    tell(f"{len(screening)} {'shortlisted' if bounded else 'accepted'}; screening each with one simulated run "
         "per point")
    _predict(screening, traffic, goal, lab, SCREEN_GRAPHS, SCREEN_RUNS, workers,
             done=lambda n: tell(f"{n} of {len(screening)} layouts screened", due=False))
    best = []
    for fam in families.values():
        fam.refined = sorted((c for c in screening if c.layout.family == fam.name), key=order)[:refined_per_family]
        best += fam.refined
    tell(f"predicting the best {refined_per_family} of each of {len(families)} families in full ({len(best)} "
         "layouts)")
    for c in best:
        c.status = REFINED
    _predict(best, traffic, goal, lab, *full, workers,
             done=lambda n: tell(f"{n} of {len(best)} predicted in full", due=False))
    for fam in families.values():
        fam.refined.sort(key=order)
    refined = sorted((c for c in found if c.status == REFINED), key=order)
    return Advice(stack_name, base.name, data.source, nodes, left_out, traffic, goal, uncertainty, found,
                  [c for c in refined if not c.over_bound], [c for c in refined if c.over_bound],
                  list(families.values()), full, refined_per_family, time.monotonic() - started, bounded,
                  shortlisted)


def heaviest(traffic: Traffic) -> Point:
    """The point with the most load: the highest rate or most requests in flight, then the most
    prefix types (the most a prefix cache must hold)."""
    return max(traffic.points, key=lambda p: (p.rate or 0, p.concurrency, p.prefix_types))
