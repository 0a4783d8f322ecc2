"""The predictor's step costs beside AIConfigurator 0.12.0's (dynamo_lab/predict/peer.py,
docs/peer.md): where both model the same thing, the engine's step, they agree within the stated
tolerances; the worker's output handling, which only the predictor models, is shown and not compared.

The slow tier runs the comparison (dev.py installs the `peer` extra for it); the fast tier checks the
predictor's side and the refusals, which need no peer."""

from __future__ import annotations

import dataclasses
from importlib import metadata

import pytest

from dynamo_lab.predict import costs, envelope, peer
from infra.config.schema import Model
from tests.helpers import unavailable

H100_SXM = {"mem_bw": 3350000000000, "mem_capacity": 85899345920, "bfloat16_tc_flops": 989000000000000}


@pytest.fixture(scope="module")
def rows() -> list[peer.Comparison]:
    try:
        return peer.compare()
    except peer.PeerError as exc:
        unavailable(f"no AIConfigurator here ({exc}): run the slow tier with `python3 dev.py test-slow`")


def _ratios(rows: list[peer.Comparison], quantity: str) -> dict[str, float]:
    return {f"{r.model} {r.system} TP{r.tp} {r.quantity} {r.batch}x{r.tokens}": round(r.ratio, 2)
            for r in rows if r.quantity == quantity}


# docs/peer.md's table is a marked sample of `python -m dynamo_lab.predict.peer`: tests/test_docs_samples.py
# (slow tier) holds it to what the command prints.


@pytest.mark.slow
def test_the_envelope_knows_where_the_peer_agrees_now(rows):
    # predict and advise label a figure "lab+peer" on these cases only (predict/envelope.py).
    found = peer.agreeing(rows)
    assert envelope.PEER_AGREES == found, (
        f"record in dynamo_lab/predict/envelope.py PEER_AGREES the cases that agree now: {sorted(found)}")


@pytest.mark.slow
def test_both_price_the_same_cards(rows):
    # The predictor's card is the peer's datasheet figures, and for the H100 SXM those are the
    # shipped example's 80GB class's (Pulumi.two-node-rdma.yaml): both tools describe one card alike.
    _, system_spec, _ = peer.peer_api()
    for system in peer.SYSTEMS:
        spec = system_spec(system)["gpu"]
        cls = peer.project_class(spec)
        w = peer.worker("Qwen/Qwen3-32B", system, 2, cls)
        assert w.bandwidth == 2 * spec["mem_bw"] and w.peak_flops == 2 * spec["bfloat16_tc_flops"]
    example = peer.project_class(system_spec("h100_sxm")["gpu"])
    assert (example.memory_bandwidth, example.peak_tflops) == (3350e9, 989)
    assert {(r.model, r.system, r.tp) for r in rows} == {(m, s, t) for s in peer.SYSTEMS for m, t in peer.CASES}


@pytest.mark.slow
def test_a_model_whose_geometry_differs_from_the_peers_is_refused():
    _, _, model_config = peer.peer_api()
    theirs = model_config("Qwen/Qwen3-32B")
    assert peer.geometry_differs(Model(name="Qwen/Qwen3-32B"), theirs) is None
    assert peer.geometry_differs(Model(name="Qwen/Qwen3-14B"), theirs) == (
        "layers 40 (the peer: 64), attentionHeads 40 (the peer: 64)")


@pytest.mark.slow
def test_the_engines_prefill_and_decode_steps_agree_with_the_peer_on_every_case(rows):
    # Like with like (docs/peer.md): the engine's step, its host side overlapping the GPU, beside the
    # peer's sum of measured kernels; the worker's output handling is the peer's blind spot, not compared.
    assert len(rows) == len(peer.SYSTEMS) * len(peer.CASES) * (1 + len(peer.DECODE_BATCHES))
    outside = {k: v for q in ("prefill", "decode") for k, v in _ratios(rows, q).items()
               if abs(v - 1) > peer.TOLERANCE[q]}
    assert outside == {}
    assert peer.agreeing(rows) == {(r.model, r.tp, *r.card) for r in rows}


@pytest.mark.slow
def test_the_output_handling_is_shown_beside_the_compared_step_never_in_it(rows):
    for r in rows:
        ours = r.predictor
        # The compared quantity is the engine's step, which the peer's whole step is set against ...
        assert r.ratio == ours.engine / r.peer.seconds and r.peer.engine == r.peer.seconds
        # ... and the step as the predictor's figures have it, the output handling with it, is shown.
        assert r.delivered_ratio == ours.seconds / r.peer.seconds
        assert ours.seconds >= ours.engine * (1 - 1e-9)  # (the steady state's differences, to rounding)
        if r.quantity == "decode":
            assert ours.engine == pytest.approx(max(ours.host, ours.gpu))
            assert ours.seconds == pytest.approx(max(ours.host, ours.gpu, ours.output))
    # Where it binds (64 requests a step at the lab's fitted cost a request) the full step is several
    # times the peer's: the table keeps that ratio in view, and it is not what `within` judges.
    bound = [r for r in rows if r.predictor.output > max(r.predictor.host, r.predictor.gpu)]
    assert {r.batch for r in bound} == {64}
    assert all(r.delivered_ratio > 1 + peer.TOLERANCE["decode"] and r.within for r in bound)


