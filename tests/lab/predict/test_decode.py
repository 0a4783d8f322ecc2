"""The decode side of the predictor (issue 45): each request's token times, the gaps between them
(ITL), its mean per output token (TPOT), and goodput under objectives; the mechanism separation is
run for: a prefill chunk lengthens the decode steps it shares a step with on an aggregated worker,
and a separated decode worker's steps hold no prompt."""

from __future__ import annotations

import json
import re
from itertools import pairwise

import pytest

from dynamo_lab import stack_files
from dynamo_lab.advise import crossover
from dynamo_lab.predict import cells, text
from dynamo_lab.predict.costs import Card, Efficiency, HostCost, Limits, ModelCost
from dynamo_lab.predict.objectives import Objective
from dynamo_lab.predict.sim import Load, ServingGraph, Timing, WorkerSpec
from infra.plan import load_stack

KV = 114_688  # Qwen3-0.6B's KV bytes per token
MODEL = ModelCost(weight_bytes=1.19e9, flops_per_token=1.2e9, attention_flops_per_pair=229_376, kv_bytes_per_token=KV)
# The lab's 24GB card's datasheet figures, its prefill sustaining half the peak.
CARD = Card(bandwidth=936e9, peak_flops=71e12, sustained_flops=35.5e12)
LIMITS = Limits(max_num_batched_tokens=2048, max_num_seqs=256)  # vLLM's defaults for it


def _timing() -> Timing:
    host = HostCost(schedule_s=0.0, schedule_per_request_s=0.0, output_per_request_s=0.0, launch_per_layer_s=0.0,
                    piecewise_per_layer_s=0.0, graph_replay_s=0.0, host_copy_bytes_per_s=1e18)
    return Timing(frontend_s=0.0, host=host, efficiency=Efficiency(0.8), handoff_s=0.0, handshake_s=0.0,
                  frontend_jitter=0.0, step_noise=0.0)


def _aggregated(prompt: int, output: int = 32) -> list:
    w = WorkerSpec("agg-0", "agg", "g", "g", CARD, LIMITS, 100_000, KV)
    g = ServingGraph([w], {}, _timing(), Load(1, 0, prompt, output, MODEL), stream=1)
    return g.run(2, 2)


def test_each_request_has_one_time_per_output_token_the_first_at_its_ttft():
    for r in _aggregated(2371):
        assert len(r.token_times) == r.output_tokens
        assert r.token_times[0] == r.first_token and r.token_times[-1] == r.done
        assert r.token_times == sorted(r.token_times)


def test_a_prefill_chunk_in_the_same_step_lengthens_the_running_decodes_gap():
    # Two clients at once: the second prompt's chunks run in the steps of the first request's first
    # decodes (the budget's 2,048 tokens: the running decode first, then the chunk), so the gaps the
    # first request sees while the second prefills are longer than the gaps once only decodes run.
    first, second = sorted(_aggregated(8192), key=lambda r: r.first_token)
    gaps = [(a, b - a) for a, b in pairwise(first.token_times)]  # (when it started, how long)
    prefilling = [g for a, g in gaps if a < second.prefilled]
    alone = [g for a, g in gaps if a >= second.first_token]
    assert prefilling and alone
    # 8,192 prompt tokens beside one decode a step: four steps of 2,047 of them, then a remainder of 4.
    assert sum(g > 5 * max(alone) for g in prefilling) == 4


def test_the_run_figures_follow_their_definitions():
    done = _aggregated(2371, output=16)
    f = cells.run_figures(done)
    gaps = sorted((b - a) * 1000 for r in done for a, b in pairwise(r.token_times))
    assert f.itl_p99_ms == pytest.approx(cells.percentile(gaps, 99))
    means = [(r.token_times[-1] - r.token_times[0]) * 1000 / (len(r.token_times) - 1) for r in done]
    assert f.tpot_p50_ms == pytest.approx(cells.percentile(means, 50))
    assert f.e2e_p99_ms >= f.ttft_p99_ms
    assert f.output_tokens_per_s == pytest.approx(f.requests_per_s * 16)


def test_goodput_is_never_above_throughput_and_counts_only_requests_meeting_every_objective():
    done = _aggregated(2371, output=16)
    f = cells.run_figures(done)
    loose = cells.run_figures(done, (Objective("ttft", 99, 1e6), Objective("itl", 99, 1e6)))
    assert loose.goodput_requests_per_s == pytest.approx(f.requests_per_s) and loose.met == len(done)
    # An ITL bound below every gap: no request meets it, whatever its TTFT.
    tight = cells.run_figures(done, (Objective("ttft", 99, 1e6), Objective("itl", 50, 1e-6)))
    assert tight.met == 0 and tight.goodput_requests_per_s == 0
    # A TTFT bound only the earlier request meets: half of them.
    ttfts = sorted((r.first_token - r.sent) * 1000 for r in done)
    half = cells.run_figures(done, (Objective("ttft", 50, (ttfts[0] + ttfts[1]) / 2),))
    assert half.met == 1 and 0 < half.goodput_requests_per_s < f.requests_per_s


