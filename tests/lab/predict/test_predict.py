"""`dynamo-lab predict`: the matrix of a stack, what it rests on, and its error against the write-up."""

from __future__ import annotations

import functools
import json

import pytest

from infra.lab.predict import cells, text, validate
from infra.lab.predict.params import LAB
from tests.helpers import ROOT, run_cli, sized


@functools.lru_cache(maxsize=None)
def _rows(stack: str) -> dict:
    proc = run_cli("predict", stack, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_has_a_row_for_every_cell_of_the_matrix_and_the_inputs_it_used():
    data = _rows("same-server")
    cells = {(r["prefix_types"], r["concurrency"]) for r in data["rows"]}
    assert cells == {(p, c) for p in (2, 7, 12, 24) for c in (4, 8)}
    for r in data["rows"]:
        assert {"ttft_p50_ms", "ttft_p99_ms", "requests_per_s"} <= set(r)
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["requests_per_s"] > 0
    inputs = data["inputs"]
    assert set(inputs["lab"]) >= {"prefill_efficiency", "decode_efficiency", "handoff_s", "host_copy_bytes_per_s"}
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


@pytest.mark.slow
def test_the_predictor_page_shows_the_current_validation():
    stacks = {name: sized(name) for name in ("cross-server", "kv-routing", "same-server")}
    table = text.validation(validate.validate(stacks), LAB.pool_scale)
    assert table in (ROOT / "docs" / "predictor.md").read_text(), (
        "docs/predictor.md's validation table is stale: paste predict --validate")


def test_both_outputs_say_why_they_differ_for_the_same_cell(monkeypatch):
    # predict STACK: the pools as configured; --validate: scaled to what the lab's pools held.
    cfg, sizing = sized("same-server")
    scale = LAB.pool_scale["same-server"]
    # Each JSON row is a Row (its workers as objects) with its envelope beside it (predict/envelope.py).
    rows = [cells.Row(**{k: v for k, v in r.items() if k not in ("extrapolated", "outside", "workers")},
                      workers=tuple(cells.WorkerUse(**w) for w in r["workers"]))
            for r in _rows("same-server")["rows"]]
    (own,) = [r for r in rows if (r.prefix_types, r.concurrency) == (24, 8)]
    scaled = cells.predict_cell(cfg, sizing, 24, 8, pool_scale=scale)
    assert abs(own.ttft_p50_ms - scaled.ttft_p50_ms) > 0.1 * scaled.ttft_p50_ms  # a difference worth a word
    monkeypatch.setattr(cells, "predict", lambda *args, **kwargs: rows)  # the rows above, not a second run
    out = run_cli("predict", "same-server").stdout
    assert ("KV pools: this stack's as configured; `predict --validate` scales them to what the lab's unpinned "
            f"pools held (kv-routing x {LAB.pool_scale['kv-routing']:g}, same-server x {scale:g}), so its figures "
            "for the same cell differ from these") in out
    v = validate.Validation([cells.Error("same-server", 24, 8, "ttft_p50_ms", 896, scaled.ttft_p50_ms)], [1, 2], [1],
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
    cfg, sizing = sized("same-server")
    scale = LAB.pool_scale["same-server"]
    c4, c8 = (cells.predict_cell(cfg, sizing, 7, c, pool_scale=scale).decode_hit_ratio for c in (4, 8))
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
    with pytest.raises(SystemExit) as refused:
        run_cli("predict", "kv-routing", "--rate", "0")
    assert refused.value.code == 2
