"""`dynamo-lab predict`: the matrix of a stack, what it rests on, and its error against the write-up."""

from __future__ import annotations

import functools
import json

from infra.lab.predict import text, validate
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
    assert set(inputs["lab"]) >= {"same_node_bytes_per_s", "transfer_s", "prefill_scale"}
    assert [w["role"] for w in inputs["workers"]].count("prefill") == 2
    assert inputs["benchmark"]["prefix_tokens"] == 2000


def test_the_labs_direction_same_server_is_slower_than_kv_routing_in_every_cell():
    same = {(r["prefix_types"], r["concurrency"]): r for r in _rows("same-server")["rows"]}
    kv = {(r["prefix_types"], r["concurrency"]): r for r in _rows("kv-routing")["rows"]}
    for cell, r in same.items():
        assert r["ttft_p50_ms"] > 2 * kv[cell]["ttft_p50_ms"], cell
        assert r["requests_per_s"] < kv[cell]["requests_per_s"], cell


def test_cross_server_never_beats_its_shared_link():
    # Every request moves at least its 371-token tail over one 1GbE link shared by all transfers.
    data = _rows("cross-server")
    link = data["inputs"]["paths_bytes_per_s"]["gpu-8gb->gpu-24gb"]
    for r in data["rows"]:
        assert r["requests_per_s"] <= link / (371 * 114_688) * 1.01, r


def test_the_readme_shows_the_current_validation():
    stacks = {name: sized(name) for name in ("cross-server", "kv-routing", "same-server")}
    table = text.validation(validate.validate(stacks))
    assert table in (ROOT / "README.md").read_text(), "README's predictor table is stale: paste predict --validate"
