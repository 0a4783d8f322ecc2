"""`dynamo-lab advise` (fast tier): how it ranks and what it says of each layout: objectives and
goodput, ties within the uncertainty, layouts breaking an objective or running only by preempting,
what binds, figures at each point, the verdict line. The figures come from a cheap search (one
simulated run per point); the slow tier (test_advise_slow.py) checks the rankings in full. Where a
property does not rest on the length of requests, they have SHORT output tokens (common.py)."""


import dataclasses
import json
import re

import pytest

from dynamo_lab.advise import inputs, search, text, uncertainty, write
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.predict.cells import Error
from dynamo_lab.predict.objectives import Objective
from infra.errors import UserError
from tests.lab.advise.common import (
    FIXED,
    SHORT,
    advise,
    base,
    fake_candidate,
    gpu_node,
    point,
    small_lab,
    verdict_line,
    with_nodes,
)

ONE_NODE_24 = "prefill/decode on gpu-24gb's node"
# The lab's two nodes with one GPU unit each: aggregated and separated layouts over the link, 5 to
# search (small_lab() has 18), for the open-loop tests, whose 128 requests a run cost the most.
ONE_GPU_EACH = with_nodes(gpu_node("gpu-server", 24576, 1, 62.6), gpu_node("gpu-laptop", 8192, 1, 15.4))


@pytest.mark.parametrize(("first", "second", "tie"), [
    (10.0, 9.6, True),  # 4% more goodput: within the 5% held-out median error of requests/s
    (10.0, 9.0, False),  # 11% more: beyond it
])
def test_the_best_two_tie_within_the_held_out_median_error_of_requests_per_s(first, second, tie):
    from tests.lab.advise.common import FIXED

    fixed = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(0.05, 0.1, 0.05,
                                                                                                  0.2, 16)})
    ranked = [fake_candidate("a", first), fake_candidate("b", second)]
    a = search.Advice("s", "s", "x", [], [], point(2, 4), inputs.Goal(), fixed, ranked, ranked, [], [], (1, 1), 2,
                      0.0)
    assert a.threshold == 0.05 and (a.close_call is not None) == tie


def test_the_uncertainty_keeps_fitted_and_held_out_cells_apart():
    errs = [Error("kv-routing", 2, 4, "ttft_p50_ms", 100, 110), Error("kv-routing", 7, 4, "ttft_p50_ms", 100, 70),
            Error("kv-routing", 2, 8, "ttft_p50_ms", 100, 150), Error("kv-routing", 7, 8, "ttft_p50_ms", 100, 100)]
    u = uncertainty.from_errors(errs).metrics["ttft_p50_ms"]
    assert (round(u.fit_median, 6), round(u.fit_worst, 6), round(u.holdout_median, 6), round(u.holdout_worst, 6)) == (
        0.2, 0.3, 0.25, 0.5)


def test_everything_printed_is_labelled_an_estimate_with_where_the_constants_come_from():
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    words = text.text(a)
    assert words.startswith("ESTIMATES, not measurements")
    assert "fitted to one lab's published table" in words
    assert "Top 3 meeting every objective, estimates" in words
    assert ("Recommended (an estimate)" in words) != ("Tied within the uncertainty" in words)
    as_json = json.loads(text.to_json(a))
    assert as_json["estimate"] is True and as_json["note"].startswith("ESTIMATES")
    assert all(c["estimate"] for c in as_json["candidates"] if "means" in c)
    # The count it gives is the families it lists, a line each (the lab's two classes make 5).
    families = [ln for ln in words.splitlines() if ln.startswith("- ")]
    assert len(families) == len(a.families) == 5
    assert f"layouts as stack advised ({len(families)} families, each a line below" in words


def test_a_layout_under_no_pressure_is_not_said_to_be_bound_by_anything():
    # A request every two seconds (open loop), each served in a fraction of that: no GPU, path or node
    # is half used. (One request at a time back to back is not that: vLLM's async scheduling keeps a
    # lone request's GPU busy for most of each decode step, the host preparing the next meanwhile.)
    # ONE_GPU_EACH: small_lab()'s 18 layouts took 4 s of CPU here, each run's 128 requests one at a time.
    a = advise(data=ONE_GPU_EACH, traffic=dataclasses.replace(point(2, 1, output_tokens=SHORT), rates=(0.5,)))
    best = a.winner
    assert best.binding.level < text.NEAR_LIMIT
    assert f"nothing is near its limit (the most used: {best.binding.resource}" in text.text(a)
    # The winner's family line (at this load the families' best tie, so which family wins is the
    # noise's; another family's best may well bind, e.g. two workers' host memory on one node).
    line = next(ln for ln in text.text(a).splitlines() if f"Best: {best.layout.label} (" in ln)
    assert "binds: " not in line and "nothing is near its limit" in line


