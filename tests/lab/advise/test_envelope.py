"""advise and the envelope: no claim against the predictor's error where its inputs were never validated."""

from __future__ import annotations

import json

from dynamo_lab.advise import candidates, inputs, search, text, write
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.advise.uncertainty import MetricError, Uncertainty
from dynamo_lab.predict.envelope import Envelope
from tests.lab.advise.common import CHEAP, FIXED, advise, base, gpu_node, point, with_nodes

# The lab's 24GB node alone, with 2 GPU units: 3 layouts, cheap enough to search at concurrency 16.
ONE_NODE = with_nodes(gpu_node("gpu-server", 24576, 2, 62.6))
SIXTEEN = "concurrency 16 > 8 (validated up to 8)"


def test_at_concurrency_16_advise_says_physics_only_and_names_what_is_outside():
    a = advise(data=ONE_NODE, traffic=point(2, 16))
    words = text.text(a)
    (verdict,) = [ln for ln in words.splitlines() if ln.startswith(("Recommended", "Tied within the uncertainty"))]
    assert verdict.startswith(("Recommended (an estimate, physics only): ", "Tied within the uncertainty"))
    assert (f"Outside what the validation covered ({SIXTEEN}), no validated error applies: that error is a floor, the "
            "real one is unknown.") in verdict
    assert f"  each: {SIXTEEN}" in words.splitlines()  # under the table, whose rows each say "outside"
    as_json = json.loads(text.to_json(a))
    assert (as_json["tie"] is None) == verdict.startswith("Recommended")
    assert as_json["comparison"] == {"extrapolated": True, "basis": "physics", "outside": [SIXTEEN]}
    predicted = [c for c in as_json["candidates"] if "means" in c]
    assert predicted and all(c["extrapolated"] and c["outside"] == [SIXTEEN] for c in predicted)
    assert all(p["extrapolated"] and p["outside"] == [SIXTEEN] for c in predicted for p in c["points"])
    assert f"(physics only, outside what the validation covered: {SIXTEEN})" in " ".join(
        ln.lstrip("# ") for ln in write.header(a, a.winner, []).splitlines())


def test_at_the_labs_points_every_figure_is_inside_and_the_output_is_as_before():
    a = advise(data=ONE_NODE, traffic=Traffic(2371, 2000, 64, (24,), (4, 8), given=True))
    assert a.ranked and all(not c.envelope.extrapolated for c in a.ranked)
    words = text.text(a)
    assert "envelope" not in words and "Outside what the validation covered" not in words
    assert "(an estimate, physics only)" not in words
    # What no measurement checks anywhere, inside too, is said: the decode side (docs/predictor.md).
    assert "The lab's table has no ITL, TPOT or E2E: they are physics only" in words
    as_json = json.loads(text.to_json(a))
    assert as_json["comparison"] == {"extrapolated": False, "basis": "lab", "outside": []}
    assert all(c["extrapolated"] is False for c in as_json["candidates"] if "means" in c)


def _fake(label: str, score: float, outside: tuple[str, ...] = ()) -> search.Candidate:
    c = search.Candidate(candidates.Layout(candidates.AGGREGATED, (candidates.Group(label, "agg", "gpu-24gb", 1),)), {})
    c.score, c.envelopes = score, [Envelope(outside)]
    return c


def test_a_lead_within_the_error_is_a_tie_inside_the_envelope_and_outside_it():
    # Outside the envelope the validated error is a floor, not zero: a 0.3% lead is no recommendation.
    def advice(*ranked):
        return search.Advice("s", "s", "x", [], [], point(2, 4), inputs.Goal(), FIXED, list(ranked),
                             list(ranked), [], [], (1, 1), 2, 0.0)

    assert advice(_fake("a", 10.0), _fake("b", 9.97)).close_call is not None
    outside = advice(_fake("a", 10.0), _fake("b", 9.97, (SIXTEEN,)))
    assert outside.close_call is not None and outside.compared.outside == (SIXTEEN,)
    assert advice(_fake("a", 10.0), _fake("b", 5.0, (SIXTEEN,))).close_call is None  # twice: beyond it


def test_a_tie_says_what_measurement_would_separate_the_two():
    # A 100 Gbit/s link on the lab's cluster: the best two, an aggregated worker and same-node
    # separation (nothing crosses the link, both inside), are less than 2x apart on goodput. The
    # lab's 24GB node alone, its 4 GPU units: the same two first as on the whole lab (10 layouts, not
    # 68), searched in this process (the test runner runs one per core already).
    config = base()
    config["dynamo-lab:sizing"] = {"link": {"rate": "100gbit"}}
    wide = Uncertainty({m: MetricError(0.5, 0.9, 0.99, 0.99, 16) for m in ("ttft_p50_ms", "ttft_p99_ms",
                                                                            "requests_per_s")})
    server = with_nodes(gpu_node("gpu-server", 24576, 4, 62.6))
    a = search.search(inputs.Base.of("kv-routing", config), "advised", server, point(2, 4), inputs.Goal(), wide,
                      full=CHEAP, workers=1)
    assert [c.layout.kind for c in a.ranked[:2]] == [candidates.AGGREGATED, candidates.ONE_NODE]
    assert a.close_call is not None  # every lead under 2x is within a 99% error
    (verdict,) = [ln for ln in text.text(a).splitlines() if ln.startswith("Tied within the uncertainty")]
    assert f"{a.ranked[0].layout.label} and {a.ranked[1].layout.label} are " in verdict
    assert "No recommendation between them (--write writes the first)" in verdict
    assert "To separate them, benchmark both at prefix types 2, concurrency 4" in verdict
    assert "Recommended" not in text.text(a)
    assert json.loads(text.to_json(a))["recommended"] is None
