"""advise beyond the lab (issue 34, item 5): a class of several nodes, whole GPUs and tensor
parallelism; the search up to symmetry, bounded, pruned by the sizing before any prediction."""

from __future__ import annotations

from dynamo_lab import stack_files
from dynamo_lab.advise import candidates, inputs, search
from dynamo_lab.advise.stack_file import candidate_config, gpu_classes
from dynamo_lab.predict import placement
from dynamo_lab.preflight import cluster_data
from infra import kv_ranks
from infra.plan import load_stack
from tests.helpers import ROOT
from tests.lab.advise.common import advise, base, point

SAVED = ROOT / "tests" / "data" / "preflight"
TWO_SERVERS = cluster_data.read_file(str(SAVED / "lab-two-servers.json"))


def _cfg(config):
    return load_stack("advised", *stack_files.config_from_doc(config)).config


def test_on_the_lab_with_a_second_24gb_server_no_class_is_left_out_and_layouts_use_both_servers():
    a = advise(data=TWO_SERVERS, traffic=point(2, 4))
    assert a.left_out == []
    assert [(n.gpu_class, n.nodes, n.node) for n in a.nodes] == [
        ("gpu-24gb", 2, "gpu-server, gpu-server-2"), ("gpu-8gb", 1, "gpu-laptop")]
    both = []
    for c in a.ranked:
        on = {w.node for w in placement.workers(c.stack.config, c.stack.sizing) if w.gpu.startswith("gpu-24gb")}
        if on == {"gpu-24gb node 1 of 2", "gpu-24gb node 2 of 2"}:
            both.append(c)
    assert both, [c.layout.label for c in a.ranked]
    # Each candidate says what the cluster has: the 24GB class's two nodes, each group spread even.
    workers = both[0].stack.config.workers
    assert both[0].stack.config.gpu_classes["gpu-24gb"].nodes == 2
    assert all(g.spread == "even" for g in workers if g.gpu_class == "gpu-24gb")
    # A GPU of a class of several nodes is named by itself ("gpu-24gb[2] GPU 0 busy"), never "GPU 0's GPU".
    sliced = [c.binding.detail for c in a.ranked if c.binding and c.binding.resource == "GPU time-slices"]
    on_two = [d for d in sliced if d.startswith("gpu-24gb")]
    assert on_two and all(" GPU 0 busy " in d and "'s GPU" not in d for d in on_two), sliced
    # Pruned before prediction: what the sizing refused was never simulated.
    refused = [c for c in a.candidates if c.status == search.REFUSED_CONFIG]
    assert refused and all(not c.rows for c in refused)