def test_over_several_points_each_shown_layout_has_its_figure_at_every_point():
    w = Traffic(2371, 2000, SHORT, (2, 24), (4,), given=True)
    a = advise(data=small_lab(), traffic=w)
    lines = text.text(a).splitlines()
    at = lines.index("At each point (prefix types x concurrency), estimates:")
    assert lines[at + 1].split() == ["rank", "figure", "2x4", "24x4"]
    first, itl = lines[at + 3], lines[at + 4]
    assert first.split()[:3] == ["1", "goodput,", "req/s"]
    assert [float(v) for v in first.split()[3:]] == [round(r.goodput_requests_per_s, 1) for r in a.ranked[0].rows]
    assert [float(v) for v in itl.split()[3:]] == [round(r.itl_p99_ms, 1) for r in a.ranked[0].rows]


def test_an_error_table_without_held_out_cells_is_refused_with_the_reason():
    only_fitted = [Error("kv-routing", p, 4, m, 100, 110) for p in (2, 7) for m in uncertainty.METRICS]
    with pytest.raises(UserError, match=r"could not be measured for ttft_p50_ms, ttft_p99_ms, requests_per_s: .* "
                                        r"concurrency 4 \(fitted\) and another \(held out\)"):
        uncertainty.complete(uncertainty.from_errors(only_fitted))


def test_an_objective_no_layout_meets_is_said_so_and_nothing_is_recommended():
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT),
               goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
    assert a.winner is None and a.ranked == [] and a.over and not any(c.meets for c in a.over)
    over = [c.worst_over for c in a.over]
    assert over == sorted(over)  # the least over first
    words = text.text(a)
    nearest = a.over[0]
    (unmet,) = [ln for ln in words.splitlines() if ln.startswith("No layout meets ITL p50 <= 0.5 ms at every point")]
    assert f"the nearest, {min(a.over, key=lambda c: c.broken[0].worst).layout.label}, reaches" in unmet
    assert "--itl-p50-max MS" in unmet
    assert "No recommendation: no layout predicted in full meets every objective (ITL p50 <= 0.5 ms)" in words
    assert "Top " not in words  # nothing is ranked
    assert (f"Breaking an objective, not ranked: {len(a.over)} of the {len(a.over)} predicted in full, the least "
            f"over first: {nearest.layout.label} (ITL p50") in words
    assert json.loads(text.to_json(a))["unmet_objectives"][0]["objective"] == "ITL p50"


def test_a_refusal_is_shown_by_its_whole_first_sentence_cut_nowhere_inside_it():
    first = ("workers.decode.kvCacheBytes: the gpu-8gb GPU (8.0Gi, 7.2Gi after its 10% reserve; e.g. 3 workers. Or "
             "fewer) leaves 0B of KV pool per worker for 3 workers (each 1.1Gi weights + 1.5Gi overhead), which vLLM "
             'refuses ("To serve at least one request. ...") for its longest sequence, e.g. 2,448 tokens')
    assert len(first) > 160
    assert text._sentence(first + ". vLLM refuses to start. Fix: run fewer workers") == first + " ..."
    assert text._sentence(first) == first  # one sentence: all of it


