"""`dynamo-lab predict`: the matrix of a stack, what it rests on, and its error against the write-up."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from dynamo_lab.predict import cells, text, validate
from dynamo_lab.predict.calibrate import CALIBRATION_CONCURRENCY
from dynamo_lab.predict.params import LAB
from tests.helpers import coarse_predictions, run_cli, sized


@functools.lru_cache(maxsize=None)
def _rows(stack: str) -> dict:
    proc = run_cli("predict", stack, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_has_a_row_for_every_cell_of_the_matrix_and_the_inputs_it_used(monkeypatch):
    coarse_predictions(monkeypatch)  # what the JSON holds, not its figures
    proc = run_cli("predict", "same-server", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # Each JSON row is a Row (its workers as objects) with its envelope beside it (predict/envelope.py).
    rows = [cells.Row(**{k: v for k, v in r.items() if k not in ("extrapolated", "basis", "outside", "workers")},
                      workers=tuple(cells.WorkerUse(**w) for w in r["workers"])) for r in data["rows"]]
    assert [(r.prefix_types, r.concurrency) for r in rows] == [(r["prefix_types"], r["concurrency"])
                                                                for r in data["rows"]]
    matrix = {(r["prefix_types"], r["concurrency"]) for r in data["rows"]}
    assert matrix == {(p, c) for p in (2, 7, 12, 24) for c in (4, 8)}
    for r in data["rows"]:
        assert {"ttft_p50_ms", "ttft_p99_ms", "requests_per_s"} <= set(r)
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["requests_per_s"] > 0
    inputs = data["inputs"]
    assert set(inputs["lab"]) >= {"bandwidth_efficiency", "schedule_s", "output_per_request_s", "launch_per_layer_s",
                                  "handoff_s", "host_copy_bytes_per_s", "host_transfer_parallelism"}
    assert {w["card"]["bandwidth"] for w in inputs["workers"]} == {936e9}  # the lab's RTX 3090
    for r in data["rows"]:  # what vLLM admitted never exceeds a worker's pool
        assert all(0 < w["kv_blocks_peak"] <= w["cache_blocks"] and w["preemptions"] >= 0 for w in r["workers"])
    assert [w["role"] for w in inputs["workers"]].count("prefill") == 2
    assert inputs["benchmark"]["prefix_tokens"] == 2000


@pytest.mark.slow  # two stacks' whole matrices at full fidelity: about 4 s of the fast tier's CPU
def test_the_labs_direction_same_server_is_slower_than_kv_routing_in_every_cell():
    same = {(r["prefix_types"], r["concurrency"]): r for r in _rows("same-server")["rows"]}
    kv = {(r["prefix_types"], r["concurrency"]): r for r in _rows("kv-routing")["rows"]}
    for cell, r in same.items():
        assert r["ttft_p50_ms"] > 2 * kv[cell]["ttft_p50_ms"], cell
        assert r["requests_per_s"] < kv[cell]["requests_per_s"], cell


@pytest.mark.slow
def test_cross_server_never_beats_its_shared_link():
    # Every request moves at least its 371-token tail over one 1GbE link shared by all transfers.
    data = _rows("cross-server")
    link = data["inputs"]["paths"]["gpu-8gb->gpu-24gb"]["capacity_bytes_per_s"]
    for r in data["rows"]:
        assert r["requests_per_s"] <= link / (371 * 114_688) * 1.01, r


@functools.lru_cache(maxsize=None)
def _validation() -> validate.Validation:
    return validate.validate({name: sized(name) for name in ("cross-server", "kv-routing", "same-server")})


# docs/predictor.md's validation table is a sample of `predict --validate`: tests/test_docs_samples.py
# (slow tier) holds it to what the command prints.


def _held_out() -> tuple[list, list]:
    """The concurrency-8 figures (never fitted on: calibrate.py) and those within the goal."""
    held = [e for e in _validation().errors if e.concurrency != CALIBRATION_CONCURRENCY]
    return held, [e for e in held if abs(e.relative) <= text.GOALS[e.metric]]


@pytest.mark.slow  # the whole validation: about 15 s
def test_validate_reports_how_many_held_out_figures_meet_the_goal():
    held, within = _held_out()
    assert len(held) == 24  # TTFT p50, p99 and requests/s of 4 prefix types, both stacks
    assert f"hold-out cells: {len(within)}/24 within goal" in text.validation(_validation(), LAB.pool_scale)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="19/24 within the goal on 2026-12-07 with Dynamo 1.6's router cost "
                                       "modelled and refitted on concurrency 4 (fit 22/24; docs/predictor.md, "
                                       "Protocol): the aim is not met; strict, so reaching it fails here until "
                                       "this mark goes")
def test_the_hold_out_meets_the_goal_in_at_least_20_of_its_24_figures():
    held, within = _held_out()
    missed = [f"{e.stack} {e.prefix_types} {e.metric} {e.relative:+.0%}" for e in held if e not in within]
    assert len(within) >= 20, missed


@pytest.mark.slow  # two cells at full fidelity: 2 s of the fast tier's CPU, for a figure its text test only needs said
def test_a_stacks_own_pools_and_the_validations_scaled_ones_differ_by_a_tenth_in_the_same_cell():
    # predict STACK: the pools as configured; --validate: scaled to what the lab's pools held. A
    # difference worth the word test_both_outputs_say_why_they_differ_for_the_same_cell checks.
    cfg, sizing = sized("same-server")
    own = cells.predict_cell(cfg, sizing, 24, 8)
    scaled = cells.predict_cell(cfg, sizing, 24, 8, pool_scale=LAB.pool_scale["same-server"])
    assert abs(own.ttft_p50_ms - scaled.ttft_p50_ms) > 0.1 * scaled.ttft_p50_ms


def test_both_outputs_say_why_they_differ_for_the_same_cell(monkeypatch):
    # predict STACK: the pools as configured; --validate: scaled to what the lab's pools held (how far
    # apart at full fidelity: the slow test above). The words, not the figures: one coarse row.
    cfg, sizing = sized("same-server")
    scale = LAB.pool_scale["same-server"]
    own = cells.simulate(cfg, sizing, 24, 8, LAB, graphs=1, runs=1)[0]
    rows = [own]
    monkeypatch.setattr(cells, "predict", lambda *args, **kwargs: rows)  # the row above, not a second run
    out = run_cli("predict", "same-server").stdout
    assert ("KV pools: this stack's as configured; `predict --validate` scales them to what the lab's unpinned "
            f"pools held (kv-routing x {LAB.pool_scale['kv-routing']:g}, same-server x {scale:g}), so its figures "
            "for the same cell differ from these") in out
    v = validate.Validation([cells.Error("same-server", 24, 8, "ttft_p50_ms", 896, own.ttft_p50_ms)], [1, 2], [1],
                            [1, 2], [1])
    assert text.validation(v, LAB.pool_scale).startswith(
        f"KV pools scaled to what the lab's unpinned pools held (kv-routing x {LAB.pool_scale['kv-routing']:g}, "
        f"same-server x {scale:g} of each configured pool), as fitted: `predict STACK` uses the pools as "
        "configured, so its figures for these cells differ.")
    assert "does not predict this stack's cells" in text.matrix("cross-server", [], LAB.pool_scale)


def test_decode_caches_keep_their_prefixes_at_concurrency_8():
    # Requests in flight reference their cached prefix rather than pinning a copy of it, so doubling
    # the load does not crowd the prefixes out of same-server's decode pools: when every request
    # pinned its whole prefix, the decode hit ratio at 7 prefix types halved from concurrency 4 to 8.
    # Each cell's three graphs with one measured run each (predict's own 3 x 5 took 1.2 s of CPU, this
    # 0.4 s): 0.95 of concurrency 4's ratio, and 0.63 with every request pinning its prefix (the held
    # blocks without the shared prefix, sim._held) where predict's fidelity gave 0.75, at the bound.
    cfg, sizing = sized("same-server")
    scale = LAB.pool_scale["same-server"]
    c4, c8 = (cells.simulate(cfg, sizing, 7, c, pool_scale=scale, runs=1)[0].decode_hit_ratio for c in (4, 8))
    assert c8 > 0.75 * c4, (c4, c8)


def test_the_matrix_writes_thousands_as_the_other_tables_do():
    # `predict` once printed 16595 where advise and the validation print 1,007.
    row = cells.Row(prefix_types=24, concurrency=32, ttft_p50_ms=16595.4, ttft_p99_ms=20100.0, requests_per_s=1.25,
                    prefill_cache_ratio=0.2, decode_hit_ratio=None)
    shown = text.matrix("same-server", [row], LAB.pool_scale)
    assert "16,595" in shown and "20,100" in shown and "16595" not in shown


@pytest.mark.slow  # eight open-loop cells at full fidelity: about 10 s
def test_an_open_loop_rate_predicts_each_prefix_type_at_that_rate_and_says_it_is_outside():
    # `predict STACK --rate R`: requests arrive at R/s whatever the graph does; more arriving than it
    # serves shows as queueing, which a closed loop hides by slowing its clients.
    proc = run_cli("predict", "kv-routing", "--rate", "4,30", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert {(r["prefix_types"], r["rate"]) for r in rows} == {(p, rate) for p in (2, 7, 12, 24) for rate in (4, 30)}
    by = {(r["prefix_types"], r["rate"]): r for r in rows}
    for p in (2, 7, 12, 24):
        assert by[(p, 4)]["requests_per_s"] == pytest.approx(4, rel=0.25)  # it keeps up: served as they arrive
        assert by[(p, 30)]["ttft_p50_ms"] > by[(p, 4)]["ttft_p50_ms"]
    assert all(r["extrapolated"] and any("open loop" in o for o in r["outside"]) for r in rows)
    refused = run_cli("predict", "kv-routing", "--rate", "0")
    assert refused.returncode == 2 and "argument --rate" in refused.stderr


class _Done:
    def __init__(self, sent: float, done: float):
        self.sent, self.done = sent, done


def test_keeping_up_is_told_from_the_middle_of_a_run_not_its_last_latency():
    # 100 requests at 10/s, each served in 2 s: the run's requests/s (100 over 11.9 s) is 8.4, short
    # of the rate, yet every request is served as it arrives.
    arrivals = [k / 10 for k in range(100)]
    assert cells.completion_ratio([_Done(t, t + 2.0) for t in arrivals]) == pytest.approx(1.0)
    # Served one at a time at 4/s: completions come at its capacity, 40% of the rate.
    served = [_Done(t, 2.0 + k / 4) for k, t in enumerate(arrivals)]
    assert cells.completion_ratio(served) == pytest.approx(0.4)
    # Completions all on one step (no span to measure them over): as fast as can be measured, no error.
    assert cells.completion_ratio([_Done(t, 20.0) for t in arrivals]) == 1.0
    row = functools.partial(cells.Row, prefix_types=2, concurrency=0, ttft_p50_ms=1.0, ttft_p99_ms=1.0,
                            requests_per_s=1.0, prefill_cache_ratio=0.0, decode_hit_ratio=None, rate=10.0)
    assert row(completion_ratio=0.97).keeps_up is True and row(completion_ratio=0.4).keeps_up is False
    assert dataclasses.replace(row(), rate=None).keeps_up is None  # a closed loop sends only as fast as it completes


def test_an_open_loop_graph_short_of_the_rate_is_said_to_fall_behind():
    cfg, sizing = sized("cross-server")
    slow, fast = (cells.simulate(cfg, sizing, 12, 0, LAB, graphs=1, runs=1, rate=r)[0] for r in (0.5, 3.0))
    # Each request's KV crosses the 1 Gbit/s link: its 371 unique tokens' (about 43 MB, 0.35 s of the
    # link) and, where the decode worker lacks the prefix, the 2,000 prefix tokens' (about 229 MB,
    # 1.8 s): 3 requests/s over 12 prefix types is more than the link carries, 0.5/s is not.
    assert slow.keeps_up and not fast.keeps_up and fast.completion_ratio < 0.6
    shown = text.matrix("cross-server", [slow, fast], LAB.pool_scale).splitlines()
    head = shown[1].split("  ")
    assert "keeps up" in [h.strip() for h in head if h.strip()]
    assert any(ln.startswith("12") and "open, 0.5/s" in ln and " yes " in ln for ln in shown)
    assert any(ln.startswith("12") and "open, 3/s" in ln and f"no, {fast.completion_ratio:.0%}" in ln for ln in shown)
    assert any(ln.startswith("keeps up: no, N%: it completes N% of the requests/s arriving") for ln in shown)
    closed = text.matrix("cross-server", [dataclasses.replace(slow, rate=None, concurrency=4, completion_ratio=None)],
                         LAB.pool_scale)
    assert "keeps up" not in closed
