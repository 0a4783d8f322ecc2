"""The advice in words (and as JSON): every figure is the predictor's, and says so."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from typing import Any, Optional

from dynamo_lab.advise import search
from dynamo_lab.advise.candidates import AGGREGATED, MAX_REPLICAS_PER_CLASS, ClassNode
from dynamo_lab.advise.search import (
    REFINED,
    REFUSED_CONFIG,
    REFUSED_PREFLIGHT,
    SCREENED,
    SCREENED_HEAVIEST,
    Advice,
    Candidate,
    Family,
    kv_overflow,
)
from dynamo_lab.advise.traffic import Point
from dynamo_lab.advise.verdict import PREEMPTING, Compared, Separation, listed, percent
from dynamo_lab.predict.cells import OPEN_LOOP_REQUESTS
from dynamo_lab.predict.envelope import outside_lines
from dynamo_lab.predict.text import DECODE_NOTE, decode_ms
from dynamo_lab.sizing_text import text_table

ESTIMATE = ("ESTIMATES, not measurements: every figure here is the predictor's, a simulation of the serving graph "
            "whose constants were fitted to one lab's published table (two GPUs on 1GbE; docs/predictor.md). "
            "Measure the layout you deploy (docs/benchmark.md).")
# The metrics the validation measures an error of (uncertainty.METRICS), as the error lines name them.
LABELS = {"ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99", "requests_per_s": "requests/s"}


def _traffic(a: Advice) -> str:
    w = a.traffic
    points = len(w.points)
    concurrency = (f"open loop at {', '.join(f'{r:g}' for r in w.rates)} requests/s (Poisson arrivals; sized for "
                   f"concurrency {max(w.concurrency)})" if w.open_loop
                   else f"concurrency {', '.join(map(str, w.concurrency))}")
    if w.prefix_tokens:
        shape = (f"{w.prefix_tokens:,} shared prefix, {w.input_tokens - w.prefix_tokens:,} unique), "
                 f"{w.output_tokens:,} output tokens; prefix types {', '.join(map(str, w.prefix_types))} x "
                 f"{concurrency}")
    else:
        shape = (f"no shared prefix), {w.output_tokens:,} output tokens; {concurrency} (with no shared prefix "
                 f"the prefix types, {', '.join(map(str, w.prefix_types))}, are one workload: one point per "
                 f"{'rate' if w.open_loop else 'concurrency'})")
    return (f"{w.input_tokens:,} input tokens ({shape}: {points} point{'s' * (points > 1)} "
            f"({'given' if w.given else f'the benchmark section of {a.base}'})")


# Where a request has one output token: no gap between tokens, so no ITL or TPOT.
NO_GAPS = "no ITL or TPOT (one output token a request: no gap between tokens)"


def _figures(a: Advice, c: Candidate) -> str:
    per_gpu = c.mean("goodput_tokens_per_s_per_gpu")
    decode = (f"ITL p50 {decode_ms(c.mean('itl_p50_ms'))} ms, p99 {decode_ms(c.mean('itl_p99_ms'))} ms, TPOT p50 "
              f"{decode_ms(c.mean('tpot_p50_ms'))} ms" if c.mean("itl_p50_ms") is not None else NO_GAPS)
    return (f"goodput {c.mean('goodput_requests_per_s'):.1f} requests/s ({per_gpu:,.0f} output tokens/s per GPU, "
            f"{c.gpus} GPU{'s' * (c.gpus > 1)}) of {c.mean('requests_per_s'):.1f} completed, TTFT p50 "
            f"{c.mean('ttft_p50_ms'):,.0f} ms, p99 {c.mean('ttft_p99_ms'):,.0f} ms, {decode}")


# Below this share no resource is said to bind: the layout's own latency (transfers, steps) sets it.
NEAR_LIMIT = 0.5


def _binds(c: Candidate) -> str:
    return c.binding.resource if c.binding.level >= NEAR_LIMIT else f"none over {NEAR_LIMIT:.0%}"


def _overflow(a: Advice, c: Candidate) -> Optional[str]:
    o = kv_overflow(c)
    if o is None:
        return None
    where = a.traffic.points[o.point].where(bool(a.traffic.prefix_tokens))
    held = (f"its requests held all {o.cache_blocks:,} blocks of its pool" if o.kv_blocks_peak >= o.cache_blocks
            else f"its requests held at most {o.kv_blocks_peak:,} of its {o.cache_blocks:,} blocks at once, and a "
            "running request's next blocks were more than were free")
    return (f"its KV does not always fit: {o.preemptions:,} preemption{'s' * (o.preemptions > 1)} over {o.runs} "
            f"simulated run{'s' * (o.runs > 1)} per point, the most on {o.worker} ({where}: {held}; vLLM freed the "
            "last-admitted request's blocks and recomputes it from its first token, and the figures include that)")


def _behind(a: Advice, c: Candidate) -> list:
    """Open loop: the (point, row) pairs where it completes requests slower than they arrive
    (cells.Row.keeps_up); none in a closed loop."""
    return [(pt, r) for pt, r in zip(a.traffic.points, c.rows, strict=True) if r.keeps_up is False]


def _falls_behind(a: Advice, c: Candidate) -> Optional[str]:
    """Where it falls behind (_behind): its backlog grows for as long as the load lasts, so its
    figures there are the run's, not a steady state's."""
    behind = _behind(a, c)
    if not behind:
        return None
    prefix = bool(a.traffic.prefix_tokens)
    return ("it falls behind the arrivals (" + "; ".join(f"at {pt.where(prefix)} it completes "
                                                        f"{r.completion_ratio:.0%} of them" for pt, r in behind)
            + f"): its backlog grows for as long as the load lasts, so its TTFT and requests/s there are those of "
            f"a run of {OPEN_LOOP_REQUESTS} arrivals, not a steady state")


def _winner_behind(a: Advice) -> str:
    """The recommendation falls behind somewhere: say where, and which ranked layout keeps up at every
    point, if one does (it ranks lower on the goal, as its TTFT elsewhere is higher)."""
    behind = [pt.where(bool(a.traffic.prefix_tokens)) for pt, _ in _behind(a, a.winner)]
    keeping = [(i, c) for i, c in enumerate(a.ranked) if not _behind(a, c)]
    other = (f"{keeping[0][1].layout.label} (rank {keeping[0][0] + 1}) keeps up at every point" if keeping else
             "none of the layouts ranked keeps up at every point: lower the --rate, or add GPUs")
    first = "The recommendation" if a.recommended else "The first"
    return f"{first} falls behind the arrivals at {'; '.join(behind)}; {other}."


def _why(c: Candidate, winner: Optional[Candidate], a: Advice) -> str:
    """What its time goes to and what binds it, against the winner's; whether its KV fits and, in
    an open loop, whether it keeps up."""
    parts = c.ttft_parts_ms
    total = parts.total
    said = [s for s in (_falls_behind(a, c), _overflow(a, c)) if s]
    if c.preempting:
        said.insert(0, f"it runs only by preempting (more than {PREEMPTING:.0%} of its requests at some point), so "
                    "it ranks after every layout that meets the objectives without")
    if parts.transfer > 0.25 * total:
        said.append(f"its first tokens wait for a KV transfer ({parts.transfer:,.0f} ms of a mean "
                    f"{total:,.0f} ms TTFT)" + (", which aggregated workers never make"
                                                  if winner and winner.layout.kind == AGGREGATED else ""))
    if c.binding.level < NEAR_LIMIT:
        said.append(f"nothing is near its limit (the most used: {c.binding.resource}, {c.binding.detail})")
    else:
        said.append(f"binds: {c.binding.resource}, {c.binding.detail}")
    return "; ".join(said)


# What ends with a full stop and a space inside a sentence.
ABBREVIATIONS = ("e.g", "i.e")


def _sentence(reason: str) -> str:
    """A refusal's first sentence, whole, and " ..." where more follows (the JSON output has it all).
    It ends at the first full stop and space outside parentheses and double quotes (the sizing
    quotes vLLM's own words) that is not an abbreviation's."""
    depth, quoted = 0, False
    for i, ch in enumerate(reason):
        if ch == '"':
            quoted = not quoted
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif (ch == "." and reason[i + 1:i + 2] == " " and not depth and not quoted
              and not reason[:i].endswith(ABBREVIATIONS)):
            return reason[:i] + " ..."
    return reason


def _gap(a: Advice, better: Candidate, worse: Candidate) -> str:
    metric = a.goal.label
    if worse.score <= 0:
        return f"no {metric}: none of its requests meets every objective"
    ratio = better.score / worse.score
    first = "the recommendation's" if a.recommended is better else "the first's"
    return f"{metric} {percent(1 - 1 / ratio)} lower than {first}" if ratio < 2 else (
        f"{metric} 1/{ratio:.1f} of {first}")


def base_setting(fam: Family) -> Optional[str]:
    """The one key outside the layout (not `workers`, not `gpuClasses`) that refused every layout of
    a family, if it was one: a setting of the base stack, such as the probe on an aggregated graph."""
    if fam.best is not None or fam.refused_preflight or not fam.refused_config:
        return None
    keys = {c.reason.split(":", 1)[0] for c in fam.refused_config}
    key = keys.pop() if len(keys) == 1 else None
    return key if key and not key.startswith(("workers.", "gpuClasses")) else None


def _family(a: Advice, fam: Family) -> str:
    refused = []
    for what, group in (("the sizing", fam.refused_config), ("preflight", fam.refused_preflight)):
        if group:
            first = group[0]
            refused.append(f"{len(group)} refused by {what} (e.g. {first.layout.label}: {_sentence(first.reason)})")
    head = f"{fam.name}: {fam.looked_at} looked at" + (f", {'; '.join(refused)}" if refused else "")
    best = fam.best
    if best is None:
        setting = base_setting(fam)
        because = (f" All for the base stack's `{setting}`, not their workers: advise from a base without it to "
                   "compare this family" if setting else "")
        return f"{head}. Dropped: none of its layouts passes the sizing and preflight.{because}"
    winner = a.winner
    if not best.meets:
        verdict = "dropped, not ranked: it breaks " + "; ".join(b.describe(a.where(b.point)) for b in best.broken)
    elif best is winner:
        verdict = ("kept: the recommendation" if best is a.recommended else "kept: first of the tie"
                   if a.close_call is not None and not best.preempting else "kept: first, not recommended")
    else:
        fate = "kept, tied with the first within the uncertainty" if best in a.tied else "dropped"
        verdict = f"{fate} (rank {a.ranked.index(best) + 1}): {_gap(a, winner, best)}"
    return (f"{head}. Best: {best.layout.label} ({_figures(a, best)}); {verdict}. Why: "
            f"{_why(best, winner, a)}.")


def _uncertainty(a: Advice) -> list[str]:
    lines = ["The predictor's error against the lab's table (`predict --validate`: fitted to its concurrency-4 "
             "cells, concurrency 8 held out), |predicted - published| / published:"]
    for metric, e in a.uncertainty.metrics.items():
        lines.append(f"  {LABELS[metric]}: fitted median {e.fit_median:.0%} (worst {e.fit_worst:.0%}); held out "
                     f"median {e.holdout_median:.0%} (worst {e.holdout_worst:.0%})")
    lines.append(f"  Goodput has no measured error of its own: a lead counts only beyond requests/s's held-out median, "
                 f"{a.threshold:.0%} (docs/advise.md, How it ranks). ITL, TPOT and E2E were never measured.")
    return lines


def _class(n: ClassNode) -> str:
    """A searched class as the cluster has it: the lab's one node, or its nodes and their GPUs."""
    if n.nodes == 1 and n.sharing == "timeSliced":
        return f"{n.gpu_class} on node {n.node} ({n.units} GPU units)"
    what = f"{n.units} GPU units" if n.sharing == "timeSliced" else f"{n.gpus_per_node} whole GPUs"
    return f"{n.gpu_class} on {n.nodes} node{'s' * (n.nodes > 1)} {n.node} ({what} each)"


def _bound(n: ClassNode) -> str:
    """The replicas searched on a class: per node, and TP sizes on whole GPUs."""
    if n.nodes == 1 and n.tensor_parallel == (1,):
        return f"{n.gpu_class} 1-{n.searched}"
    tp = f", tensorParallel {'/'.join(map(str, n.tensor_parallel))}" if n.tensor_parallel != (1,) else ""
    return f"{n.gpu_class} 1-{n.searched} a node on {n.nodes} node{'s' * (n.nodes > 1)}{tp}"


def text(a: Advice, top: int = 3) -> str:
    counts = {s: sum(c.status == s for c in a.candidates) for s in (REFUSED_CONFIG, REFUSED_PREFLIGHT)}
    accepted = len(a.candidates) - sum(counts.values())
    bounds = ", ".join(_bound(n) for n in a.nodes)
    runs = a.full[0] * a.full[1]
    lines = [ESTIMATE, "",
             f"Cluster: {a.source}: " + ", ".join(_class(n) for n in a.nodes)]
    lines += [f"  left out: {why}" for why in a.left_out]
    lines += [f"Workload: {_traffic(a)}",
              f"Goal: {a.goal.describe()}" + (f" (geometric mean over the {len(a.traffic.points)} points)"
                                               if len(a.traffic.points) > 1 else ""),
              f"Searched {len(a.candidates)} layouts as stack {a.stack} ({len(a.families)} families, each a line "
              f"below; replicas per class: {bounds}, "
              f"the GPU units its node advertises, at most {MAX_REPLICAS_PER_CLASS}"
              + (f"; over {search.MAX_LAYOUTS} layouts, so at most {a.bounded} workers, the most requests in flight"
                 if a.bounded else "") + f"): {counts[REFUSED_CONFIG]} refused "
              f"by the sizing, {counts[REFUSED_PREFLIGHT]} by preflight; {accepted} screened with one simulated run "
              + (f"at the heaviest point ({search.heaviest(a.traffic).where(bool(a.traffic.prefix_tokens))}), the best "
                 f"{search.SHORTLIST} of each family ({a.shortlisted}) " if a.shortlisted else "")
              + f"per point, and the best {a.refined_per_family} of each family predicted in full where the "
              f"screening could be wrong ({runs} run{'s' * (runs > 1)} per point): {len(a.ranked) + len(a.over)}.", ""]
    # No wall time here: stdout is the answer, the same on any machine (docs/advise.md's sample is
    # this text); the progress on stderr says how long each stage took, and --json has `seconds`.
    if not a.ranked and not a.over:
        lines.append("No layout passes the sizing and preflight on this cluster: the families below say why.")
    else:
        if a.ranked:
            shown = a.ranked[:top]
            lines += [f"Top {len(shown)} meeting every objective, estimates"
                      f"{' (geometric means over the points)' if len(a.traffic.points) > 1 else ''}:",
                      *_table(a, shown, rank=True), ""]
            if len(a.traffic.points) > 1:
                lines += _by_point(a, shown)
        if a.over:
            lines += [_over_bound(a, top), ""]
        lines += _unmet(a)
        lines.append(_verdict(a))
        if a.winner is not None and _behind(a, a.winner):
            lines.append(_winner_behind(a))
        if (said := _separation(a)) is not None:
            lines.append(said)
        for fam in a.families:
            if (setting := base_setting(fam)) is not None:
                lines.append(f"Not compared: {fam.name}: every layout of it is refused by {a.base}'s `{setting}`, "
                             "a setting of the base stack, not of the layout.")
    lines += [""] + _uncertainty(a) + ["", "Families, each by its best layout:"]
    lines += [f"- {_family(a, fam)}" for fam in a.families]
    return "\n".join(lines)


def _table(a: Advice, shown: list[Candidate], rank: bool) -> list[str]:
    """The shown layouts' figures: TTFT, the decode side, requests/s and goodput; what binds each,
    and where some shown layout preempts or is outside the envelope, a column for that."""
    per_gpu = a.goal.name == "goodput-per-gpu"
    head = ["rank" if rank else "#", "layout", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms",
            "TPOT p50 ms", "E2E p99 ms", "req/s", "goodput/s", "tok/s/GPU", "binds"]
    body = [[str(i + 1), c.layout.label, f"{c.mean('ttft_p50_ms'):,.0f}", f"{c.mean('ttft_p99_ms'):,.0f}",
             decode_ms(c.mean("itl_p50_ms")), decode_ms(c.mean("itl_p99_ms")), decode_ms(c.mean("tpot_p50_ms")),
             f"{c.mean('e2e_p99_ms'):,.0f}", f"{c.mean('requests_per_s'):.1f}",
             f"{c.mean('goodput_requests_per_s'):.1f}", f"{c.mean('goodput_tokens_per_s_per_gpu'):,.0f}",
             _binds(c)] for i, c in enumerate(shown)]
    if per_gpu:  # the goal's figure first of the two
        for row in [head, *body]:
            row[9], row[10] = row[10], row[9]
    outside = outside_lines([(f"{'rank' if rank else '#'} {i + 1}", c.envelope) for i, c in enumerate(shown)],
                            every="each")
    if any(c.preemptions for c in shown):  # the column only where some KV does not fit
        head.append("preempted")
        for row, c in zip(body, shown, strict=True):
            row.append(f"{c.preemptions:,}" + (" (only runs so)" if c.preempting else ""))
    if outside:  # the column only where some figure is outside: inside, the table is as it was
        head.append("envelope")
        for row, c in zip(body, shown, strict=True):
            row.append("outside" if c.envelope.extrapolated else "inside")
    return [text_table(head, body), *outside, DECODE_NOTE]


def _over_bound(a: Advice, top: int) -> str:
    """The layouts predicted in full that break an objective: apart from the ranking, each with what
    it breaks and by how much."""
    over = a.over
    listed = "; ".join(f"{c.layout.label} ({', '.join(b.describe(a.where(b.point)) for b in c.broken)}"
                       + ("; runs only by preempting)" if c.preempting else ")") for c in over[:top])
    more = f"; and {len(over) - top} more (--json lists them)" if len(over) > top else ""
    order = ("the least over first, those running only by preempting after the rest" if any(c.preempting for c in over)
             else "the least over first")
    return (f"Breaking an objective, not ranked: {len(over)} of the {len(a.ranked) + len(over)} predicted in full, "
            f"{order}: {listed}{more}.")


def _unmet(a: Advice) -> list[str]:
    """Each objective no layout meets, said once, with the nearest layout."""
    return [f"No layout meets {o.describe()} at every point: the nearest, {c.layout.label}, reaches "
            f"{b.worst:,.1f} ms at {a.where(b.point)}. To rank by the others, raise it ({o.flag} MS) or lower the "
            f"{'--rate' if a.traffic.open_loop else 'concurrency'}." for o, c, b in a.unmet]


def _by_point(a: Advice, shown: list[Candidate]) -> list[str]:
    """The goal's figure and ITL p99 of each shown layout at each point (prefix types x concurrency,
    or with no shared prefix concurrency alone)."""
    prefix = bool(a.traffic.prefix_tokens)
    head = ["rank", "figure"] + [pt.label(prefix) for pt in a.traffic.points]
    per_gpu = a.goal.name == "goodput-per-gpu"
    body = []
    for i, c in enumerate(shown):
        body.append([str(i + 1), f"{a.goal.label}, {'tok/s/GPU' if per_gpu else 'req/s'}"]
                    + [f"{c.value(r, a.goal.metric):,.{0 if per_gpu else 1}f}" for r in c.rows])
        body.append(["", "ITL p99 ms"] + [decode_ms(r.itl_p99_ms) for r in c.rows])
    load = "requests/s arriving" if a.traffic.open_loop else "concurrency"
    what = f"prefix types x {load}" if prefix else f"{load}; no shared prefix"
    return [f"At each point ({what}), estimates:", text_table(head, body), ""]


def _tie(a: Advice, close: Compared) -> str:
    """What measurement would separate two layouts that tie: the point where their goal's figure
    differs most, and the path or GPU that binds one and not the other."""
    first, second = a.candidate(close.better.label), a.candidate(close.worse.label)
    metric = a.goal.metric
    i = max(range(len(first.rows)), key=lambda k: abs(first.value(first.rows[k], metric)
                                                      - second.value(second.rows[k], metric)))
    measure = (f"benchmark both at {a.where(i)}, where their {a.goal.label} differs most "
               f"({first.value(first.rows[i], metric):,.1f} against {second.value(second.rows[i], metric):,.1f}), "
               "and compare requests/s, TTFT p99 and ITL p99 (docs/benchmark.md)")
    paths = {c.binding.resource for c in (first, second) if c.binding.resource in ("the link", "the same-node KV path")}
    if paths or (first.layout.kind == AGGREGATED) != (second.layout.kind == AGGREGATED):
        measure += ("; and probe the KV path the separated one moves its KV over (`dynamo-lab probe`, into "
                    "sizing.measured), whose rate sets its TTFT")
    return measure


def _verdict(a: Advice) -> str:
    w = a.winner
    if w is None:
        bounds = "; ".join(o.describe() for o in a.goal.objectives)
        load = "--rate" if a.traffic.open_loop else "concurrency"
        return (f"No recommendation: no layout predicted in full meets every objective ({bounds}) at every point. "
                f"Raise the bound it breaks, or lower the {load}.")
    physics = a.compared.extrapolated
    floor = (f" Outside what the validation covered ({'; '.join(a.compared.outside)}), no validated error applies: "
             "that error is a floor, the real one is unknown." if physics else "")
    near = a.standing(w).near  # objectives it meets only within the predictor's error of their bounds
    if near:
        floor += f" It meets {'; '.join(near)}: measure it before relying on it."
    if w.preempting:
        load = "--rate" if a.traffic.open_loop else "concurrency"
        return (f"First, not recommended: {w.layout.label}: {_figures(a, w)}. It runs only by preempting, as every "
                f"layout meeting the objectives does (more than {PREEMPTING:.0%} of its requests at some point): its "
                "KV does not fit the load, and its figures rest on requests recomputed from their first token. Lower "
                f"the {load}, or run it on GPUs with more memory (--write writes it).{floor} Why: {_why(w, None, a)}.")
    close = a.close_call
    if close:
        more = a.tied[1:]
        also = (f" So {'is' if len(more) == 1 else 'are'} {listed([c.layout.label for c in more])}, within it of "
                f"{w.layout.label} too." if more else "")
        return (f"Tied within the uncertainty: {w.layout.label} and {close.worse.label} are {close.why}.{also} No "
                f"recommendation between them (--write writes the first). To separate them, {_tie(a, close)}.{floor}")
    runner = a.ranked[1] if len(a.ranked) > 1 else None
    lead = f", ahead of the runner-up ({runner.layout.label}): {a.compare(w, runner).why}" if runner else ""
    kind = "an estimate, physics only" if physics else "an estimate"
    return f"Recommended ({kind}): {w.layout.label}: {_figures(a, w)}{lead}.{floor} Why: {_why(w, None, a)}."


ANSWERS = {"pays": "It pays here", "does not pay": "It does not pay here",
           "ties": "They tie here, within the uncertainty",
           "neither meets": "Neither kind meets every objective here"}


def _separation(a: Advice) -> Optional[str]:
    """Whether separating prefill and decode pays on this cluster and traffic: the ranking's own
    comparison of the best aggregated and the best separated layout (verdict.py)."""
    sep: Separation = a.separation
    if sep.compared is None:
        return None

    def side(label: str) -> str:
        c = a.candidate(label)
        itl = c.mean("itl_p99_ms")
        decode = f"ITL p99 {decode_ms(itl)} ms" if itl is not None else "no ITL"
        return f"{label} (TTFT p99 {c.mean('ttft_p99_ms'):,.0f} ms, {decode}, {a.goal.label} {c.score:,.1f})"
    return (f"Does separating prefill and decode pay? {ANSWERS[sep.answer]}: best aggregated "
            f"{side(sep.aggregated.label)}, best separated {side(sep.separated.label)}: {sep.compared.why}.")


FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms",
           "e2e_p99_ms", "requests_per_s", "output_tokens_per_s", "goodput_requests_per_s",
           "goodput_tokens_per_s_per_gpu")


