"""The envelope: which inputs of a figure are outside what the predictor's validation covered."""

from __future__ import annotations

import json

import pytest
import yaml

from dynamo_lab import published
from dynamo_lab.predict import cells
from dynamo_lab.predict import envelope as env
from infra.catalogue import DEFAULT_GPU_CLASSES
from tests.helpers import ROOT, coarse_predictions, loaded, run_cli


@pytest.mark.parametrize("stack", sorted(published.TABLE))
def test_the_labs_own_points_on_the_labs_stacks_are_inside(stack):
    cfg = loaded(stack).resolved
    for p in (2, 7, 12, 24):
        for c in (4, 8):
            assert env.envelope(cfg, p, c) == env.INSIDE, (stack, p, c)
    # The cross-server first requests were published at concurrency 1 and 4.
    assert not env.envelope(cfg, 2, 1).extrapolated


def test_concurrency_past_8_prefix_types_past_24_and_an_open_loop_are_named():
    cfg = loaded("kv-routing").resolved
    assert env.envelope(cfg, 2, 16).outside == ("concurrency 16 > 8 (validated up to 8)",)
    assert env.envelope(cfg, 32, 4).outside == ("prefix types 32 (validated: 2 to 24)",)
    assert env.envelope(cfg, 2, 4, rate=5.0).outside == (
        "open loop at 5 requests/s (validated: closed loop, concurrency 1 to 8)",)


def test_a_faster_link_is_outside_only_where_a_transfer_crosses_it():
    def fast(c):
        c["sizing"] = {"link": {"rate": "100gbit"}}

    cross = loaded("cross-server", fast).resolved
    assert env.envelope(cross, 2, 4).outside == ("link 100 Gbit/s (validated: 1 Gbit/s)",)
    # Same-node P/D and aggregated workers move nothing over the link: their figures do not rest on it.
    assert not env.envelope(loaded("same-server", fast).resolved, 2, 4).extrapolated
    assert not env.envelope(loaded("kv-routing", fast).resolved, 2, 4).extrapolated


def test_the_link_is_in_the_envelope_wherever_kv_crosses_it_one_class_of_two_nodes_included():
    # Issue 45: prefill and decode on one class used to leave the link out; on a class of two nodes
    # the pair may be on two (the placement's kv_path, the sizing's cross-node path).
    def two_nodes(c):
        c["sizing"] = {"link": {"rate": "10gbit"}}
        c["gpuClasses"] = {**DEFAULT_GPU_CLASSES, "gpu-24gb": {**DEFAULT_GPU_CLASSES["gpu-24gb"], "nodes": 2}}
        for w in c["workers"]:
            w["spread"] = "even"

    stack = loaded("same-server", two_nodes).resolved
    assert {g.gpu_class for g in stack.active} == {"gpu-24gb"}
    assert env.crosses_link(stack)
    assert "link 10 Gbit/s (validated: 1 Gbit/s)" in env.envelope(stack, 2, 4).outside
    # Over RDMA the NIC carries the KV even between two pods of one node: the link is an input there too.
    assert not env.crosses_link(loaded("same-server").resolved)


def test_rdma_or_gpu_buffers_are_outside_the_labs_tcp_transport():
    def rdma(c):
        c["gpuClasses"] = {name: {**cls, "rdmaResource": "rdma/hca"} for name, cls in DEFAULT_GPU_CLASSES.items()}
        for w in c["workers"]:
            w["kvTransfer"] = {"transport": "rdma", "ucxTls": "rc,cuda_copy", "bufferDevice": "cuda"}

    same_node = loaded("same-server", rdma).resolved
    assert ("KV transport of prefill: UCX rc,cuda_copy, cuda buffers (validated: tcp,self, cpu buffers: "
            "TCP, no RDMA)") in env.envelope(same_node, 2, 4).outside
    assert env.crosses_link(same_node)  # one node, and yet through the NIC


def test_a_16k_prompt_with_no_shared_prefix_is_named_and_its_prefix_types_are_not():
    def long(c):
        c["workload"] = {"inputTokens": 16371, "prefixTokens": 0}
        c["benchmark"] = {"prefixTokens": 0, "uniqueTokens": 16371}

    cfg = loaded("same-server", long).resolved
    assert env.envelope(cfg, 1, 4).outside == ("prompt 16,371 tokens (validated: 2,371)",
                                               "shared prefix 0 tokens (validated: 2,000)")


def test_another_model_is_named():
    def other(c):
        c["model"] = {"name": "Qwen/Qwen3-1.7B", "layers": 28, "kvHeads": 8, "headDim": 128,
                      "parameters": 1_720_000_000}
        for w in c["workers"]:
            w["replicas"] = 1

    cfg = loaded("kv-routing", other).resolved
    assert env.envelope(cfg, 2, 4).outside == ("model Qwen/Qwen3-1.7B (validated: Qwen/Qwen3-0.6B)",)