def test_layouts_breaking_an_objective_are_listed_apart_with_which_one_and_by_how_much():
    # A TTFT p99 objective: separated layouts' first tokens wait for a KV transfer (over 150 ms of
    # p99 here), aggregated ones' do not (under 100 ms).
    a = advise(data=small_lab(), traffic=point(2, 2, output_tokens=SHORT),
               goal=inputs.Goal("goodput", (Objective("ttft", 99, 120.0),)))
    assert a.ranked and a.over
    assert all(r.ttft_p99_ms <= 120 for c in a.ranked for r in c.rows)
    assert all(max(r.ttft_p99_ms for r in c.rows) > 120 for c in a.over)
    assert a.winner is a.ranked[0]  # exit 0: a layout meeting the objectives is first
    lines = text.text(a).splitlines()
    top = lines.index(f"Top {min(3, len(a.ranked))} meeting every objective, estimates:")
    table = lines[top + 1:lines.index("", top)]
    shown = len(a.ranked[:3])
    assert [row.split("  ")[0] for row in table[2:2 + shown]] == [str(i + 1) for i in range(shown)]
    assert not any(c.layout.label in row for c in a.over for row in table)
    apart = next(ln for ln in lines if ln.startswith("Breaking an objective, not ranked: "))
    first = a.over[0].broken[0]
    assert f"{len(a.over)} of the {len(a.ranked) + len(a.over)} predicted in full" in apart
    assert (f"{a.over[0].layout.label} (TTFT p99 {first.worst:,.0f} ms at prefix types 2, concurrency 2, over the "
            f"120 ms objective by {first.over - 1:.0%})") in apart
    # Over the bound by less than a millisecond shows the decimals that say so.
    assert search._digits(120.4, 120) == 1 and search._digits(331.2, 120) == 0
    over_family = next(ln for ln in lines if ln.startswith(f"- {ONE_NODE_24}"))
    assert "dropped, not ranked: it breaks TTFT p99" in over_family and "(rank" not in over_family
    as_json = json.loads(text.to_json(a))
    assert as_json["ranked"] == [c.layout.label for c in a.ranked]
    assert as_json["breaking_objectives"] == [c.layout.label for c in a.over]
    assert as_json["goal"]["objectives"] == [{"metric": "ttft", "percentile": 99, "bound_ms": 120.0,
                                              "flag": "--ttft-p99-max"}]


def test_goodput_is_never_above_throughput_and_the_layout_ranked_first_has_the_most_of_it():
    a = advise(data=small_lab(), traffic=point(7, 4, output_tokens=SHORT))
    for c in a.ranked + a.over:
        for r in c.rows:
            assert 0 <= r.goodput_requests_per_s <= r.requests_per_s + 1e-9 and 0 <= r.attainment <= 1
    fits = [c for c in a.ranked if not c.preempting]
    assert fits[0].score == max(c.score for c in fits)
    assert a.winner.gpus >= 1


def test_a_layout_that_runs_only_by_preempting_is_marked_and_ranks_after_those_that_do_not():
    a = advise(data=small_lab(), traffic=point(24, 8, output_tokens=SHORT),
               goal=inputs.Goal("goodput", (Objective("ttft", 99, 1e6),)))
    preempting = [c for c in a.ranked if c.preempting]
    fits = [c for c in a.ranked if not c.preempting]
    if preempting and fits:
        assert max(a.ranked.index(c) for c in fits) < min(a.ranked.index(c) for c in preempting)
    for c in a.ranked + a.over:
        assert c.preempting == any(r.preemptions > 0.01 * r.requests for r in c.rows)
        if c.preempting:
            line = next(ln for ln in text.text(a).splitlines() if c.layout.label in ln and ln.startswith("- "))
            assert "it runs only by preempting" in line


def test_an_open_loop_ranks_by_goodput_at_each_rate_and_says_who_falls_behind():
    # --rate: requests arrive at R/s whatever a layout does (a closed loop lets a slow layout send
    # fewer); 12/s is more than a layout sending each request's KV over the 1 Gbit/s link completes.
    w = Traffic(2371, 2000, SHORT, (2,), (4,), given=True, rates=(1.0, 12.0))
    a = advise(data=ONE_GPU_EACH, traffic=w)
    words = text.text(a)
    lines = words.splitlines()
    assert ("prefix types 2 x open loop at 1, 12 requests/s (Poisson arrivals; sized for concurrency 4): 2 points"
            in words)
    at = lines.index("At each point (prefix types x requests/s arriving), estimates:")
    assert lines[at + 1].split() == ["rank", "figure", "2x1/s", "2x12/s"]
    behind = [c for c in a.ranked + a.over if any(r.keeps_up is False for r in c.rows)]
    kept = [c for c in a.ranked + a.over if all(r.keeps_up for r in c.rows)]
    assert behind and kept
    for fam in a.families:
        best = fam.refined[0]
        line = next(ln for ln in lines if ln.startswith(f"- {fam.name}:"))
        slow = best.rows[1]
        said = (f"it falls behind the arrivals (at prefix types 2, 12 requests/s open loop it completes "
                f"{slow.completion_ratio:.0%} of them)")
        assert (said in line) == (slow.keeps_up is False), line
        assert "1 requests/s open loop it completes" not in line  # every layout keeps up at 1/s
    assert ("The recommendation falls behind" in words) == any(r.keeps_up is False for r in a.winner.rows)
    as_json = json.loads(text.to_json(a))
    assert as_json["workload"]["open_loop"] is True
    assert as_json["workload"]["points"] == [{"prefix_types": 2, "concurrency": 0, "rate": 1.0},
                                             {"prefix_types": 2, "concurrency": 0, "rate": 12.0}]
    by_label = {c["layout"]: c for c in as_json["candidates"]}
    for c in behind + kept:
        assert [p["keeps_up"] for p in by_label[c.layout.label]["points"]] == [r.keeps_up for r in c.rows]