# How closely a candidate's figures were simulated, by its status (search.py).
PRECISION = {SCREENED: "screening", SCREENED_HEAVIEST: "screening at the heaviest point", REFINED: "full"}


def _candidate(a: Advice, c: Candidate) -> dict[str, Any]:
    out: dict[str, Any] = {"layout": c.layout.label, "family": c.layout.family, "workers": c.layout.workers(),
                           "status": c.status}
    if c.reason:
        out["reason"] = c.reason
    if c.rows:
        # Each row's index among the workload's points: a layout screened at the heaviest point alone
        # has one row, there.
        at = [a.traffic.points.index(Point(r.prefix_types, r.concurrency, r.rate)) for r in c.rows]
        out.update({"estimate": True, "precision": PRECISION[c.status],
                    "score": c.score, "meets_objectives": c.meets, "gpus": c.gpus,
                    "breaks": [{"objective": b.objective.label, "bound_ms": b.objective.bound_ms, "worst_ms": b.worst,
                                "over": b.over, "point": at[b.point]} for b in c.broken],
                    "means": {m: c.mean(m) for m in FIGURES},
                    "preemptions": c.preemptions, "preempting": c.preempting,
                    "kv_overflow": None if kv_overflow(c) is None else asdict(kv_overflow(c)),
                    "points": [{"point": i, **asdict(r), "preemptions": r.preemptions,
                                "goodput_tokens_per_s_per_gpu": c.value(r, "goodput_tokens_per_s_per_gpu"),
                                "keeps_up": r.keeps_up,  # open loop only (cells.Row.keeps_up)
                                "gpu_busy": u.gpu_busy,
                                "path_busy": {f"{a}->{b}": share for (a, b), share in u.path_busy.items()},
                                "ttft_parts_ms": asdict(u.ttft_parts_ms)}
                               for i, r, u in zip(at, c.rows, c.usage, strict=True)],
                    "binds": c.binding.__dict__, **c.envelope.as_dict()})
        for point, env in zip(out["points"], c.envelopes, strict=True):
            point.update(env.as_dict())
    return out