HOST_OF_24GB = ("host of gpu-24gb's workers: the scheduler's pass (3.3 ms a step) and the worker's output handling "
                "(1.11 ms a sampled request) as fitted on the lab's desktop CPU (validated: that CPU; docs/peer.md)")


def test_a_gpu_class_not_the_labs_is_named_by_what_differs_and_a_renamed_lab_class_is_inside():
    def classes(c, big, small):
        c["gpuClasses"] = {"gpu-24gb": big, "gpu-8gb": small}

    a100 = {**DEFAULT_GPU_CLASSES["gpu-24gb"], "memory": "80Gi", "effectiveTflops": 200, "peakTflops": 312}
    faster = {**DEFAULT_GPU_CLASSES["gpu-8gb"], "effectiveTflops": 30}
    cfg = loaded("kv-routing", lambda c: classes(c, a100, faster)).resolved
    assert env.envelope(cfg, 2, 4).outside == (
        "GPU class gpu-24gb: 80GB (validated: the lab's 24GB and 8GB classes)",
        f"GPU class gpu-8gb: effectiveTflops 30 (validated: the lab's 8GB class: "
        f"{DEFAULT_GPU_CLASSES['gpu-8gb']['effectiveTflops']:g})",
        # Another card is on another host than the lab's desktop, whose CPU the host side was fitted on;
        # the lab's 8GB card with another efficiency is taken for the lab's card on its host.
        HOST_OF_24GB)

    def renamed(c):
        c["gpuClasses"] = {"big": DEFAULT_GPU_CLASSES["gpu-24gb"]}
        c["workers"] = [{"name": "w", "role": "agg", "replicas": 2, "gpuClass": "big"}]

    assert not env.envelope(loaded("kv-routing", renamed).resolved, 2, 4).extrapolated