def test_a_layout_whose_kv_does_not_fit_says_how_often_and_where():
    # At concurrency 32 one 8GB GPU's prefill and decode workers share a pool too small for every
    # request in flight: vLLM preempts (frees a running request's blocks, recomputes it later). The
    # laptop's node alone, 2 GPU units: one layout that fits and two that preempt, 3 to search (with
    # the 24GB node beside it, 10: 1.4 s of CPU against 0.3 s).
    a = advise(data=with_nodes(gpu_node("gpu-laptop", 8192, 2, 15.4)), traffic=point(2, 32))
    shown = a.ranked + a.over
    preempting = [c for c in shown if c.preemptions]
    assert preempting and any(not c.preemptions for c in shown)
    as_json = json.loads(text.to_json(a))
    by_label = {c["layout"]: c for c in as_json["candidates"]}
    for c in shown:
        mine = by_label[c.layout.label]
        assert mine["preemptions"] == sum(r.preemptions for r in c.rows) == sum(
            p["preemptions"] for p in mine["points"])
        if not mine["preemptions"]:
            assert mine["kv_overflow"] is None
            continue
        worst = max((w for r in c.rows for w in r.workers), key=lambda w: w.preemptions)
        assert mine["kv_overflow"]["worker"] == worst.name and mine["kv_overflow"]["runs"] == 1
    lines = text.text(a).splitlines()
    for fam in a.families:
        best = fam.refined[0]
        line = next(ln for ln in lines if ln.startswith(f"- {fam.name}:"))
        n = best.preemptions
        assert (f"its KV does not always fit: {n:,} preemption" in line) == bool(n), line
    if a.ranked:
        table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Top ")) + 1]
        assert ("preempted" in table.split()) == any(c.preemptions for c in a.ranked[:3])


def test_a_recommendation_that_falls_behind_says_so_and_whether_another_keeps_up():
    # At 200/s every layout of a one-GPU-per-node lab falls behind: the verdict says so. Requests of
    # SHORT output tokens: at 64 and 50/s the same verdict took 1.2 s of CPU, at 8 and 200/s 0.3 s.
    w = Traffic(2371, 2000, SHORT, (2,), (4,), given=True, rates=(1.0, 200.0))
    a = advise(data=ONE_GPU_EACH, traffic=w)
    assert a.ranked and all(c.rows[1].keeps_up is False for c in a.ranked)
    assert ("The recommendation falls behind the arrivals at prefix types 2, 200 requests/s open loop; none of the "
            "layouts ranked keeps up at every point: lower the --rate, or add GPUs.") in text.text(a)


def test_a_layout_that_runs_only_by_preempting_is_never_recommended_nor_written_as_if_it_were(monkeypatch, tmp_path):
    # Every layout preempting (as where no layout's KV fits the load): the first meeting the objectives
    # was printed "Recommended" and written as "the layout it predicted best", its figures resting on
    # requests recomputed from their first token.
    monkeypatch.setattr(search.Candidate, "preempting", property(lambda c: True))
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    assert a.winner is not None and a.recommended is None
    line = verdict_line(a)
    assert line.startswith(f"First, not recommended: {a.winner.layout.label}: ") and "Recommended" not in line
    assert "runs only by preempting" in line and "--write writes it" in line
    as_json = json.loads(text.to_json(a))
    assert as_json["recommended"] is None and as_json["first"] == a.winner.layout.label
    assert "not a recommendation: it runs only by preempting" in text.written("Pulumi.advised.yaml", a, None)
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, base(), small_lab())
    assert "not a recommendation: it runs only by preempting" in " ".join(
        ln.lstrip("# ") for ln in path.read_text().splitlines() if ln.startswith("#"))


def test_every_layout_within_the_uncertainty_of_the_first_is_said_to_tie_with_it_wherever_it_is_named():
    # The separation line said "They tie here" of the best separated layout, ranked third, while its
    # family's line called it "dropped (rank 3): goodput 46% lower than the recommendation's", with
    # no recommendation made: two ways of asking, two answers.
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    a.uncertainty = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(
        1.0, 1.0, 100.0, 100.0, 16)})  # every lead within it
    assert len(a.ranked) > 2 and a.tied == a.ranked[1:]
    words = text.text(a)
    assert "recommendation's" not in words and "dropped (rank" not in words
    verdict = verdict_line(a)
    assert all(c.layout.label in verdict for c in a.ranked)
    assert a.separation.answer == "ties"
    for fam in a.families:
        if fam.best in a.ranked[1:]:
            line = next(ln for ln in words.splitlines() if ln.startswith(f"- {fam.name}:"))
            assert f"kept, tied with the first within the uncertainty (rank {a.ranked.index(fam.best) + 1})" in line
    as_json = json.loads(text.to_json(a))
    assert as_json["tie"]["all"] == [c.layout.label for c in a.ranked]


