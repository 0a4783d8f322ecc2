"""The predictor's output in words: the matrix of one stack, and its error against the write-up."""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Optional

from dynamo_lab import published
from dynamo_lab.predict.calibrate import CALIBRATION_CONCURRENCY
from dynamo_lab.predict.cells import OPEN_LOOP_REQUESTS, Error, Row
from dynamo_lab.predict.envelope import Envelope, outside_lines
from dynamo_lab.predict.params import BOUNDS, LabParams
from dynamo_lab.sizing_text import text_table

# The goal docs/predictor.md states: every TTFT p50 and requests/s cell within 25%, every p99 within 35%.
GOALS = {"ttft_p50_ms": 0.25, "requests_per_s": 0.25, "ttft_p99_ms": 0.35}
LABELS = {"ttft_p50_ms": "TTFT p50 ms", "ttft_p99_ms": "TTFT p99 ms", "requests_per_s": "req/s"}


def _scales(pool_scale: dict[str, float]) -> str:
    return ", ".join(f"{name} x {scale:g}" for name, scale in sorted(pool_scale.items()))


def pools_note(stack: str, pool_scale: dict[str, float]) -> str:
    """Why `predict STACK` and `predict --validate` give one cell different figures."""
    scaled = (f"`predict --validate` scales them to what the lab's unpinned pools held ({_scales(pool_scale)}), "
              "so its figures for the same cell differ from these") if stack in pool_scale else (
              "`predict --validate` does not predict this stack's cells")
    return f"KV pools: this stack's as configured; {scaled} (docs/predictor.md)."


def matrix(stack: str, rows: list[Row], pool_scale: dict[str, float],
           envelopes: Optional[list[Envelope]] = None) -> str:
    """`envelopes`: each row's (envelope.envelope), shown as a column and what is outside below."""
    head = ["prefix types", "concurrency", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "TPOT p50 ms",
            "E2E p99 ms", "req/s", "prefill cache", "decode hit",
            "KV peak", "preempted"] + (["envelope"] if envelopes is not None else [])
    body = [[str(r.prefix_types), f"open, {r.rate:g}/s" if r.rate else str(r.concurrency),
             _fmt("ttft_p50_ms", r.ttft_p50_ms),
             _fmt("ttft_p99_ms", r.ttft_p99_ms), decode_ms(r.itl_p50_ms), decode_ms(r.itl_p99_ms),
             decode_ms(r.tpot_p50_ms), _fmt("e2e_p99_ms", r.e2e_p99_ms), _fmt("requests_per_s", r.requests_per_s),
             f"{r.prefill_cache_ratio:.2f}",
             "-" if r.decode_hit_ratio is None else f"{r.decode_hit_ratio:.0%}",
             _kv_peak(r), f"{r.preemptions:,}"] for r in rows]
    said = []
    if any(r.rate for r in rows):  # open loop: whether the graph completes as fast as requests arrive
        at = head.index("req/s") + 1
        head.insert(at, "keeps up")
        for line, r in zip(body, rows, strict=True):
            line.insert(at, "-" if r.keeps_up is None else "yes" if r.keeps_up else
                        f"no, {r.completion_ratio:.0%}")
        if any(r.keeps_up is False for r in rows):
            said.append(f"keeps up: no, N%: it completes N% of the requests/s arriving, in the middle of each run, so "
                        f"its backlog grows for as long as the load lasts and its figures are those of a run of "
                        f"{OPEN_LOOP_REQUESTS} arrivals, not a steady state (docs/predictor.md, The model).")
    if envelopes is not None:
        for line, env in zip(body, envelopes, strict=True):
            line.append("outside" if env.extrapolated else "inside")
        said += outside_lines([(f"{r.prefix_types}x{f'{r.rate:g}/s' if r.rate else r.concurrency}", env)
                              for r, env in zip(rows, envelopes, strict=True)],
                             every="every cell") or ["Every cell is inside what the validation covered "
                                                     "(docs/predictor.md, Envelope)."]
    return "\n".join([f"Predicted for stack {stack} (model and constants: docs/predictor.md; an ESTIMATE):",
                      text_table(head, body), DECODE_NOTE, *said, pools_note(stack, pool_scale)])


# Said under every table of decode figures: what they are, and that no measurement checks them.
DECODE_NOTE = ("ITL: the gaps between one request's tokens, all requests' together; TPOT: a request's mean per "
               "output token after its first; E2E: sent to last token (docs/predictor.md, Decode figures). The "
               "lab's table has no ITL, TPOT or E2E: they are physics only, with no validated error, everywhere.")


def decode_ms(value: Optional[float]) -> str:
    """A decode figure: a decode step is a few ms, so one decimal below 100 ms; "-" where there is
    none (ITL and TPOT with one output token a request: no gap between tokens)."""
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def _kv_peak(r: Row) -> str:
    """The fullest worker: the most blocks its requests held at once, of its pool."""
    if not r.workers:
        return "-"
    w = max(r.workers, key=lambda w: w.kv_blocks_peak / w.cache_blocks)
    return f"{w.kv_blocks_peak / w.cache_blocks:.0%} ({w.name})"


def _fmt(metric: str, value: float) -> str:
    return f"{value:.1f}" if metric == "requests_per_s" else f"{value:,.0f}"