def test_a_run_of_one_output_token_a_request_has_no_gaps_and_says_so_rather_than_zero():
    # With one output token there is no gap between tokens: ITL and TPOT are undefined (AIPerf reports
    # no inter_token_latency below two output tokens), not 0 ms, which read as an infinitely fast decode.
    done = _aggregated(2371, output=1)
    f = cells.run_figures(done, (Objective("itl", 99, 1.0), Objective("tpot", 50, 1.0)))
    assert (f.itl_p50_ms, f.itl_p99_ms, f.tpot_p50_ms, f.tpot_p99_ms) == (None, None, None, None)
    assert f.e2e_p50_ms == pytest.approx(f.ttft_p50_ms)
    # An objective on gaps bounds nothing there: every request meets it.
    assert f.met == len(done) and f.goodput_requests_per_s == pytest.approx(f.requests_per_s)


def test_a_row_without_gaps_prints_no_decode_figure_and_its_json_holds_null():
    stack = load_stack("kv-routing", *stack_files.config_from_doc(stack_files.stack_doc("kv-routing")))
    cfg = stack.config.model_copy(update={"benchmark": stack.config.benchmark.model_copy(
        update={"output_tokens": 1})})
    row = cells.simulate(cfg, stack.sizing, 2, 4, graphs=1, runs=1,
                         objectives=(Objective("itl", 99, 1.0),))[0]
    assert row.itl_p50_ms is None and row.itl_p99_ms is None and row.tpot_p50_ms is None
    assert Objective("itl", 99, 1.0).met_by(row) and row.goodput_requests_per_s == pytest.approx(row.requests_per_s)
    _, head, _, line, *_ = text.matrix("kv-routing", [row], {}).splitlines()
    cols = dict(zip(re.split(r"\s{2,}", head.strip()), re.split(r"\s{2,}", line.strip()), strict=True))
    assert cols["ITL p50 ms"] == cols["ITL p99 ms"] == cols["TPOT p50 ms"] == "-"
    rows = json.loads(text.to_json("kv-routing", [row], {}))["rows"]
    assert rows[0]["itl_p99_ms"] is None and rows[0]["tpot_p50_ms"] is None


def test_an_objective_is_one_metric_one_percentile_and_a_positive_bound():
    for bad in (("ttft", 90, 100.0), ("e2e", 99, 100.0), ("itl", 99, 0.0)):
        with pytest.raises(ValueError):
            Objective(*bad)


def _cell(layout, prompt: int) -> cells.Row:
    """The crossover's 32B layouts on two 8-GPU nodes, KV over RDMA into GPU buffers (so no host
    copy stalls a decode step), one simulated run at the crossover's higher load, concurrency 16."""
    doc = crossover.config(stack_files.stack_doc(crossover.BASE), layout, prompt, "rdma", 400, 16)
    stack = load_stack("decode", *stack_files.config_from_doc(doc))
    return cells.simulate(stack.config, stack.sizing, 1, 16, graphs=1, runs=1)[0]


@pytest.mark.slow  # four Qwen3-32B cells of 8k-token prompts: a few seconds
def test_a_longer_prompt_raises_aggregated_itl_p99_and_leaves_a_separated_decode_workers_nearly_flat():
    split = crossover.SPLITS[1]  # 2 prefill + 2 decode
    agg = {p: _cell(crossover.AGG, p) for p in (2048, 8192)}
    sep = {p: _cell(split, p) for p in (2048, 8192)}
    # Aggregated: a longer prompt's chunks fill more steps beside the running decodes.
    assert agg[8192].itl_p99_ms > 2 * agg[2048].itl_p99_ms
    # Separated: the decode worker's steps hold decodes only; a longer context reads more KV per step.
    assert sep[8192].itl_p99_ms < 1.5 * sep[2048].itl_p99_ms
    assert sep[8192].itl_p99_ms < agg[8192].itl_p99_ms / 3
    # The price: the prompt's KV crosses to the decode worker before its first token.
    for p in (2048, 8192):
        assert sep[p].ttft_p50_ms > 0 and agg[p].ttft_p50_ms > 0
