"""Search the layouts a cluster allows, keep what the sizing and preflight accept, and rank the rest.

Every candidate is the base stack file with its `workers` replaced (and, for a traffic given on
the command line, its `workload` and `benchmark`: stack_file.py), loaded and sized as `pulumi up` would, then
preflighted against the cluster: a refused candidate keeps the first reason. Accepted ones are
predicted in two passes (docs/advise.md): a screening pass of one simulated run per traffic
point for every candidate, then the predictor's full estimate (as `dynamo-lab predict` makes it)
for the best REFINED_PER_FAMILY of each family; the ranking is over the refined candidates that
meet every objective at every point, by the one verdict's order (verdict.py: those that run only by
preempting last, then by goodput), and those breaking an objective are kept apart, unranked.
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
from dynamo_lab.advise.candidates import AGGREGATED, ClassNode, Layout
from dynamo_lab.advise.inputs import Base, Goal
from dynamo_lab.advise.stack_file import StackDoc, candidate_config, gpu_classes
from dynamo_lab.advise.traffic import Point, Traffic
from dynamo_lab.advise.uncertainty import Uncertainty
from dynamo_lab.advise.verdict import (
    PREEMPTING,
    Compared,
    Separation,
    Standing,
    compare,
    key,
    near_bounds,
    separation,
)
from dynamo_lab.predict import cells, placement, pool
from dynamo_lab.predict.cells import Row, TtftParts, Usage
from dynamo_lab.predict.envelope import INSIDE, Envelope, envelope
from dynamo_lab.predict.objectives import Objective
from dynamo_lab.predict.params import LAB, LabParams
from dynamo_lab.preflight.cluster_data import ClusterData
from dynamo_lab.preflight.run import check
from infra import prefix_cache
from infra.config.schema import StackConfig
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
# A search whose screening at every point would simulate more requests than this (accepted layouts
# x the requests of a warm-up and a measured run at every point) screens in the same two steps,
# bounded or not. The lab's default search (37 accepted, 8 points at concurrency 4 and 8, 8 requests
# per concurrency a run: 28,416 requests) stays within it; at --concurrency 16,32 (113,664) its
# screening took 31 s of a 104 s search's CPU (about 0.3 ms a simulated request; issue 45).
SCREEN_REQUESTS = 50_000
# A family's layouts after its best are predicted in full only where the screening could be wrong
# about them: meeting every objective there, or breaking one by less than SCREEN_OVER x its bound;
# and, where both meet, trailing the best's goodput by less than SCREEN_MARGIN. Measured on the lab's
# default search (2026-12-04): a layout meeting the objectives screened within 3% of its full
# goodput; one breaking them, its worst figure up to 4.4x off (8.0x its bound screened, 1.8x in
# full), so the bound on breaking is loose. The family's best is always predicted in full.
SCREEN_MARGIN = 0.10
SCREEN_OVER = 2.0
# How often a long stage of the search says how far it is (search's `progress`).
PROGRESS_S = 5.0


# --- Evaluation ---------------------------------------------------------------------------------

REFUSED_CONFIG, REFUSED_PREFLIGHT, SCREENED, REFINED = "sizing", "preflight", "screened", "refined"
# A bounded search's layout screened at the heaviest point only, not shortlisted (SHORTLIST).
SCREENED_HEAVIEST = "screened at the heaviest point"


@dataclass(frozen=True)
class Binding:
    # "GPU time-slices" (two or more workers on the GPU; "GPU time" where it has one: a whole GPU,
    # or a time-sliced one with no other worker), "the link", "the same-node KV path",
    # "prefix-cache capacity", "host memory"
    resource: str
    level: float  # 0..1: busy share, missed share of reusable prefix, or share of allocatable requested
    detail: str


@dataclass(frozen=True)
class Broken:
    """One objective a layout breaks: its worst figure over the points, and where."""

    objective: Objective
    worst: float  # ms
    point: int  # index into the traffic's points

    @property
    def over(self) -> float:
        return self.worst / self.objective.bound_ms

    def describe(self, where: str) -> str:
        return (f"{self.objective.label} {self.worst:,.{_digits(self.worst, self.objective.bound_ms)}f} ms at "
                f"{where}, over the {self.objective.bound_ms:,g} ms objective by {self.over - 1:.0%}")


def _digits(value: float, bound: float) -> int:
    """The decimals that show a value over its bound (150.4 ms over 150 is not "150 ms")."""
    return next((d for d in range(3) if round(value, d) > bound), 3)


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
    score: float = math.nan  # the goal's figure, geometric mean over the traffic's points
    broken: list[Broken] = field(default_factory=list)  # each objective it breaks at some point
    gpus: int = 0  # the GPUs its workers take (time-sliced: the GPUs they share)
    output_tokens: int = 0  # per request, for goodput per GPU
    binding: Optional[Binding] = None
    envelopes: list[Envelope] = field(default_factory=list)  # each point's (predict/envelope.py)
    runs: int = 0  # simulated measured runs per point (the rows' preemptions are summed over them)

    @property
    def envelope(self) -> Envelope:
        """Every point's inputs: what any of them has outside what the validation covered."""
        return functools.reduce(operator.or_, self.envelopes, INSIDE)

    def value(self, row: Row, metric: str) -> Optional[float]:
        """A row's figure by name: a Row field, or goodput per GPU (output tokens/s that met every
        objective, over the GPUs the layout takes). Goodput without objectives is 0; ITL and TPOT
        without a gap between tokens (one output token a request) None."""
        if metric == "goodput_tokens_per_s_per_gpu":
            return (row.goodput_requests_per_s or 0.0) * self.output_tokens / max(self.gpus, 1)
        value = getattr(row, metric)
        return 0.0 if value is None and metric == "goodput_requests_per_s" else value

    def mean(self, metric: str) -> Optional[float]:
        """The geometric mean over the points; None where a point has no such figure."""
        values = [self.value(r, metric) for r in self.rows]
        return None if None in values else geomean(values)

    @property
    def meets(self) -> bool:
        """Every objective at every point."""
        return not self.broken

    @property
    def worst_over(self) -> float:
        """Its worst objective's figure over the bound (0 where it meets every one)."""
        return max((b.over for b in self.broken), default=0.0)

    @property
    def preemptions(self) -> int:
        """Its requests preempted over the simulated runs of every point: where its KV did not fit."""
        return sum(r.preemptions for r in self.rows)

    @property
    def preempting(self) -> bool:
        """It runs only by preempting: at some point vLLM preempted more than verdict.PREEMPTING of
        its measured requests."""
        return any(r.requests and r.preemptions > PREEMPTING * r.requests for r in self.rows)

    def standing(self, where: Callable[[int], str], objectives: tuple[Objective, ...] = (),
                 errors: Optional[dict[str, float]] = None, metric: str = "goodput_requests_per_s") -> Standing:
        """What the one verdict (verdict.py) compares; `where` names a point by its index; `objectives`
        and the predictor's `errors` by figure (Uncertainty.errors) say which bounds its worst figures
        are within that error of (verdict.near_bounds); `metric`: the goal's figure (its score), whose
        ceiling is what it would be were every request to meet every objective."""
        worst = [(o, max(vs)) for o in objectives if (vs := [v for r in self.rows if (v := o.value(r)) is not None])]
        near, beyond = near_bounds(worst, errors or {})
        ceiling = self.mean("requests_per_s") if self.rows else None
        if ceiling is not None and metric == "goodput_tokens_per_s_per_gpu":
            ceiling *= self.output_tokens / max(self.gpus, 1)
        return Standing(self.layout.label, self.meets, self.preempting, self.worst_over, self.score,
                        tuple(b.describe(where(b.point)) for b in self.broken), near, beyond, ceiling)

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
    simulated on `workers` processes (pool.py: the figures do not depend on it); `done` is told, as
    cells finish, how many candidates' worth of cells are done (largest cells first: pool.simulate)."""
    points = traffic.points
    jobs = [pool.Job(c.stack.config, c.stack.sizing, pt.prefix_types, pt.concurrency, lab, graphs, runs, pt.rate,
                     objectives=goal.objectives)
            for c in found for pt in points]
    results = pool.simulate(jobs, workers, done=lambda n: done(n // len(points)) if n % len(points) == 0 else None)
    for k, c in enumerate(found):
        mine = results[k * len(points):(k + 1) * len(points)]
        c.rows, c.usage = [row for row, _ in mine], [usage for _, usage in mine]
        c.envelopes = [envelope(c.stack.resolved, pt.prefix_types, pt.concurrency, rate=pt.rate) for pt in points]
        c.runs = graphs * runs
        c.gpus = gpus(c.stack)
        c.output_tokens = traffic.output_tokens
        c.score = c.mean(goal.metric)
        c.broken = broken(c.rows, goal.objectives)
        c.binding = binding(c, traffic)


def gpus(stack: Stack) -> int:
    """The GPUs a layout's workers take: each GPU its simulated workers run on, once, with its
    tensor-parallel ranks (time-sliced workers sharing one GPU take it once)."""
    return sum(ranks for ranks in {s.gpu: s.card.ranks for s in placement.workers(stack.config, stack.sizing)}.values())


def broken(rows: list[Row], objectives: tuple[Objective, ...]) -> list[Broken]:
    """Each objective some point's figure is over, with its worst point."""
    out = []
    for o in objectives:
        # A point without the figure (no gap between tokens) has nothing to bound.
        worst, i = max(((v, i) for i, r in enumerate(rows) if (v := o.value(r)) is not None), default=(0.0, 0))
        if worst > o.bound_ms:
            out.append(Broken(o, worst, i))
    return out


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
        # The simulation names a class's one GPU by the class ("gpu-24gb's GPU"), any other by itself
        # ("gpu-24gb[2] GPU 0"), which needs no "'s GPU" after it.
        gpu_words = f"{gpu[1]}'s GPU" if gpu[1] in c.stack.config.gpu_classes else gpu[1]
        if c.stack.config.gpu_classes[cls].sharing == "whole" or workers == 1:
            # One worker on it (a whole GPU, or a time-sliced one whose other slices stay idle):
            # nothing is time-sliced, the worker's own steps fill it.
            options.append(Binding("GPU time", gpu[0], f"{gpu_words} busy {gpu[0]:.0%} of the run, its one worker's "
                                   f"({where[gpu[2]]})"))
        else:
            options.append(Binding("GPU time-slices", gpu[0], f"{gpu_words} busy {gpu[0]:.0%} of the run, shared "
                                   f"by {workers} workers ({where[gpu[2]]})"))
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
    ranked: list[Candidate]  # refined, meeting every objective at every point, best first
    over: list[Candidate]  # refined, breaking some objective, not ranked: the least over first
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
        """The first ranked: what --write writes (a recommendation only as `recommended` says)."""
        return self.ranked[0] if self.ranked else None

    @property
    def recommended(self) -> Optional[Candidate]:
        """The winner where it is a recommendation: it runs without preempting (the verdict ranks one that
        preempts after every one that does not, so here none meeting the objectives does) and leads the
        runner-up beyond the uncertainty (no `close_call`)."""
        w = self.winner
        return w if w is not None and not w.preempting and self.close_call is None else None

    @property
    def first_is(self) -> str:
        """What the winner is, in words, for what --write says and writes."""
        if self.winner is None:
            return "none: no layout predicted in full meets every objective at every point"
        if self.winner.preempting:
            return ("the first, not a recommendation: it runs only by preempting (its KV does not fit the load), as "
                    "every layout meeting the objectives does")
        close = self.close_call
        if close is not None:
            return f"the first of a tie within the uncertainty with {close.worse.label}, not a recommendation"
        return "the recommendation"

    def where(self, point: int) -> str:
        """A traffic point by its index, in words."""
        return self.traffic.points[point].where(bool(self.traffic.prefix_tokens))

    @property
    def threshold(self) -> float:
        """The uncertainty a lead must pass: the predictor's held-out median error of requests/s (what
        goodput counts; no layout's goodput was measured). Outside the envelope it is a floor: the
        error there was never measured, and is no smaller."""
        return self.uncertainty.metrics["requests_per_s"].holdout_median

    def standing(self, c: Candidate) -> Standing:
        return c.standing(self.where, self.goal.objectives, self.uncertainty.errors, self.goal.metric)

    def compare(self, a: Candidate, b: Candidate) -> Compared:
        return compare(self.standing(a), self.standing(b), self.threshold, self.goal.label)

    @property
    def compared(self) -> Envelope:
        """The best two's inputs: outside what the validation covered, their comparison is physics only."""
        return functools.reduce(operator.or_, (c.envelope for c in self.ranked[:2]), INSIDE)

    @property
    def close_call(self) -> Optional[Compared]:
        """The best two, when they tie within the uncertainty (verdict.compare); None when the best
        leads beyond it or stands alone."""
        if len(self.ranked) < 2:
            return None
        c = self.compare(self.ranked[0], self.ranked[1])
        return None if c.decisive else c

    @property
    def tied(self) -> list[Candidate]:
        """The ranked layouts after the first that tie with it within the uncertainty (verdict.compare),
        in rank order: the first ranked decisively behind it ends them (the order is the verdict's)."""
        if not self.ranked:
            return []
        out = []
        for c in self.ranked[1:]:
            if self.compare(self.ranked[0], c).decisive:
                break
            out.append(c)
        return out

    @property
    def unmet(self) -> list[tuple[Objective, Candidate, Broken]]:
        """Each objective no layout predicted in full meets at every point, with the nearest layout
        and its worst figure."""
        out = []
        refined = self.ranked + self.over
        for o in self.goal.objectives:
            misses = [(b, c) for c in refined for b in c.broken if b.objective == o]
            if refined and len(misses) == len(refined):
                b, c = min(misses, key=lambda bc: bc[0].worst)
                out.append((o, c, b))
        return out

    @property
    def separation(self) -> Separation:
        """Whether separation pays on this cluster and traffic: the best aggregated against the best
        separated layout predicted in full (verdict.separation: the ranking's own comparison)."""
        refined = sorted(self.ranked + self.over, key=lambda c: key(self.standing(c)))
        agg = next((c for c in refined if c.layout.kind == AGGREGATED), None)
        sep = next((c for c in refined if c.layout.kind != AGGREGATED), None)
        return separation(agg and self.standing(agg), sep and self.standing(sep), self.threshold, self.goal.label)

    def candidate(self, label: str) -> Candidate:
        return next(c for c in self.candidates if c.layout.label == label)


def _order(a: Callable[[int], str]):
    """The ranking's order (verdict.key)."""
    return lambda c: key(c.standing(a))


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
    order = _order(lambda i: traffic.points[i].where(bool(traffic.prefix_tokens)))
    shortlisted = 0
    if bounded is not None or len(screening) * screen_requests(traffic, base.config) > SCREEN_REQUESTS:
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
        if bounded is not None:
            refined_per_family = min(refined_per_family, BOUNDED_REFINED)
    tell(f"{len(screening)} {'shortlisted' if shortlisted else 'accepted'}; screening each with one simulated run "
         "per point")
    _predict(screening, traffic, goal, lab, SCREEN_GRAPHS, SCREEN_RUNS, workers,
             done=lambda n: tell(f"{n} of {len(screening)} layouts screened", due=False))
    best = []
    for fam in families.values():
        ordered = sorted((c for c in screening if c.layout.family == fam.name), key=order)
        fam.refined = ordered[:1] + [c for c in ordered[1:refined_per_family] if worth_refining(ordered[0], c)]
        best += fam.refined
    tell(f"predicting the best {refined_per_family} of each of {len(families)} families in full where the "
         f"screening could be wrong ({len(best)} layouts)")
    for c in best:
        c.status = REFINED
    _predict(best, traffic, goal, lab, *full, workers,
             done=lambda n: tell(f"{n} of {len(best)} predicted in full", due=False))
    for fam in families.values():
        fam.refined.sort(key=order)
    refined = sorted((c for c in found if c.status == REFINED), key=order)
    return Advice(stack_name, base.name, data.source, nodes, left_out, traffic, goal, uncertainty, found,
                  [c for c in refined if c.meets], [c for c in refined if not c.meets],
                  list(families.values()), full, refined_per_family, time.monotonic() - started, bounded,
                  shortlisted)


def screen_requests(traffic: Traffic, cfg: StackConfig) -> int:
    """The requests one layout's screening simulates: a warm-up and a measured run at every point."""
    return SCREEN_GRAPHS * (1 + SCREEN_RUNS) * sum(cells.run_requests(cfg, pt.concurrency, pt.rate)
                                                   for pt in traffic.points)


def worth_refining(first: Candidate, other: Candidate) -> bool:
    """Whether a family's `other` layout could yet rank above its screened best, `first`, so it is
    predicted in full (SCREEN_MARGIN, SCREEN_OVER)."""
    if not (other.meets or other.worst_over < SCREEN_OVER):
        return False
    return not (first.meets and other.meets) or other.score * (1 + SCREEN_MARGIN) >= first.score


def heaviest(traffic: Traffic) -> Point:
    """The point with the most load: the highest rate or most requests in flight, then the most
    prefix types (the most a prefix cache must hold)."""
    return max(traffic.points, key=lambda p: (p.rate or 0, p.concurrency, p.prefix_types))