def to_json(a: Advice) -> str:
    close = a.close_call
    sep = a.separation
    return json.dumps({
        "estimate": True, "note": ESTIMATE, "stack": a.stack, "base": a.base, "cluster": a.source,
        "nodes": [n.__dict__ for n in a.nodes], "left_out": a.left_out,
        "workload": {**a.traffic.__dict__, "open_loop": a.traffic.open_loop,
                     "points": [pt._asdict() for pt in a.traffic.points]},
        "goal": {"name": a.goal.name, "metric": a.goal.metric,
                 "objectives": [{"metric": o.metric, "percentile": o.percentile, "bound_ms": o.bound_ms,
                                 "flag": o.flag} for o in a.goal.objectives]},
        "uncertainty": {**a.uncertainty.as_dict(), "threshold": a.threshold},
        "recommended": a.recommended.layout.label if a.recommended else None,
        "first": a.winner.layout.label if a.winner else None,
        "tie": None if close is None else {"with": close.worse.label, "gap": close.gap, "threshold": a.threshold,
                                           "all": [c.layout.label for c in a.ranked[:1] + a.tied]},
        # The best two's inputs (search.Advice.compared): extrapolated, their comparison is physics only.
        "comparison": a.compared.as_dict(),
        "ranked": [c.layout.label for c in a.ranked],
        "breaking_objectives": [c.layout.label for c in a.over],
        "unmet_objectives": [{"objective": o.label, "bound_ms": o.bound_ms, "nearest": c.layout.label,
                              "worst_ms": b.worst, "point": b.point} for o, c, b in a.unmet],
        "separation": {"answer": sep.answer,
                       "aggregated": sep.aggregated and sep.aggregated.label,
                       "separated": sep.separated and sep.separated.label,
                       "why": sep.compared and sep.compared.why},
        "families": [{"name": f.name, "looked_at": f.looked_at, "refused_by_sizing": len(f.refused_config),
                      "refused_by_preflight": len(f.refused_preflight),
                      "best": f.best.layout.label if f.best else None} for f in a.families],
        "candidates": [_candidate(a, c) for c in a.candidates], "seconds": a.seconds}, indent=2)


def written(path: str, a: Advice, source: Optional[str]) -> str:
    """What --write says after writing `path` (the name given), and what to run next."""
    cluster = {None: "", "-": " --from FILE (the cluster data, saved)"}.get(
        source, f" --from {shlex.quote(str(source))}")
    return (f"\nwrote {path}: {a.winner.layout.label}, {a.first_is}, stack {a.stack}. Next: `dynamo-lab preflight "
            f"{a.stack}{cluster}`, then `pulumi preview --stack {a.stack}` and `pulumi up --stack {a.stack}` (README, "
            "Deploy)")


def not_written(path: str, a: Advice) -> str:
    """What --write says when there is no layout to write (exit 1)."""
    return f"\n--write {path}: nothing written: {a.first_is.split(': ', 1)[1]}."
