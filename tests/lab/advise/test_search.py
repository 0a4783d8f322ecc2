"""`dynamo-lab advise` (fast tier): what it searches and how: the classes a cluster offers, the
families and counts it makes, what the sizing refuses and why, the workload, the screening and its
bounds. The figures come from a cheap search (one simulated run per point); the slow tier
(test_advise_slow.py) checks the rankings with the predictor's full estimate."""


import json
import re

import pytest

from dynamo_lab import stack_files
from dynamo_lab.advise import candidates, inputs, search, stack_file, text
from dynamo_lab.advise.traffic import Point, Traffic
from dynamo_lab.predict.objectives import Objective
from dynamo_lab.preflight.run import check
from infra.errors import ConfigError, UserError
from infra.plan import load_stack
from tests.helpers import ROOT
from tests.lab.advise.common import (
    CHEAP,
    FIXED,
    LAB,
    SHORT,
    advise,
    base,
    fake_candidate,
    family,
    gpu_node,
    point,
    small_lab,
    with_nodes,
)

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
    # One request at a time: what is refused and why is the sizing's and preflight's, before any
    # simulation, and the kept layouts' simulations cost a third of concurrency 4's.
    a = advise(data=data, traffic=point(2, 1))
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


def test_no_layout_fits_a_cluster_without_room_and_the_families_say_why():
    data = with_nodes(gpu_node("gpu-server", 24576, 4, 2), gpu_node("gpu-laptop", 8192, 4, 2))
    a = advise(data=data, traffic=point(2, 4))
    assert a.winner is None and a.ranked == []
    words = text.text(a)
    assert "No layout passes the sizing and preflight on this cluster" in words
    assert "Dropped: none of its layouts passes the sizing and preflight" in words


def test_a_family_refused_whole_by_a_base_setting_says_it_was_not_compared_and_which_setting():
    config = base("cross-server")
    config["dynamo-lab:probe"] = {"enabled": True}  # the probe measures a prefill -> decode path
    a = advise(config, data=small_lab(), traffic=point(2, 4, output_tokens=SHORT), base_name="cross-server")
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
    # small_lab at 4 points, concurrency 1 and 2 of 8 requests each: 2 x (8 + 16) x 2 = 96 requests a
    # layout's screening, over 100 for two layouts. SHORT requests: what is screened where does not
    # depend on their length, and concurrency 4 and 8 of 64 output tokens took 3.5 s of CPU.
    monkeypatch.setattr(search, "SCREEN_REQUESTS", 100)
    a = advise(data=small_lab(), traffic=Traffic(2371, 2000, SHORT, (2, 24), (1, 2), given=True))
    assert a.bounded is None and 0 < a.shortlisted < len([c for c in a.candidates if c.rows])
    assert [c for c in a.candidates if c.status == search.SCREENED_HEAVIEST]
    words = text.text(a)
    assert "at the heaviest point (prefix types 24, concurrency 2), the best 4 of each family" in words
    assert "over 400 layouts" not in words
    # --json says which precision each figure has and which workload point each is at: a layout screened
    # at the heaviest point alone was labelled "full" and its one point (and what it breaks there) given
    # index 0, the workload's first point.
    as_json = json.loads(text.to_json(a))
    heaviest = as_json["workload"]["points"].index({"prefix_types": 24, "concurrency": 2, "rate": None})
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
        c = fake_candidate("x", score)
        if over:
            c.broken = [search.Broken(Objective("ttft", 99, 100.0), 100.0 * over, 0)]
        return c

    first = screened(10.0)
    assert search.worth_refining(first, screened(9.5))  # 5% behind: within the screening's noise
    assert not search.worth_refining(first, screened(8.0))  # 25% behind
    assert search.worth_refining(first, screened(12.0, over=1.5))  # breaks by less than 2x: might meet in full
    assert not search.worth_refining(first, screened(12.0, over=3.0))
    assert search.worth_refining(screened(1.0, over=4.0), screened(1.0, over=1.2))


def test_with_no_shared_prefix_each_concurrency_is_one_point_and_the_output_says_why():
    w = Traffic(1000, 0, SHORT, (2, 7, 12, 24), (1, 2), given=True)  # the points are the test
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


def test_the_search_says_what_it_does_as_it_goes(monkeypatch):
    # A default search takes tens of seconds: it says how many layouts it sizes and how many it
    # screens, then how many of each family's best it predicts in full, and in between how far it is.
    monkeypatch.setattr(search, "PROGRESS_S", 0.0)  # every step due, so the in-between lines show too
    said: list[str] = []
    a = search.search(inputs.Base.of("kv-routing", base()), "kv-routing", small_lab(), point(2, 4, output_tokens=SHORT),
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
