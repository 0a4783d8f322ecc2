"""`dynamo-lab advise` (fast tier): what it searches, what it refuses and why, what it writes.

The figures here come from a cheap search (one simulated run per point); the slow tier
(test_advise_slow.py) checks the rankings with the predictor's full estimate.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from dynamo_lab import stack_files
from dynamo_lab.advise import candidates, inputs, search, stack_file, text, uncertainty, write
from dynamo_lab.advise.traffic import Point, Traffic
from dynamo_lab.predict.cells import Error
from dynamo_lab.predict.objectives import DEFAULT_OBJECTIVES, METRICS, PERCENTILES, Objective
from dynamo_lab.preflight.run import check
from infra.errors import ConfigError, UserError
from infra.plan import load_stack
from tests.helpers import ROOT, run_cli
from tests.lab.advise.common import CHEAP, FIXED, LAB, advise, base, family, gpu_node, point, small_lab, with_nodes

ONE_NODE_24 = "prefill/decode on gpu-24gb's node"


def _cfg(config=None):
    return load_stack("kv-routing", *stack_files.config_from_doc(config or base())).config


def test_the_lab_offers_both_classes_and_the_search_covers_every_family_within_their_units():
    nodes, left_out = candidates.class_nodes(_cfg(), LAB)
    assert [(n.gpu_class, n.node, n.units, n.searched) for n in nodes] == [
        ("gpu-24gb", "gpu-server", 4, 4), ("gpu-8gb", "gpu-laptop", 4, 4)]
    assert left_out == []
    layouts = candidates.layouts(nodes)
    by_family: dict[str, int] = {}
    for layout in layouts:
        by_family[layout.family] = by_family.get(layout.family, 0) + 1
    # aggregated: 5 x 5 - 1 mixes; one node: p + d <= 4; across: 4 x 4 each way
    assert by_family == {"aggregated, KV routing": 24, ONE_NODE_24: 6, "prefill/decode on gpu-8gb's node": 6,
                         "prefill on gpu-24gb -> decode on gpu-8gb": 16, "prefill on gpu-8gb -> decode on gpu-24gb": 16}
    assert len({layout.label for layout in layouts}) == len(layouts) == 68
    for layout in layouts:
        per_class: dict[str, int] = {}
        for g in layout.groups:
            assert g.replicas >= 1
            per_class[g.gpu_class] = per_class.get(g.gpu_class, 0) + g.replicas
        assert max(per_class.values()) <= 4  # never more workers than GPU units: the rest would stay Pending


def test_the_search_is_bounded_on_a_node_with_many_gpu_units():
    nodes, _ = candidates.class_nodes(_cfg(), with_nodes(gpu_node("big", 81920, 16, 512)))
    assert [(n.gpu_class, n.units, n.searched) for n in nodes] == [("gpu-24gb", 16, candidates.MAX_REPLICAS_PER_CLASS)]


def test_a_class_whose_node_is_cordoned_or_has_no_gpu_units_is_left_out_with_the_reason():
    cordoned = gpu_node("gpu-server", 24576, 4, 64)
    cordoned = type(cordoned)(cordoned.name, cordoned.labels, cordoned.allocatable, unschedulable=True)
    no_units = gpu_node("gpu-laptop", 8192, 0, 16)
    nodes, left_out = candidates.class_nodes(_cfg(), with_nodes(cordoned, no_units))
    assert nodes == []
    assert left_out == ["gpu-24gb: node gpu-server is cordoned",
                        "gpu-8gb: node gpu-laptop advertises no nvidia.com/gpu"]
    with pytest.raises(UserError, match=r"no GPU class of kv-routing has a node .*cordoned.*preflight kv-routing"):
        advise(data=with_nodes(cordoned, no_units), traffic=point(2, 4))


def test_each_refusal_names_the_check_and_the_key_and_every_kept_layout_passes_sizing_and_preflight():
    # The laptop node with 9 GiB of host memory: each disaggregated worker's KV mirror needs more there.
    data = with_nodes(gpu_node("gpu-server", 24576, 4, 64), gpu_node("gpu-laptop", 8192, 4, 9))
    a = advise(data=data, traffic=point(2, 4))
    statuses = {c.layout.label: c for c in a.candidates}
    sized_out = statuses["3 agg on gpu-8gb"]
    assert sized_out.status == search.REFUSED_CONFIG
    assert sized_out.reason.startswith("workers.worker-8gb.kvCacheBytes: the gpu-8gb GPU")
    memory_out = statuses["1 prefill on gpu-8gb -> 1 decode on gpu-24gb"]
    assert memory_out.status == search.REFUSED_PREFLIGHT
    assert memory_out.reason.startswith("node gpu-laptop: memory: needs")
    for c in a.candidates:
        raw, secrets = stack_files.config_from_doc(c.config)
        if c.status == search.REFUSED_CONFIG:
            with pytest.raises(ConfigError):
                load_stack("advised", raw, secrets)
            continue
        report = check(load_stack("advised", raw, secrets), data)
        assert report.fits == (c.status != search.REFUSED_PREFLIGHT), (c.layout.label, c.reason)
    # The families say how many of theirs each check refused.
    fam = family(a, "prefill on gpu-8gb -> decode on gpu-24gb")
    assert len(fam.refused_preflight) >= 1 and fam.looked_at == 16
    words = text.text(a)
    assert "refused by preflight (e.g. 1 prefill on gpu-8gb -> 1 decode on gpu-24gb: node gpu-laptop: memory" in words
    # A long refusal is shown by its whole first sentence, never cut inside a word ("1.5Gi ove ...").
    first = family(a, "prefill/decode on gpu-8gb's node").refused_config[0]
    line = next(ln for ln in words.splitlines() if ln.startswith("- prefill/decode on gpu-8gb's node"))
    shown = line.split(f"(e.g. {first.layout.label}: ", 1)[1].split(" ...)", 1)[0]
    reason = first.reason
    assert len(shown) > 160 and reason.startswith(shown) and reason[len(shown):].startswith(". ")
    assert "1.5Gi overhead)" in shown


def test_a_candidate_is_the_base_stack_file_with_its_workers_replaced_and_no_secret():
    config = base("same-server")
    config["dynamo-lab:hfToken"] = {"secure": "v1:abc"}
    config["dynamo-lab:graph"] = {"networkPolicy": True}
    layout = candidates.Layout(candidates.AGGREGATED, (candidates.Group("worker-24gb", "agg", "gpu-24gb", 2),))
    out = stack_file.candidate_config(config, layout, inputs.traffic_of(_cfg()))
    assert out["dynamo-lab:workers"] == [{"name": "worker-24gb", "role": "agg", "replicas": 2, "gpuClass": "gpu-24gb"}]
    assert "dynamo-lab:hfToken" not in out
    assert {k: v for k, v in out.items() if k != "dynamo-lab:workers"} == {
        k: v for k, v in config.items() if k not in ("dynamo-lab:workers", "dynamo-lab:hfToken")}


def test_a_given_workload_sets_the_workload_sized_for_and_the_benchmark_matrix():
    config = base()
    config["dynamo-lab:benchmark"] = {"runs": 5, "uniqueTokens": 100}
    layout = candidates.Layout(candidates.AGGREGATED, (candidates.Group("worker-24gb", "agg", "gpu-24gb", 1),))
    w = Traffic(16384, 1000, 128, (1, 4), (2, 8), given=True)
    out = stack_file.candidate_config(config, layout, w)
    assert out["dynamo-lab:workload"] == {"inputTokens": 16384, "prefixTokens": 1000, "outputTokens": 128,
                                          "prefixTypes": 4, "concurrency": 8}
    # The benchmark's own request shape is dropped: it follows the workload; its other keys stay.
    assert out["dynamo-lab:benchmark"] == {"runs": 5, "prefixTypes": [1, 4], "concurrency": [2, 8]}
    cfg = load_stack("advised", *stack_files.config_from_doc(out)).config
    assert (cfg.benchmark.prefix_tokens, cfg.benchmark.unique_tokens, cfg.benchmark.output_tokens) == (
        1000, 15384, 128)


def test_by_default_the_workload_is_the_base_stacks_benchmark_section():
    w = inputs.traffic_of(_cfg())
    assert (w.input_tokens, w.prefix_tokens, w.output_tokens, w.prefix_types, w.concurrency, w.given) == (
        2371, 2000, 64, (2, 7, 12, 24), (4, 8), False)
    assert len(w.points) == 8


def _fake(label: str, score: float) -> search.Candidate:
    c = search.Candidate(candidates.Layout(candidates.AGGREGATED, (candidates.Group(label, "agg", "gpu-24gb", 1),)), {})
    c.score = score
    return c


@pytest.mark.parametrize(("first", "second", "tie"), [
    (10.0, 9.6, True),  # 4% more goodput: within the 5% held-out median error of requests/s
    (10.0, 9.0, False),  # 11% more: beyond it
])
def test_the_best_two_tie_within_the_held_out_median_error_of_requests_per_s(first, second, tie):
    from tests.lab.advise.common import FIXED

    fixed = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(0.05, 0.1, 0.05,
                                                                                                  0.2, 16)})
    ranked = [_fake("a", first), _fake("b", second)]
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
    a = advise(data=small_lab(), traffic=point(2, 4))
    words = text.text(a)
    assert words.startswith("ESTIMATES, not measurements")
    assert "fitted to one lab's published table" in words
    assert "Top 3 meeting every objective, estimates" in words
    assert ("Recommended (an estimate)" in words) != ("Tied within the uncertainty" in words)
    as_json = yaml.safe_load(text.to_json(a))
    assert as_json["estimate"] is True and as_json["note"].startswith("ESTIMATES")
    assert all(c["estimate"] for c in as_json["candidates"] if "means" in c)
    # The count it gives is the families it lists, a line each (the lab's two classes make 5).
    families = [ln for ln in words.splitlines() if ln.startswith("- ")]
    assert len(families) == len(a.families) == 5
    assert f"layouts as stack advised ({len(families)} families, each a line below" in words


def _doc_families() -> tuple[list[str], str]:
    """docs/advise.md's family table (its first column) and the page's text."""
    page = (ROOT / "docs" / "advise.md").read_text()
    section = page.split("## What it searches", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")][2:]  # past the head and its rule
    return [row.split("|")[1].strip() for row in rows], section


def test_the_docs_family_table_lists_exactly_the_families_the_search_makes():
    nodes, _ = candidates.class_nodes(_cfg(), LAB)
    made = {layout.family for layout in candidates.layouts(nodes)}
    rows, section = _doc_families()
    assert len(rows) == len(candidates.FAMILIES)
    classes = [n.gpu_class for n in nodes]
    # A row names classes A and B: one family per class (A), or per ordered pair of classes (A and B).
    documented = set()
    for row in rows:
        pairs = ([(a, b) for a in classes for b in classes if a != b] if re.search(r"\bB\b", row) else
                 [(a, "") for a in classes] if re.search(r"\bA\b", row) else [("", "")])
        documented |= {re.sub(r"\bB\b", b, re.sub(r"\bA\b", a, row)) for a, b in pairs}
    assert documented == made
    assert f"that is {len(made)} families" in section
    assert not re.search(r"\b(three|four|five) families\b", section, re.IGNORECASE)


def test_the_written_file_loads_sizes_and_passes_preflight_from_its_own_text(tmp_path):
    config = base()
    config["dynamo-lab:hfToken"] = {"secure": "v1:abc"}
    a = advise(config, data=small_lab(), traffic=point(2, 4), name="advised")
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, config, small_lab())
    written = path.read_text()
    assert written.startswith("# Written by `dynamo-lab advise kv-routing`")
    assert "ESTIMATES" in written and "hfToken" in written and "v1:abc" not in written
    stack = stack_files.load("advised", tmp_path)
    assert stack.config.graph.namespace == "dynamo-lab-advised"
    assert [g.model_dump(by_alias=True, include={"name", "role", "replicas", "gpu_class"}) for g in
            stack.config.workers] == a.winner.layout.workers()
    assert check(stack, small_lab()).fits


def test_write_refuses_a_name_pulumi_would_not_read_a_file_that_exists_and_the_files_it_must_not_replace(tmp_path):
    with pytest.raises(UserError, match=r"name it Pulumi.<stack>.yaml"):
        write.stack_name(str(tmp_path / "advised.yaml"))
    existing = tmp_path / "Pulumi.kept.yaml"
    existing.write_text("config: {}\n")
    with pytest.raises(UserError, match="the file exists and is left as it is"):
        write.refuse_existing(existing, False, "kv-routing")
    assert existing.read_text() == "config: {}\n"
    write.refuse_existing(existing, True, "kv-routing")  # --force replaces it
    with pytest.raises(UserError, match="that is mine's own file, the base: its secrets are encrypted for it"):
        write.refuse_existing(tmp_path / "Pulumi.mine.yaml", True, "mine")
    with pytest.raises(UserError, match="same-server is one of the lab's stacks"):
        write.refuse_existing(tmp_path / "Pulumi.same-server.yaml", True, "kv-routing")
    # Only into the project's directory, where Pulumi reads stack files; a bare name goes there.
    assert write.target("Pulumi.a.yaml", tmp_path) == tmp_path / "Pulumi.a.yaml"
    assert write.target(str(tmp_path / "Pulumi.a.yaml"), tmp_path) == tmp_path / "Pulumi.a.yaml"
    with pytest.raises(UserError, match=f"write the stack file into the project's directory, {tmp_path}"):
        write.target(str(tmp_path / "sub" / "Pulumi.a.yaml"), tmp_path)


def test_write_refuses_a_directory_it_cannot_write_in_with_one_line_and_writes_nothing(tmp_path):
    a = advise(data=small_lab(), traffic=point(2, 4))
    gone = tmp_path / "gone"  # removed after the search, as a directory can be; root could write a read-only one
    with pytest.raises(UserError, match=f"--write Pulumi.advised.yaml: {gone} is not writable by this user"):
        write.write(gone / "Pulumi.advised.yaml", a, a.winner, base(), small_lab())
    assert not gone.exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--write", "advised.yaml"], "name it Pulumi.<stack>.yaml"),
    (["--force"], "--force replaces the file --write names"),
    (["--write", "Pulumi.cross-server.yaml"], "the file exists and is left as it is"),
    (["--write", "Pulumi.same-server.yaml", "--force"], "same-server is one of the lab's stacks"),
    (["--write", "Pulumi.kv-routing.yaml", "--force"], "that is kv-routing's own file, the base"),
    (["--write", "/tmp/Pulumi.elsewhere.yaml"], "write the stack file into the project's directory"),
    (["--concurrency", "65"], "concurrency 65 is more than advise simulates (64"),
    (["--rate", "2,1500"], "--rate 1500 requests/s is more than advise simulates (1000/s)"),
    # Each point is simulated for every layout: 9 rates x the benchmark's 4 prefix types is 36.
    (["--rate", "1,2,3,4,5,6,7,8,9"], "36 points is more than advise simulates (32"),
    # With --rate the concurrency is only what layouts are sized for, and the refusal says so.
    (["--rate", "2", "--concurrency", "100"], "with --rate, --concurrency is what each layout is sized for"),
    # The goals that meant something else are refused, naming what replaces them.
    (["--goal", "requests-per-s"], "--goal: 'requests-per-s': advise ranks by goodput now"),
    (["--goal", "ttft-p50"], "bound it with --ttft-p50-max MS"),
    (["--itl-p99-max", "0"], "--itl-p99-max"),
    (["--prefix-tokens", "3000"], "the shared prefix (3,000 tokens"),
    (["--input-tokens", "1000"], "is not less than the input (1,000"),
    # Longer than the model's context: no layout could serve it, so it is the input to fix.
    (["--output-tokens", "50000"], "no layout can serve the workload given (--input-tokens is workload.inputTokens"),
])
def test_bad_arguments_are_refused_before_anything_is_read_or_written(args, says):
    before = {p.name: p.read_bytes() for p in ROOT.glob("Pulumi.*.yaml")}
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", *args)
    assert result.returncode == 2, result
    assert says in result.stderr and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in ROOT.glob("Pulumi.*.yaml")} == before
    assert result.stdout == ""


def test_the_goal_choices_are_the_searchs_and_each_objective_has_its_flag():
    from dynamo_lab.cli import parser

    advise_parser = parser()._subparsers._group_actions[0].choices["advise"]
    goal = next(a for a in advise_parser._actions if a.dest == "goal")
    assert goal.metavar == "{" + ",".join(inputs.GOALS) + "}"  # the retired two are not offered
    for name in inputs.GOALS:
        assert advise_parser.parse_args(["kv-routing", "--goal", name]).goal == name
    flags = {o for a in advise_parser._actions for o in a.option_strings}
    assert {Objective(m, q, 1.0).flag for m in METRICS for q in PERCENTILES} <= flags


def test_a_flag_replaces_its_metrics_default_objective_and_keeps_the_others():
    assert inputs.objectives_given({}) == DEFAULT_OBJECTIVES
    given = inputs.objectives_given({"ttft_p50": 300.0, "ttft_p99": None, "tpot_p99": 40.0})
    assert Objective("ttft", 50, 300.0) in given and Objective("tpot", 99, 40.0) in given
    assert not any(o.metric == "ttft" and o.percentile == 99 for o in given)  # TTFT is bounded by the flag
    assert [o for o in given if o.metric == "itl"] == [o for o in DEFAULT_OBJECTIVES if o.metric == "itl"]
    # --ttft-p99-max means what it meant: TTFT p99 at most MS at every point.
    assert inputs.objectives_given({"ttft_p99": 300.0})[-1] == Objective("ttft", 99, 300.0)


def test_a_missing_cluster_file_is_one_line_and_exit_2(tmp_path):
    result = run_cli("advise", "kv-routing", "--from", str(tmp_path / "none.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_no_layout_fits_a_cluster_without_room_and_the_families_say_why():
    data = with_nodes(gpu_node("gpu-server", 24576, 4, 2), gpu_node("gpu-laptop", 8192, 4, 2))
    a = advise(data=data, traffic=point(2, 4))
    assert a.winner is None and a.ranked == []
    words = text.text(a)
    assert "No layout passes the sizing and preflight on this cluster" in words
    assert "Dropped: none of its layouts passes the sizing and preflight" in words


def test_a_layout_under_no_pressure_is_not_said_to_be_bound_by_anything():
    # A request every two seconds (open loop), each served in a fraction of that: no GPU, path or node
    # is half used. (One request at a time back to back is not that: vLLM's async scheduling keeps a
    # lone request's GPU busy for most of each decode step, the host preparing the next meanwhile.)
    a = advise(traffic=dataclasses.replace(point(2, 1), rates=(0.5,)))
    best = a.winner
    assert best.binding.level < text.NEAR_LIMIT
    assert f"nothing is near its limit (the most used: {best.binding.resource}" in text.text(a)
    assert "binds: " not in next(ln for ln in text.text(a).splitlines() if ln.startswith("- aggregated"))


def test_without_the_labs_stacks_to_measure_its_error_advise_stops_and_says_why(tmp_path):
    (tmp_path / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.mine.yaml").write_bytes((ROOT / "Pulumi.kv-routing.yaml").read_bytes())
    result = run_cli("advise", "mine", "--from", str(ROOT / "tests" / "data" / "preflight" / "lab.json"),
                     "--write", "Pulumi.advised.yaml", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "measures with the lab's own stacks, kv-routing and same-server" in result.stderr
    assert "no stack file Pulumi.kv-routing.yaml" in result.stderr
    assert not (tmp_path / "Pulumi.advised.yaml").exists()


def test_over_several_points_each_shown_layout_has_its_figure_at_every_point():
    w = Traffic(2371, 2000, 64, (2, 24), (4,), given=True)
    a = advise(data=small_lab(), traffic=w)
    lines = text.text(a).splitlines()
    at = lines.index("At each point (prefix types x concurrency), estimates:")
    assert lines[at + 1].split() == ["rank", "figure", "2x4", "24x4"]
    first, itl = lines[at + 3], lines[at + 4]
    assert first.split()[:3] == ["1", "goodput,", "req/s"]
    assert [float(v) for v in first.split()[3:]] == [round(r.goodput_requests_per_s, 1) for r in a.ranked[0].rows]
    assert [float(v) for v in itl.split()[3:]] == [round(r.itl_p99_ms, 1) for r in a.ranked[0].rows]


def test_a_family_refused_whole_by_a_base_setting_says_it_was_not_compared_and_which_setting():
    config = base("cross-server")
    config["dynamo-lab:probe"] = {"enabled": True}  # the probe measures a prefill -> decode path
    a = advise(config, data=small_lab(), traffic=point(2, 4), base_name="cross-server")
    assert a.winner.layout.kind != "aggregated"
    words = text.text(a)
    assert ("Not compared: aggregated, KV routing: every layout of it is refused by cross-server's `probe.enabled`, "
            "a setting of the base stack") in words
    assert "All for the base stack's `probe.enabled`, not their workers" in words
    # A family refused for its layouts' own reasons (each 8GB worker's pool, or the laptop's memory) is not
    # said to be the base's doing.
    small = advise(data=with_nodes(gpu_node("gpu-server", 24576, 4, 64), gpu_node("gpu-laptop", 8192, 4, 5)),
                   traffic=point(2, 4))
    for name in ("prefill/decode on gpu-8gb's node", "prefill on gpu-8gb -> decode on gpu-24gb"):
        fam = family(small, name)
        assert fam.best is None and text.base_setting(fam) is None


def test_an_error_table_without_held_out_cells_is_refused_with_the_reason():
    only_fitted = [Error("kv-routing", p, 4, m, 100, 110) for p in (2, 7) for m in uncertainty.METRICS]
    with pytest.raises(UserError, match=r"could not be measured for ttft_p50_ms, ttft_p99_ms, requests_per_s: .* "
                                        r"concurrency 4 \(fitted\) and another \(held out\)"):
        uncertainty.complete(uncertainty.from_errors(only_fitted))


def test_an_objective_no_layout_meets_is_said_so_and_nothing_is_recommended():
    a = advise(data=small_lab(), traffic=point(2, 4), goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
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
    assert yaml.safe_load(text.to_json(a))["unmet_objectives"][0]["objective"] == "ITL p50"


def test_a_search_larger_than_the_bound_keeps_layouts_of_at_most_the_requests_in_flight():
    # Three classes of 8 units: 603 layouts (refused over 400 before issue 34); now bounded to
    # layouts of at most 2 workers at concurrency 2, screened at the heaviest point first.
    classes = {c: {"memory": "24564Mi", "effectiveTflops": 40, "memoryBandwidth": "936G", "peakTflops": 71,
                   "nodeSelector": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [f"n-{c}"]}]}
               for c in ("a", "b", "c")}
    config = base()
    config["dynamo-lab:gpuClasses"] = classes
    config["dynamo-lab:workers"] = [{"name": "w", "role": "agg", "replicas": 1, "gpuClass": "a"}]
    data = with_nodes(*(gpu_node(f"n-{c}", 24576, 8, 256) for c in classes))
    assert len(candidates.layouts(candidates.class_nodes(_cfg(config), data)[0])) == 603
    a = advise(config, data=data, traffic=point(2, 2))
    assert a.bounded == 2 and max(c.layout.workers_count for c in a.candidates) == 2
    assert len(a.candidates) <= search.MAX_LAYOUTS and a.refined_per_family == search.BOUNDED_REFINED
    shortlisted = [c for c in a.candidates if c.status in (search.SCREENED, search.REFINED)]
    assert a.shortlisted == len(shortlisted) <= search.SHORTLIST * len(a.families)
    assert "over 400 layouts, so at most 2 workers" in text.text(a)


def test_a_search_whose_screening_would_simulate_too_many_requests_screens_the_heaviest_point_first(monkeypatch):
    monkeypatch.setattr(search, "SCREEN_REQUESTS", 100)  # small_lab, 2 points: 2 x (32 + 64) requests a layout
    a = advise(data=small_lab(), traffic=Traffic(2371, 2000, 64, (2, 24), (4, 8), given=True))
    assert a.bounded is None and 0 < a.shortlisted < len([c for c in a.candidates if c.rows])
    assert [c for c in a.candidates if c.status == search.SCREENED_HEAVIEST]
    words = text.text(a)
    assert "at the heaviest point (prefix types 24, concurrency 8), the best 4 of each family" in words
    assert "over 400 layouts" not in words
    # --json says which precision each figure has and which workload point each is at: a layout screened
    # at the heaviest point alone was labelled "full" and its one point (and what it breaks there) given
    # index 0, the workload's first point.
    as_json = yaml.safe_load(text.to_json(a))
    heaviest = as_json["workload"]["points"].index({"prefix_types": 24, "concurrency": 8, "rate": None})
    by_label = {c["layout"]: c for c in as_json["candidates"]}
    precision = {search.SCREENED_HEAVIEST: "screening at the heaviest point", search.SCREENED: "screening",
                 search.REFINED: "full"}
    for c in a.candidates:
        mine = by_label[c.layout.label]
        if not c.rows:
            assert "precision" not in mine
            continue
        assert mine["precision"] == precision[c.status]
        at = [p["point"] for p in mine["points"]]
        assert at == ([heaviest] if c.status == search.SCREENED_HEAVIEST else list(range(len(a.traffic.points))))
        assert {b["point"] for b in mine["breaks"]} <= set(at)


def test_the_labs_default_search_screens_every_layout_at_every_point():
    b = inputs.read_base("kv-routing")
    accepted = 37  # of its 68 layouts on the lab's cluster
    assert accepted * search.screen_requests(inputs.traffic_of(b.config), b.config) <= search.SCREEN_REQUESTS


def test_a_familys_second_is_predicted_in_full_only_where_the_screening_could_be_wrong():
    def screened(score: float, over: float = 0.0) -> search.Candidate:
        c = _fake("x", score)
        if over:
            c.broken = [search.Broken(Objective("ttft", 99, 100.0), 100.0 * over, 0)]
        return c

    first = screened(10.0)
    assert search.worth_refining(first, screened(9.5))  # 5% behind: within the screening's noise
    assert not search.worth_refining(first, screened(8.0))  # 25% behind
    assert search.worth_refining(first, screened(12.0, over=1.5))  # breaks by less than 2x: might meet in full
    assert not search.worth_refining(first, screened(12.0, over=3.0))
    assert search.worth_refining(screened(1.0, over=4.0), screened(1.0, over=1.2))


def test_a_refusal_is_shown_by_its_whole_first_sentence_cut_nowhere_inside_it():
    first = ("workers.decode.kvCacheBytes: the gpu-8gb GPU (8.0Gi, 7.2Gi after its 10% reserve; e.g. 3 workers. Or "
             "fewer) leaves 0B of KV pool per worker for 3 workers (each 1.1Gi weights + 1.5Gi overhead), which vLLM "
             'refuses ("To serve at least one request. ...") for its longest sequence, e.g. 2,448 tokens')
    assert len(first) > 160
    assert text._sentence(first + ". vLLM refuses to start. Fix: run fewer workers") == first + " ..."
    assert text._sentence(first) == first  # one sentence: all of it


def test_with_no_shared_prefix_each_concurrency_is_one_point_and_the_output_says_why():
    w = Traffic(1000, 0, 64, (2, 7, 12, 24), (1, 2), given=True)
    assert w.points == [Point(1, 1), Point(1, 2)]  # not 8 points of one workload
    keys = stack_file.traffic_keys(w)
    assert keys["benchmark"]["prefixTypes"] == [1] and keys["workload"]["prefixTypes"] == 1
    a = advise(data=small_lab(), traffic=w)
    assert all(len(c.rows) == 2 for c in a.candidates if c.rows)
    words = text.text(a)
    assert ("concurrency 1, 2 (with no shared prefix the prefix types, 2, 7, 12, 24, are one workload: one point "
            "per concurrency): 2 points") in words
    at = words.splitlines().index("At each point (concurrency; no shared prefix), estimates:")
    assert words.splitlines()[at + 1].split() == ["rank", "figure", "1", "2"]
    assert "prefix types 1" not in words


def test_layouts_breaking_an_objective_are_listed_apart_with_which_one_and_by_how_much():
    # A TTFT p99 objective: separated layouts' first tokens wait for a KV transfer (over 150 ms of
    # p99 here), aggregated ones' do not (under 100 ms).
    a = advise(data=small_lab(), traffic=point(2, 2), goal=inputs.Goal("goodput", (Objective("ttft", 99, 120.0),)))
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
    as_json = yaml.safe_load(text.to_json(a))
    assert as_json["ranked"] == [c.layout.label for c in a.ranked]
    assert as_json["breaking_objectives"] == [c.layout.label for c in a.over]
    assert as_json["goal"]["objectives"] == [{"metric": "ttft", "percentile": 99, "bound_ms": 120.0,
                                              "flag": "--ttft-p99-max"}]


def test_goodput_is_never_above_throughput_and_the_layout_ranked_first_has_the_most_of_it():
    a = advise(data=small_lab(), traffic=point(7, 4))
    for c in a.ranked + a.over:
        for r in c.rows:
            assert 0 <= r.goodput_requests_per_s <= r.requests_per_s + 1e-9 and 0 <= r.attainment <= 1
    fits = [c for c in a.ranked if not c.preempting]
    assert fits[0].score == max(c.score for c in fits)
    assert a.winner.gpus >= 1


def test_a_layout_that_runs_only_by_preempting_is_marked_and_ranks_after_those_that_do_not():
    a = advise(data=small_lab(), traffic=point(24, 8), goal=inputs.Goal("goodput", (Objective("ttft", 99, 1e6),)))
    preempting = [c for c in a.ranked if c.preempting]
    fits = [c for c in a.ranked if not c.preempting]
    if preempting and fits:
        assert max(a.ranked.index(c) for c in fits) < min(a.ranked.index(c) for c in preempting)
    for c in a.ranked + a.over:
        assert c.preempting == any(r.preemptions > 0.01 * r.requests for r in c.rows)
        if c.preempting:
            line = next(ln for ln in text.text(a).splitlines() if c.layout.label in ln and ln.startswith("- "))
            assert "it runs only by preempting" in line


def test_the_p99_bound_is_taken_with_the_default_goal(tmp_path):
    # Past the arguments to reading the cluster: --ttft-p99-max is an objective of the default goal.
    result = run_cli("advise", "kv-routing", "--from", str(tmp_path / "none.json"), "--ttft-p99-max", "300")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: dynamo-lab advise: cannot read {tmp_path / 'none.json'}")


def test_the_search_says_what_it_does_as_it_goes(monkeypatch):
    # A default search takes tens of seconds: it says how many layouts it sizes and how many it
    # screens, then how many of each family's best it predicts in full, and in between how far it is.
    monkeypatch.setattr(search, "PROGRESS_S", 0.0)  # every step due, so the in-between lines show too
    said: list[str] = []
    a = search.search(inputs.Base.of("kv-routing", base()), "kv-routing", small_lab(), point(2, 4),
                      inputs.Goal(), FIXED, full=CHEAP, progress=said.append)
    heads = [m.rsplit(" (", 1)[0] for m in said]
    screened = [c for c in a.candidates if c.status in (search.SCREENED, search.REFINED)]
    refined = [c for c in a.candidates if c.status == search.REFINED]
    assert refined and len(screened) > len(refined)
    assert heads[:2] == [f"advise: {len(a.candidates)} layouts to size and preflight",
                         f"advise: {len(screened)} accepted; screening each with one simulated run per point"]
    (stage,) = [i for i, m in enumerate(heads) if m.startswith("advise: predicting the best ")]
    assert heads[2:stage] == [f"advise: {n} of {len(screened)} layouts screened" for n in range(1, len(screened) + 1)]
    assert heads[stage] == (f"advise: predicting the best {a.refined_per_family} of each of {len(a.families)} "
                            f"families in full where the screening could be wrong ({len(refined)} layouts)")
    assert heads[stage + 1:] == [f"advise: {n} of {len(refined)} predicted in full" for n in range(1, len(refined) + 1)]


@pytest.mark.parametrize(("flag", "value", "says"), [
    *[("--rate", r, f"{r.split(',')[-1]!r}: write a positive number of requests per second")
      for r in ("0", "-1", "inf", "nan", "2,", "fast")],
    # 128 requests a run at 0.01/s span 3.5 hours of simulated time: refused, not simulated.
    ("--rate", "0.01", "0.01 requests/s is slower than the open loop simulated (0.1/s"),
    ("--rate", "3,1e-300", "1e-300 requests/s is slower than the open loop simulated"),
    # A repeated point would be simulated and weighted twice in the geometric mean.
    ("--rate", "3,3", "3 is given twice: give each value once"),
    ("--concurrency", "4,8,4", "4 is given twice"),
    ("--prefix-types", "2,2", "2 is given twice"),
])
def test_a_list_value_the_search_cannot_use_is_refused_by_the_parser(flag, value, says, capsys):
    from dynamo_lab.cli import parser

    with pytest.raises(SystemExit) as refused:
        parser().parse_args(["advise", "kv-routing", flag, value])
    assert refused.value.code == 2
    assert f"argument {flag}: " in (err := capsys.readouterr().err) and says in err


@pytest.mark.parametrize(("args", "flag", "says"), [
    # The same objective twice: argparse kept the last silently, so a script's earlier bound vanished.
    (["--ttft-p99-max", "100", "--ttft-p99-max", "200"], "--ttft-p99-max",
     "given twice (100 and 200 ms): give each objective once"),
    (["--itl-p50-max=20", "--itl-p50-max=20"], "--itl-p50-max", "given twice"),
    # A p50 bound above the same metric's p99 bound can never bind (a p50 is never above its p99).
    (["--ttft-p50-max", "3000", "--ttft-p99-max", "1000"], "--ttft-p99-max",
     "1,000 ms is below --ttft-p50-max's 3,000 ms"),
    (["--tpot-p99-max", "40", "--tpot-p50-max", "50"], "--tpot-p50-max", "50 ms is above --tpot-p99-max's 40 ms"),
    # A percentile the predictor does not report: was `error: dynamo-lab: unrecognized arguments`.
    (["--itl-p90-max", "5"], "--itl-p90-max", "write --itl-p50-max MS or --itl-p99-max MS"),
    (["--ttft-p95-max=500"], "--ttft-p95-max", "write --ttft-p50-max MS or --ttft-p99-max MS"),
    # A goal that does not exist lists only the goals there are, and a retired one says what replaces it.
    (["--goal", "bogus"], "--goal", "'bogus': not a goal; choose goodput or goodput-per-gpu"),
    (["--goal", "ttft-p50"], "--goal", "bound it with --ttft-p50-max MS"),
    (["--goal", "requests-per-s"], "--goal", "advise ranks by goodput now"),
])
def test_an_objective_or_goal_the_search_cannot_use_is_one_line_naming_its_flag_and_the_fix(args, flag, says):
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: dynamo-lab advise: argument {flag}: "), result.stderr
    assert says in result.stderr and result.stderr.count("\n") == 1
    assert "choose from" not in result.stderr  # argparse's choices offered the retired goals among the rest


def test_an_argument_no_command_takes_is_refused_by_the_command_it_was_given_to():
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", "--frobnicate")
    assert result.returncode == 2
    assert result.stderr.startswith("error: dynamo-lab advise: unrecognized arguments: --frobnicate")


def test_an_open_loop_ranks_by_goodput_at_each_rate_and_says_who_falls_behind():
    # --rate: requests arrive at R/s whatever a layout does (a closed loop lets a slow layout send
    # fewer); 12/s is more than a layout sending each request's KV over the 1 Gbit/s link completes.
    w = Traffic(2371, 2000, 64, (2,), (4,), given=True, rates=(1.0, 12.0))
    one_gpu_each = with_nodes(gpu_node("gpu-server", 24576, 1, 62.6), gpu_node("gpu-laptop", 8192, 1, 15.4))
    a = advise(data=one_gpu_each, traffic=w)
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
    as_json = yaml.safe_load(text.to_json(a))
    assert as_json["workload"]["open_loop"] is True
    assert as_json["workload"]["points"] == [{"prefix_types": 2, "concurrency": 0, "rate": 1.0},
                                             {"prefix_types": 2, "concurrency": 0, "rate": 12.0}]
    by_label = {c["layout"]: c for c in as_json["candidates"]}
    for c in behind + kept:
        assert [p["keeps_up"] for p in by_label[c.layout.label]["points"]] == [r.keeps_up for r in c.rows]


def test_a_layout_whose_kv_does_not_fit_says_how_often_and_where():
    # At concurrency 32 one 8GB GPU's prefill and decode workers share a pool too small for every
    # request in flight: vLLM preempts (frees a running request's blocks, recomputes it later).
    a = advise(data=with_nodes(gpu_node("gpu-server", 24576, 1, 62.6), gpu_node("gpu-laptop", 8192, 2, 15.4)),
               traffic=point(2, 32))
    shown = a.ranked + a.over
    preempting = [c for c in shown if c.preemptions]
    assert preempting and any(not c.preemptions for c in shown)
    as_json = yaml.safe_load(text.to_json(a))
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
    # At 50/s every layout of a one-GPU-per-node lab falls behind: the verdict says so.
    w = Traffic(2371, 2000, 64, (2,), (4,), given=True, rates=(1.0, 50.0))
    a = advise(data=with_nodes(gpu_node("gpu-server", 24576, 1, 62.6), gpu_node("gpu-laptop", 8192, 1, 15.4)),
               traffic=w)
    assert all(c.rows[1].keeps_up is False for c in a.ranked)
    assert ("The recommendation falls behind the arrivals at prefix types 2, 50 requests/s open loop; none of the "
            "layouts ranked keeps up at every point: lower the --rate, or add GPUs.") in text.text(a)


def _verdict_line(a: search.Advice) -> str:
    return next(ln for ln in text.text(a).splitlines()
                if ln.startswith(("Recommended", "Tied within", "No recommendation", "First, not recommended")))


def test_a_layout_that_runs_only_by_preempting_is_never_recommended_nor_written_as_if_it_were(monkeypatch, tmp_path):
    # Every layout preempting (as where no layout's KV fits the load): the first meeting the objectives
    # was printed "Recommended" and written as "the layout it predicted best", its figures resting on
    # requests recomputed from their first token.
    monkeypatch.setattr(search.Candidate, "preempting", property(lambda c: True))
    a = advise(data=small_lab(), traffic=point(2, 4))
    assert a.winner is not None and a.recommended is None
    line = _verdict_line(a)
    assert line.startswith(f"First, not recommended: {a.winner.layout.label}: ") and "Recommended" not in line
    assert "runs only by preempting" in line and "--write writes it" in line
    as_json = yaml.safe_load(text.to_json(a))
    assert as_json["recommended"] is None and as_json["first"] == a.winner.layout.label
    assert "not a recommendation: it runs only by preempting" in text.written("Pulumi.advised.yaml", a, None)
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, base(), small_lab())
    assert "not a recommendation: it runs only by preempting" in " ".join(
        ln.lstrip("# ") for ln in path.read_text().splitlines() if ln.startswith("#"))


def test_a_tie_written_says_it_is_the_first_of_a_tie_and_what_it_ties_with(tmp_path):
    a = advise(data=small_lab(), traffic=point(2, 4))
    a.uncertainty = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(
        1.0, 1.0, 100.0, 100.0, 16)})  # every lead within it
    close = a.close_call
    assert close is not None and a.recommended is None
    assert _verdict_line(a).startswith("Tied within the uncertainty: ")
    said = text.written("Pulumi.advised.yaml", a, None)
    assert f"the first of a tie within the uncertainty with {close.worse.label}, not a recommendation" in said
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, base(), small_lab())
    header = " ".join(ln.lstrip("# ") for ln in path.read_text().splitlines() if ln.startswith("#"))
    assert f"the first of a tie within the uncertainty with {close.worse.label}" in header
    # The header carries the decode side and goodput, as every figure printed does.
    assert "ITL p99" in header and "goodput" in header


def test_every_layout_within_the_uncertainty_of_the_first_is_said_to_tie_with_it_wherever_it_is_named():
    # The separation line said "They tie here" of the best separated layout, ranked third, while its
    # family's line called it "dropped (rank 3): goodput 46% lower than the recommendation's", with
    # no recommendation made: two ways of asking, two answers.
    a = advise(data=small_lab(), traffic=point(2, 4))
    a.uncertainty = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(
        1.0, 1.0, 100.0, 100.0, 16)})  # every lead within it
    assert len(a.ranked) > 2 and a.tied == a.ranked[1:]
    words = text.text(a)
    assert "recommendation's" not in words and "dropped (rank" not in words
    verdict = _verdict_line(a)
    assert all(c.layout.label in verdict for c in a.ranked)
    assert a.separation.answer == "ties"
    for fam in a.families:
        if fam.best in a.ranked[1:]:
            line = next(ln for ln in words.splitlines() if ln.startswith(f"- {fam.name}:"))
            assert f"kept, tied with the first within the uncertainty (rank {a.ranked.index(fam.best) + 1})" in line
    as_json = yaml.safe_load(text.to_json(a))
    assert as_json["tie"]["all"] == [c.layout.label for c in a.ranked]


def test_write_with_no_layout_meeting_the_objectives_says_nothing_was_written(monkeypatch):
    from dynamo_lab.advise import command

    none = advise(data=small_lab(), traffic=point(2, 4), goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
    assert none.winner is None
    monkeypatch.setattr(command, "advise", lambda req, progress: (none, small_lab()))
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", "--write", "Pulumi.never-written.yaml")
    assert result.returncode == 1 and not (ROOT / "Pulumi.never-written.yaml").exists()
    assert result.stdout.rstrip().endswith("--write Pulumi.never-written.yaml: nothing written: no layout predicted "
                                           "in full meets every objective at every point.")


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
    as_json = yaml.safe_load(text.to_json(a))
    best = next(c for c in as_json["candidates"] if c["layout"] == a.winner.layout.label)
    assert best["means"]["itl_p99_ms"] is None and best["means"]["tpot_p50_ms"] is None
    assert all(p["itl_p99_ms"] is None for p in best["points"])


def test_the_layouts_breaking_an_objective_are_listed_in_the_order_the_words_say(monkeypatch):
    # Those running only by preempting come after the rest (the verdict's order), which the list called
    # "the least over first": the lab's default search listed 91%, 831%, then 57% (that one preempting).
    from dynamo_lab.advise.candidates import AGGREGATED

    monkeypatch.setattr(search.Candidate, "preempting", property(lambda c: c.layout.kind == AGGREGATED))
    a = advise(data=small_lab(), traffic=point(2, 4), goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
    assert any(c.preempting for c in a.over) and any(not c.preempting for c in a.over)
    apart = next(ln for ln in text.text(a, top=len(a.over)).splitlines() if ln.startswith("Breaking an objective"))
    assert "the least over first, those running only by preempting after the rest:" in apart
    for c in a.over:
        at = apart.index(c.layout.label + " (")
        entry = apart[at:apart.index(")", at)]  # LABEL (what it breaks[; runs only by preempting])
        assert entry.endswith("; runs only by preempting") == c.preempting, entry


def test_a_layouts_standing_says_which_objectives_it_meets_only_within_the_predictors_error():
    a = advise(data=small_lab(), traffic=point(2, 4))
    w = a.winner
    worst = max(r.ttft_p99_ms for r in w.rows)
    held_out = a.uncertainty.metrics["ttft_p99_ms"].holdout_median  # FIXED: 20%
    a.goal = inputs.Goal("goodput", (Objective("ttft", 99, worst * (1 + held_out / 2)),))
    (near,) = a.standing(w).near
    assert near.startswith(f"TTFT p99 {worst:,.0f} ms against its") and f"{held_out:.0%} error" in near
    assert f"It meets {near}: measure it before relying on it." in _verdict_line(a)
    a.goal = inputs.Goal("goodput", (Objective("ttft", 99, worst * (1 + 2 * held_out)),))
    assert a.standing(w).near == ()
    # ITL was never measured: its bound is taken as exact, however close.
    a.goal = inputs.Goal("goodput", (Objective("itl", 99, max(r.itl_p99_ms for r in w.rows) * 1.01),))
    assert a.standing(w).near == ()


def test_a_gpu_binds_as_time_slices_only_where_workers_share_it():
    # A GPU busiest with one worker on it is that worker's GPU time: "time-slices, shared by 1
    # worker" named a contention that was not there (1 agg on gpu-24gb + 1 agg on gpu-8gb, whose
    # gpu-8gb GPU binds, each GPU running one worker).
    a = advise(traffic=point(2, 8))
    bound = [c for c in a.candidates if c.rows and c.binding and c.binding.resource.startswith("GPU time")]
    alone = [c for c in bound if "its one worker's" in c.binding.detail]
    assert alone and all(c.binding.resource == "GPU time" for c in alone), [c.binding for c in bound]
    for c in bound:
        shared = re.search(r"shared by (\d+) workers", c.binding.detail)
        assert (c.binding.resource == "GPU time-slices") == bool(shared), c.binding
        assert not shared or int(shared[1]) >= 2, c.binding