def test_one_output_token_a_request_ranks_without_decode_figures_and_says_none():
    # --output-tokens 1: no gap between tokens, so no ITL or TPOT anywhere (not 0 ms, and not the
    # geometric mean's floor of 1e-9 ms in --json); the ITL objective bounds nothing.
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=1))
    assert a.winner is not None and all(c.meets for c in a.ranked)
    for c in a.ranked + a.over:
        assert c.mean("itl_p99_ms") is None and c.mean("tpot_p50_ms") is None
    words = text.text(a)
    assert "ms, no ITL or TPOT (one output token a request: no gap between tokens)" in words
    assert " 0.0 " not in words and " - ms" not in words
    as_json = json.loads(text.to_json(a))
    best = next(c for c in as_json["candidates"] if c["layout"] == a.winner.layout.label)
    assert best["means"]["itl_p99_ms"] is None and best["means"]["tpot_p50_ms"] is None
    assert all(p["itl_p99_ms"] is None for p in best["points"])


def test_the_layouts_breaking_an_objective_are_listed_in_the_order_the_words_say(monkeypatch):
    # Those running only by preempting come after the rest (the verdict's order), which the list called
    # "the least over first": the lab's default search listed 91%, 831%, then 57% (that one preempting).
    from dynamo_lab.advise.candidates import AGGREGATED

    monkeypatch.setattr(search.Candidate, "preempting", property(lambda c: c.layout.kind == AGGREGATED))
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT),
               goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
    assert any(c.preempting for c in a.over) and any(not c.preempting for c in a.over)
    apart = next(ln for ln in text.text(a, top=len(a.over)).splitlines() if ln.startswith("Breaking an objective"))
    assert "the least over first, those running only by preempting after the rest:" in apart
    for c in a.over:
        at = apart.index(c.layout.label + " (")
        entry = apart[at:apart.index(")", at)]  # LABEL (what it breaks[; runs only by preempting])
        assert entry.endswith("; runs only by preempting") == c.preempting, entry


def test_a_layouts_standing_says_which_objectives_it_meets_only_within_the_predictors_error():
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    w = a.winner
    worst = max(r.ttft_p99_ms for r in w.rows)
    held_out = a.uncertainty.metrics["ttft_p99_ms"].holdout_median  # FIXED: 20%
    a.goal = inputs.Goal("goodput", (Objective("ttft", 99, worst * (1 + held_out / 2)),))
    (near,) = a.standing(w).near
    assert near.startswith(f"TTFT p99 {worst:,.0f} ms against its") and f"{held_out:.0%} error" in near
    assert f"It meets {near}: measure it before relying on it." in verdict_line(a)
    a.goal = inputs.Goal("goodput", (Objective("ttft", 99, worst * (1 + 2 * held_out)),))
    assert a.standing(w).near == ()
    # ITL was never measured: its bound is taken as exact, however close.
    a.goal = inputs.Goal("goodput", (Objective("itl", 99, max(r.itl_p99_ms for r in w.rows) * 1.01),))
    assert a.standing(w).near == ()


def test_a_gpu_binds_as_time_slices_only_where_workers_share_it():
    # A GPU busiest with one worker on it is that worker's GPU time: "time-slices, shared by 1
    # worker" named a contention that was not there (1 agg on gpu-24gb + 1 agg on gpu-8gb, whose
    # gpu-8gb GPU binds, each GPU running one worker).
    a = advise(data=small_lab(), traffic=point(2, 8, output_tokens=SHORT))
    bound = [c for c in a.candidates if c.rows and c.binding and c.binding.resource.startswith("GPU time")]
    alone = [c for c in bound if "its one worker's" in c.binding.detail]
    assert alone and all(c.binding.resource == "GPU time" for c in alone), [c.binding for c in bound]
    for c in bound:
        shared = re.search(r"shared by (\d+) workers", c.binding.detail)
        assert (c.binding.resource == "GPU time-slices") == bool(shared), c.binding
        assert not shared or int(shared[1]) >= 2, c.binding
