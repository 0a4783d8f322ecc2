"""Beyond the lab (issue 34): workers placed on a class's nodes and GPUs as the scheduler would,
KV paths per node pair, whole GPUs, tensor parallelism's cost and RDMA transfers. Every figure here
is outside the validation (envelope.py); these tests check the mechanisms, not the lab's figures."""

from __future__ import annotations

import pytest

from dynamo_lab import stack_files
from dynamo_lab.predict import cells, costs, params, placement
from dynamo_lab.predict.envelope import envelope
from infra.plan import load_stack
from infra.sizing import link_bytes_per_second

H100 = {"memory": "81559Mi", "nodes": 2, "gpusPerNode": 8, "sharing": "whole",
        "rdmaResource": "rdma/rdma_shared_device_a",
        "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["70000"]}],
        "effectiveTflops": 400, "memoryBandwidth": "3350G", "peakTflops": 989}


def stack(workers, classes=None, model="Qwen/Qwen3-0.6B", link="100gbit", **sizing):
    doc = {"kubernetes:context": "x", "dynamo-lab:gpuClasses": classes or {"gpu-80gb": H100},
           "dynamo-lab:model": {"name": model}, "dynamo-lab:workers": workers,
           "dynamo-lab:sizing": {"link": {"rate": link, "efficiency": 0.9}, **sizing}}
    return load_stack("beyond", *stack_files.config_from_doc(doc))


def pd(replicas=2, tp=1, transport="tcp", spread="even"):
    extra = {"kvTransfer": {"transport": transport}} if transport != "tcp" else {}
    return [{"name": role, "role": role, "replicas": replicas, "gpuClass": "gpu-80gb", "tensorParallel": tp,
             "spread": spread, **extra} for role in ("prefill", "decode")]


def test_spread_even_puts_each_groups_replicas_on_both_nodes_and_whole_gpus_are_never_shared():
    s = stack(pd(replicas=2))
    specs = placement.workers(s.config, s.sizing)
    assert [(w.name, w.node) for w in specs] == [
        ("prefill-0", "gpu-80gb node 1 of 2"), ("prefill-1", "gpu-80gb node 2 of 2"),
        ("decode-0", "gpu-80gb node 1 of 2"), ("decode-1", "gpu-80gb node 2 of 2")]
    assert len({w.gpu for w in specs}) == 4  # whole GPUs: each worker its own
    paths = placement.paths(s.config, s.sizing, specs, parallelism=2.0)
    # Per node pair: on one node the host's TCP path, `parallelism` flows at its rate at a time, in
    # order; across, the link shared evenly.
    same = paths[("gpu-80gb node 1 of 2", "gpu-80gb node 1 of 2")]
    assert same.in_order and same.capacity == 2 * same.per_flow
    across = paths[("gpu-80gb node 1 of 2", "gpu-80gb node 2 of 2")]
    assert not across.in_order and across.capacity == link_bytes_per_second(s.config.sizing.link)


def test_a_same_node_transfer_never_crosses_the_nic_and_is_cheaper_than_one_that_does():
    # CPU buffers over TCP on one node: the host's loopback (its TCP software path), not the 1GbE
    # NIC; across the two nodes the same pull crosses the link.
    s = stack(pd(replicas=2), link="1gbit")
    specs = placement.workers(s.config, s.sizing)
    paths = placement.paths(s.config, s.sizing, specs)
    one, two = "gpu-80gb node 1 of 2", "gpu-80gb node 2 of 2"
    same, across = paths[(one, one)], paths[(one, two)]
    nic = link_bytes_per_second(s.config.sizing.link)
    assert across.capacity == nic and same.per_flow > 5 * nic
    cold = 2371 * s.sizing.kv_bytes_per_token
    assert cold / same.per_flow < cold / min(across.per_flow, across.capacity) / 5


def test_rdma_moves_a_flow_at_the_link_not_the_tcp_software_path():
    tcp, rdma = stack(pd()), stack(pd(transport="rdma"))
    key = ("gpu-80gb node 1 of 2", "gpu-80gb node 2 of 2")
    slow = placement.paths(tcp.config, tcp.sizing, placement.workers(tcp.config, tcp.sizing))[key]
    fast = placement.paths(rdma.config, rdma.sizing, placement.workers(rdma.config, rdma.sizing))[key]
    assert slow.per_flow < 1e9 < fast.per_flow == fast.capacity == pytest.approx(100e9 / 8 * 0.9)


def test_tensor_parallel_splits_the_step_over_the_ranks_and_adds_two_all_reduces_per_layer():
    s = stack(pd(tp=2))
    m = costs.model_cost(s.config.model, s.sizing.kv_bytes_per_token)
    one = costs.Card(3350e9, 989e12, 400e12)
    two = costs.tensor_parallel(one, 2, params.ALLREDUCE_BYTES_PER_S, params.ALLREDUCE_LATENCY_S)
    eff = costs.Efficiency(1.0)
    decode = [(2400, 1)] * 4
    split = costs.step_seconds(one, eff, m, decode) / 2
    latency = 2 * s.config.model.layers * params.ALLREDUCE_LATENCY_S
    assert costs.step_seconds(two, eff, m, decode) == pytest.approx(split + latency, rel=0.01)
    assert [w.card.ranks for w in placement.workers(s.config, s.sizing)] == [2] * 4
    low, high = params.ALLREDUCE_BYTES_PER_S_RANGE
    assert low <= params.ALLREDUCE_BYTES_PER_S <= high


def test_a_prediction_beyond_the_lab_runs_and_says_it_is_outside_the_validation():
    s = stack(pd(tp=2, transport="rdma"))
    row, usage = cells.simulate(s.config, s.sizing, 2, 4, graphs=1, runs=1)
    assert row.ttft_p50_ms > 0
    assert set(usage.gpu_busy) == {f"gpu-80gb node {k} of 2 GPUs {g}" for k in (1, 2) for g in ("0-1", "2-3")}
    outside = " ".join(envelope(s.resolved, 2, 4).outside)
    assert "tensorParallel 2" in outside and "GPU class gpu-80gb" in outside and "UCX rc,self" in outside