def error_table(errs: list[Error], calibration_concurrency: int) -> str:
    body = []
    for e in errs:
        role = "fit" if e.concurrency == calibration_concurrency else "hold-out"
        within = abs(e.relative) <= GOALS[e.metric]
        body.append([e.stack, str(e.prefix_types), str(e.concurrency), role, LABELS[e.metric],
                     _fmt(e.metric, e.published), _fmt(e.metric, e.predicted), f"{e.relative:+.0%}",
                     "yes" if within else "NO"])
    lines = [text_table(["stack", "prefix types", "conc", "cell", "metric", "published", "predicted", "error",
                         "within goal"], body), ""]
    for role in ("fit", "hold-out"):
        chosen = [e for e in errs if (e.concurrency == calibration_concurrency) == (role == "fit")]
        if not chosen:
            continue
        within = sum(abs(e.relative) <= GOALS[e.metric] for e in chosen)
        lines.append(f"{role} cells: {within}/{len(chosen)} within goal; " + _within_goal(chosen))
    return "\n".join(lines)


def _within_goal(errs: list[Error]) -> str:
    """Per metric, how many of `errs` are within its goal, and the worst."""
    parts = []
    for metric in GOALS:
        ms = [e for e in errs if e.metric == metric]
        if ms:
            ok = sum(abs(e.relative) <= GOALS[metric] for e in ms)
            worst = max(abs(e.relative) for e in ms)
            parts.append(f"{LABELS[metric]} {ok}/{len(ms)} within {GOALS[metric]:.0%} (worst {worst:.0%})")
    return "; ".join(parts)


def _both(values) -> str:
    return " and ".join(f"{x:,.0f}" for x in values)


def validation(v, pool_scale: dict[str, float]) -> str:
    """`predict --validate`: the error table, then the cross-server first requests."""
    pub_c1 = published.CROSS_SERVER_CONCURRENCY_1_MS
    return "\n".join([
        f"KV pools scaled to what the lab's unpinned pools held ({_scales(pool_scale)} of each configured "
        "pool), as fitted: `predict STACK` uses the pools as configured, so its figures for these cells differ.",
        error_table(v.errors, CALIBRATION_CONCURRENCY), "",
        "cross-server, first requests (prefix types 2; the write-up's only figures of it), predicted on fresh "
        "workers / once 4 earlier requests warmed the decode workers and the prefill worker restarted:",
        f"  concurrency 4, first 2 requests: published {_both(published.CROSS_SERVER_CONCURRENCY_4_MS)} ms;"
        f" predicted {_both(v.first_c4)} / {_both(v.after_c4)} ms",
        f"  concurrency 1, first 4 requests: published median {pub_c1['median']:,.0f} / max {pub_c1['max']:,.0f} ms;"
        f" predicted median {statistics.median(v.first_c1):,.0f} / {statistics.median(v.after_c1):,.0f},"
        f" max {max(v.first_c1):,.0f} / {max(v.after_c1):,.0f} ms",
    ])


def to_json(stack: str, rows: list[Row], inputs: dict, envelopes: Optional[list[Envelope]] = None) -> str:
    """`predict STACK --json`: the rows, each with its envelope (`extrapolated`, `outside`) where
    given, and the inputs the prediction used (cells.inputs)."""
    marks = [e.as_dict() for e in envelopes] if envelopes is not None else [{} for _ in rows]
    out = [{**dataclasses.asdict(r), **m} for r, m in zip(rows, marks, strict=True)]
    return json.dumps({"stack": stack, "rows": out, "inputs": inputs}, indent=2)


def validation_json(v, pool_scale: dict[str, float]) -> str:
    """`predict --validate --json`."""
    return json.dumps({**v.as_dict(), "pool_scale": pool_scale}, indent=2)


def _moved(fit: LabParams, start: LabParams) -> str:
    """The constants a fold's fit moved from the start by more than 5%, as start -> fit."""
    pairs = [(k, getattr(start, k), getattr(fit, k)) for k in BOUNDS]
    pairs += [(f"pool_scale[{n}]", start.pool_scale.get(n, 1.0), v) for n, v in sorted(fit.pool_scale.items())]
    moved = [f"{k} {a:.3g} -> {b:.3g}" for k, a, b in pairs if abs(b / a - 1) > 0.05]
    return ", ".join(moved) or "none by more than 5%"


def cross_validation(folds, start: LabParams) -> str:
    """`predict --cross-validate`: each left-out prefix type's cells, predicted with the others' fit
    (and what that fit moved from `start`), and how many are within the goal (calibrate.cross_validate)."""
    body, errs = [], []
    for fold in folds:
        for e in fold.errors:
            errs.append(e)
            body.append([str(fold.left_out), e.stack, LABELS[e.metric], _fmt(e.metric, e.published),
                         _fmt(e.metric, e.predicted), f"{e.relative:+.0%}",
                         "yes" if abs(e.relative) <= GOALS[e.metric] else "NO", f"{fold.loss:.4f}"])
    within = sum(abs(e.relative) <= GOALS[e.metric] for e in errs)
    return "\n".join([
        f"Leave one prefix type out, concurrency {CALIBRATION_CONCURRENCY} only (each row: a left-out cell predicted "
        "with the constants refitted to the other prefix types' cells; the concurrency-8 hold-out is not read):",
        text_table(["left out", "stack", "metric", "published", "predicted", "error", "within goal", "fold's fit loss"],
                   body), "",
        "What each fold's fit moved from the full fit's constants (params.py):",
        *[f"  {fold.left_out} left out: {_moved(fold.fit, start)}" for fold in folds], "",
        f"left-out cells: {within}/{len(errs)} within goal; " + _within_goal(errs)])


def calibration(fit: LabParams, loss: float) -> str:
    """`predict --calibrate`: the refitted constants, to paste."""
    return (f"# loss {loss:.4f}; paste into dynamo_lab/predict/params.py, and prefill_efficiency into "
            f"infra/catalogue.py (LAB_PREFILL_EFFICIENCY: the lab's classes' effectiveTflops)\n{fit!r}")