def test_identical_nodes_are_interchangeable_so_a_layout_is_a_count_per_class():
    nodes, _ = candidates.class_nodes(_cfg(base()), TWO_SERVERS)
    layouts = candidates.layouts(nodes)
    aggregated = [x for x in layouts if x.kind == candidates.AGGREGATED]
    # 0-8 on the two 24GB servers together x 0-4 on the laptop, less the empty one: 44, not the
    # 5 x 5 x 5 - 1 = 124 of counting each server's workers apart.
    assert len(aggregated) == 9 * 5 - 1
    assert len({x.label for x in layouts}) == len(layouts)
    # A second server adds layouts only where they fit: no node gets more workers than its units.
    for x in layouts:
        per_node = sum(-(-g.replicas // 2) for g in x.groups if g.gpu_class == "gpu-24gb")
        assert per_node <= 4


def test_whole_gpus_offer_each_tensor_parallel_size_that_divides_the_heads():
    config = base("two-node-rdma")
    data = cluster_data.read_file(str(SAVED / "two-8gpu-rdma.json"))
    cfg = _cfg(config)
    nodes, left_out = candidates.class_nodes(cfg, data)
    (n,) = nodes
    assert (n.gpu_class, n.nodes, n.gpus_per_node, n.sharing, n.tensor_parallel) == (
        "gpu-80gb", 2, 8, "whole", (1, 2, 4, 8))  # Qwen3-32B: 64 attention heads, 8 KV heads
    layouts = candidates.layouts(nodes, max_workers=4)
    tps = {g.tensor_parallel for x in layouts for g in x.groups}
    assert tps == {1, 2, 4, 8}
    # Four workers of TP 8 need 32 GPUs: never offered on 16.
    assert all(g.replicas * g.tensor_parallel <= 16 for x in layouts for g in x.groups)
    pair = next(x for x in layouts if x.label == "1 prefill + 1 decode on gpu-80gb (TP 2)")
    doc = candidate_config(config, pair, inputs.traffic_of(cfg), gpu_classes(config, cfg, nodes))
    written = {w["role"]: w for w in doc["dynamo-lab:workers"]}
    assert written["prefill"]["tensorParallel"] == 2 and written["decode"]["spread"] == "even"
    # The base moves its KV over RDMA into GPU buffers: so does every separated candidate.
    assert written["prefill"]["kvTransfer"] == written["decode"]["kvTransfer"] == {"transport": "rdma",
                                                                                   "bufferDevice": "cuda"}
    stack = load_stack("advised", *stack_files.config_from_doc(doc))  # the sizing accepts it
    assert [g.tensor_parallel for g in stack.sizing.groups] == [2, 2]


def test_eight_nodes_are_searched_within_the_bound():
    data = cluster_data.read_file(str(SAVED / "eight-nodes.json"))
    nodes, left_out = candidates.class_nodes(_cfg(base()), data)
    assert left_out == [] and [(n.gpu_class, n.nodes) for n in nodes] == [("gpu-24gb", 5), ("gpu-8gb", 3)]
    assert len(candidates.layouts(nodes)) > search.MAX_LAYOUTS >= len(candidates.layouts(nodes, max_workers=8))


def test_whole_gpus_offer_prefill_and_decode_of_two_sizes_that_pair_in_whole_nodes_worth_of_gpus():
    config = base("two-node-rdma")
    data = cluster_data.read_file(str(SAVED / "two-8gpu-rdma.json"))
    cfg = _cfg(config)
    nodes, _ = candidates.class_nodes(cfg, data)
    layouts = candidates.layouts(nodes)
    mixed = [x for x in layouts if len({g.tensor_parallel for g in x.groups}) > 1]
    assert len(layouts) - len(mixed) == 170  # the layouts of one size, as before
    for x in mixed:
        prefill, decode = x.groups
        # Sizes vLLM's NixlConnector pairs, taking 8 or 16 of the two nodes' GPUs.
        assert kv_ranks.refusal(prefill.tensor_parallel, decode.tensor_parallel, cfg.model.kv_heads) is None
        assert sum(g.replicas * g.tensor_parallel for g in x.groups) in (8, 16)
    labels = {x.label for x in mixed}
    assert {"4 prefill (TP 1) + 1 decode (TP 4) on gpu-80gb",
            "2 prefill (TP 4) + 4 decode (TP 2) on gpu-80gb"} <= labels
    assert len(labels) == len(mixed) == 20
    # The candidate as a stack file: each group its own size, which the config and sizing take.
    x = next(x for x in mixed if x.label == "4 prefill (TP 1) + 1 decode (TP 4) on gpu-80gb")
    doc = candidate_config(config, x, inputs.traffic_of(cfg), gpu_classes(config, cfg, nodes))
    written = {w["role"]: w for w in doc["dynamo-lab:workers"]}
    assert "tensorParallel" not in written["prefill"] and written["decode"]["tensorParallel"] == 4
    (t,) = load_stack("advised", *stack_files.config_from_doc(doc)).sizing.transfers
    assert [(r.decode_rank, r.prefill_rank) for r in t.rank_reads] == [(0, 0), (1, 0), (2, 0), (3, 0)]