def test_predict_json_and_text_carry_each_rows_envelope(tmp_path, monkeypatch):
    # One stack file of two cells, one inside and one outside, predicted once for both outputs (each
    # cell simulated once: what the outputs say of the envelope, not the figures).
    coarse_predictions(monkeypatch)
    doc = yaml.safe_load((ROOT / "Pulumi.kv-routing.yaml").read_text())
    doc["config"]["dynamo-lab:benchmark"] = {"prefixTypes": [2], "concurrency": [4, 16]}
    (tmp_path / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.mine.yaml").write_text(yaml.safe_dump(doc))
    made: list = []
    real = cells.predict
    monkeypatch.setattr(cells, "predict", lambda *a, **k: made or made.extend(real(*a, **k)) or made)
    proc = run_cli("predict", "mine", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {r["concurrency"]: r for r in json.loads(proc.stdout)["rows"]}
    assert (rows[4]["extrapolated"], rows[4]["outside"]) == (False, [])
    assert (rows[16]["extrapolated"], rows[16]["outside"]) == (True, ["concurrency 16 > 8 (validated up to 8)"])
    assert rows[16]["ttft_p50_ms"] > 0  # the figure is there, beside its envelope
    words = run_cli("predict", "mine", cwd=tmp_path).stdout.splitlines()
    table = [ln.split() for ln in words if ln[:1].isdigit()]
    assert [(r[1], r[-1]) for r in table] == [("4", "inside"), ("16", "outside")]
    assert ("Outside what the validation covered, physics only, no validated error applies (docs/predictor.md, "
            "Envelope):") in words
    assert "  2x16: concurrency 16 > 8 (validated up to 8)" in words


def _h100_qwen3_32b(tp: int, concurrency_16: bool = False):
    """An aggregated Qwen3-32B of `tp` GPUs a worker on the example's H100 SXM class, at the lab's
    request shape: outside the lab's validation in card, model and tensor parallelism only."""
    rdma = yaml.safe_load((ROOT / "Pulumi.two-node-rdma.yaml").read_text())["config"]

    def edit(c):
        c["gpuClasses"] = rdma["dynamo-lab:gpuClasses"]
        c["model"] = {"name": "Qwen/Qwen3-32B"}
        c["workers"] = [{"name": "agg", "role": "agg", "replicas": 2, "gpuClass": "gpu-80gb", "tensorParallel": tp}]

    return env.envelope(loaded("kv-routing", edit).resolved, 2, 16 if concurrency_16 else 4)


H100_QWEN3_32B_TP2 = ("Qwen/Qwen3-32B", 2, 3350e9, 989.0)


def test_a_figure_outside_only_where_the_peer_agrees_rests_on_the_lab_and_the_peer(monkeypatch):
    monkeypatch.setattr(env, "PEER_AGREES", frozenset({H100_QWEN3_32B_TP2}))
    peer = _h100_qwen3_32b(2)
    assert peer.extrapolated and peer.basis == "lab+peer"  # still no validated error
    assert peer.outside == ("GPU class gpu-80gb: 80GB (validated: the lab's 24GB and 8GB classes)",
                            "host of gpu-80gb's workers: the scheduler's pass (3.3 ms a step) and the worker's output "
                            "handling (1.11 ms a sampled request) as fitted on the lab's desktop CPU (validated: that "
                            "CPU; docs/peer.md)",
                            "model Qwen/Qwen3-32B (validated: Qwen/Qwen3-0.6B)",
                            "tensorParallel 2 of agg (validated: 1, one GPU a worker)")
    assert peer.as_dict()["basis"] == "lab+peer"
    lines = env.outside_lines([("2x4", peer)])
    assert lines[-1] == f"  every figure: {env.PEER_BASIS}"
    # Anything else outside, or a case the peer does not agree on, and the figure rests on neither.
    assert _h100_qwen3_32b(2, concurrency_16=True).basis == "physics"
    assert _h100_qwen3_32b(4).basis == "physics"
    assert not any(env.PEER_BASIS in ln for ln in env.outside_lines([("2x16", _h100_qwen3_32b(4))]))
    # Two figures together: on the peer only where each one outside is.
    assert (env.INSIDE | peer).basis == "lab+peer" and (peer | _h100_qwen3_32b(4)).basis == "physics"
    assert env.INSIDE | env.INSIDE == env.INSIDE
    assert env.envelope(loaded("kv-routing").resolved, 2, 4).basis == "lab"


def test_today_the_engines_steps_agree_with_the_peer_so_such_a_figure_rests_on_both_and_says_what_it_covers():
    # docs/peer.md: the engine's prefill and decode steps are within tolerance on every case compared
    # (the slow tier holds PEER_AGREES to what the comparison finds); Qwen3-32B at TP 8 was not compared.
    assert H100_QWEN3_32B_TP2 in env.PEER_AGREES
    assert _h100_qwen3_32b(2).basis == "lab+peer" and _h100_qwen3_32b(4).basis == "lab+peer"
    assert _h100_qwen3_32b(8).basis == "physics"
    # The agreement is the engine's step: the label says the output handling is not covered.
    assert "the worker's output handling, which the peer does not model, is the lab's desktop's, extrapolated" in (
        env.PEER_BASIS)


def _on_h200(model: str, replicas: int, concurrency: int) -> env.Envelope:
    """Aggregated workers of `model` on the peer comparison's H200 SXM (an agreeing case)."""
    rdma = yaml.safe_load((ROOT / "Pulumi.two-node-rdma.yaml").read_text())["config"]

    def edit(c):
        c["gpuClasses"] = {"gpu-80gb": {**rdma["dynamo-lab:gpuClasses"]["gpu-80gb"], "memoryBandwidth": "4800G",
                                        "memory": "141Gi"}}
        c["model"] = {"name": model}
        c["workers"] = [{"name": "agg", "role": "agg", "replicas": replicas, "gpuClass": "gpu-80gb"}]

    return env.envelope(loaded("kv-routing", edit).resolved, 2, concurrency)


def test_a_figure_whose_decode_the_extrapolated_output_handling_paces_rests_on_physics_not_the_peer():
    # Review of issue 46's like-with-like comparison: the peer agrees on the engine's step only, and
    # at 8 requests a step on an H200 Qwen3-8B's engine step is shorter than 8 x 1.11 ms of output
    # handling, so that figure's ITL and throughput rest on the lab desktop's output handling.
    case = ("Qwen/Qwen3-8B", 1, 4800e9, 989.0)
    assert case in env.PEER_AGREES
    light = _on_h200("Qwen/Qwen3-8B", 8, 8)  # one request a step each: the engine's step binds
    assert light.basis == "lab+peer" and not any("decode pace" in o for o in light.outside)
    paced = _on_h200("Qwen/Qwen3-8B", 1, 8)
    assert paced.basis == "physics"
    [line] = [o for o in paced.outside if o.startswith("decode pace of agg at 8 requests a step")]
    assert "output handling (8.9 ms a step, as fitted on the lab's desktop CPU)" in line
    # An open loop's batch is not known here; it is outside as an open loop already.
    assert not any("decode pace" in o for o in env.envelope(
        loaded("kv-routing").resolved, 2, 4, rate=50.0).outside)
    # On the lab's cards the output handling was fitted on their host: never named.
    assert not any("decode pace" in o for o in env.envelope(loaded("kv-routing").resolved, 2, 8).outside)