# --- Without the peer -------------------------------------------------------------------------------

def _worker(model: str = "Qwen/Qwen3-32B", tp: int = 4) -> peer.PricedWorker:
    return peer.worker(model, "h100_sxm", tp, peer.project_class(H100_SXM))


def test_the_predictors_side_reproduces_its_own_efficiencies():
    # Share of peak is the step's work over its GPU time less all-reduce: a compute-bound prefill
    # comes out at the card's sustained share of its peak (the one prefill efficiency), a decode
    # step of one request at the memory efficiency.
    w = _worker()
    prefill = peer.predictor_prefill(w, 8192)
    assert prefill.share == pytest.approx(w.card.sustained_flops / w.card.peak_flops)
    assert peer.predictor_decode(w, 1, 4096).share == pytest.approx(w.timing.efficiency.memory)
    # Four ranks: two all-reduces a layer of the prompt's activations; one rank has none.
    assert prefill.allreduce > 0 and peer.predictor_prefill(_worker(tp=1), 8192).allreduce == 0


def test_a_prompt_longer_than_the_step_budget_is_prefilled_in_chunks_each_launched_while_the_last_runs():
    w = _worker()
    budget = w.limits.max_num_batched_tokens
    assert budget == 8192  # an 80GB card's vLLM default
    one, three = peer.predictor_prefill(w, budget), peer.predictor_prefill(w, 2 * budget + 1)

    def host(scheduled):
        return costs.host_seconds(w.timing.host, w.model, w.limits, scheduled)
    # Each chunk pays its step's host cost; only the last samples a token, so only it pays the output's.
    assert one.host == host([(0, budget)])
    assert three.host == pytest.approx(host([(0, budget)]) + host([(budget, budget)]) + host([(2 * budget, 1)]))
    assert three.output == one.output == costs.output_seconds(w.timing.host, 1)
    # 8,192 + 8,192 + 1 tokens: the second chunk attends to the first as well as to itself.
    assert three.gpu > 2 * one.gpu
    # From an idle engine the first chunk's host time runs alone; every later chunk's is launched
    # while the one before runs on the GPU, so a prompt's time is not its steps' host + GPU.
    assert one.seconds == pytest.approx(one.host + one.gpu + one.output)
    assert one.engine == pytest.approx(one.host + one.gpu)  # the engine core hands its token over
    assert three.gpu + host([(0, budget)]) + three.output <= three.seconds < three.host + three.gpu + three.output


def test_a_decode_step_takes_the_slowest_of_the_host_the_gpu_and_the_output_handling():
    # vLLM's async scheduling: the engine core prepares step i+1 while the GPU runs step i, and the
    # worker's process handles step i-1's tokens meanwhile: a steady decode goes at the slowest.
    for model, tp in (("Qwen/Qwen3-32B", 2), ("Qwen/Qwen3-8B", 1)):
        w = _worker(model, tp)
        for batch in (1, 64):
            step = peer.predictor_decode(w, batch, 4096)
            assert step.seconds == pytest.approx(max(step.host, step.gpu, step.output))
            assert step.engine == pytest.approx(max(step.host, step.gpu))  # what is compared: no output
            assert step.host == costs.host_seconds(w.timing.host, w.model, w.limits, [(4096, 1)] * batch)


def test_the_compared_step_does_not_move_with_the_output_handling():
    # The worker's output handling is fitted on the lab's desktop and not modelled by the peer: were it
    # to enter the compared quantity, a slower one would move the ratio. It moves only what is shown.
    w = _worker("Qwen/Qwen3-8B", 1)
    slow = dataclasses.replace(w, timing=dataclasses.replace(
        w.timing, host=dataclasses.replace(w.timing.host, output_per_request_s=0.05)))
    for price in (lambda x: peer.predictor_prefill(x, 8192), lambda x: peer.predictor_decode(x, 64, 4096),
                  lambda x: peer.predictor_decode(x, 1, 4096)):
        ours, slower = price(w), price(slow)
        assert slower.engine == ours.engine and slower.seconds > ours.seconds
        theirs = peer.StepCost(0.02, 0.02, 0.0, 0.0, 0.02, 0.0, 0.5)
        rows = [peer.Comparison("Qwen/Qwen3-8B", "h100_sxm", 1, "decode", 64, 4096, cost, theirs, (3350e9, 989.0))
                for cost in (ours, slower)]
        assert rows[0].ratio == rows[1].ratio and rows[0].within == rows[1].within
        assert rows[1].delivered_ratio > rows[0].delivered_ratio


def test_the_peer_missing_or_another_version_is_refused_with_the_command_that_installs_it(monkeypatch, capsys):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(peer.metadata, "version", missing)
    assert peer.main([]) == 2
    err = capsys.readouterr().err
    assert "aiconfigurator==0.12.0 (the `peer` extra)" in err and "does not have it" in err
    assert "Run it as `python3 dev.py peer`" in err
    monkeypatch.setattr(peer.metadata, "version", lambda name: "0.13.0")
    assert peer.main([]) == 2
    assert "has 0.13.0" in capsys.readouterr().err
    assert peer.main(["--json"]) == 2
    assert "no arguments; got --json" in capsys.readouterr().err
