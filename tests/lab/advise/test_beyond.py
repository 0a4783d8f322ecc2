"""advise beyond the lab (issue 34, item 5): a class of several nodes, whole GPUs and tensor
parallelism; the search up to symmetry, bounded, pruned by the sizing before any prediction."""

from __future__ import annotations

import functools
import re

from dynamo_lab import stack_files
from dynamo_lab.advise import candidates, inputs, search
from dynamo_lab.advise.stack_file import candidate_config, gpu_classes
from dynamo_lab.predict import placement
from dynamo_lab.preflight import cluster_data
from infra import kv_ranks
from infra.errors import ConfigError
from infra.plan import load_stack
from tests.helpers import ROOT
from tests.lab.advise.common import SHORT, advise, base, point

SAVED = ROOT / "tests" / "data" / "preflight"
TWO_SERVERS = cluster_data.read_file(str(SAVED / "lab-two-servers.json"))


@functools.lru_cache(maxsize=1)
def _two_servers() -> search.Advice:
    """One search of the lab with a second 24GB server, read by the tests below. What they read (which
    layouts the sizing takes, where their workers land, how a binding names a GPU of a class of two
    nodes) does not depend on the load: one request at a time of 8 output tokens is simulated in a
    ninth of the CPU of the benchmark's 4 of 64, and still ranks layouts on both servers, GPU time
    bound alone and shared."""
    return advise(data=TWO_SERVERS, traffic=point(2, 1, output_tokens=SHORT))


def _cfg(config):
    return load_stack("advised", *stack_files.config_from_doc(config)).config


def test_on_the_lab_with_a_second_24gb_server_no_class_is_left_out_and_layouts_use_both_servers():
    a = _two_servers()
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
    gpu_bound = [c.binding for c in a.ranked if c.binding and c.binding.resource in ("GPU time", "GPU time-slices")]
    on_two = [b.detail for b in gpu_bound if b.detail.startswith("gpu-24gb")]
    assert on_two and all(" GPU 0 busy " in d and "'s GPU" not in d for d in on_two), gpu_bound
    # Time-slices bind only where workers share the GPU; a GPU with one worker is that worker's GPU time.
    for b in gpu_bound:
        shared = re.search(r"shared by (\d+) workers", b.detail)
        assert (b.resource == "GPU time-slices") == bool(shared) and (not shared or int(shared[1]) >= 2), b
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
    # The search counts up to the class's GPU units in all (8 over the two servers); whether a node
    # takes its share is the placement decision's, through each candidate's sizing.
    assert all(sum(g.replicas for g in x.groups if g.gpu_class == "gpu-24gb") <= 8 for x in layouts)


def test_which_layouts_fit_the_nodes_is_the_placement_decisions_not_the_searchs():
    # 3 prefill + 5 decode, each group spread even over two servers of 4 GPU units: rounded up per
    # group that is 2 + 3 on one node, but the scheduler puts them 2 + 2 and 1 + 3 in either order the
    # operator creates them, and the placement decision says so. The search once left such layouts
    # out by its own arithmetic; now the sizing takes them, and refuses what no order places.
    a = _two_servers()
    by_label = {c.layout.label: c for c in a.candidates}
    for label in ("3 prefill + 5 decode on gpu-24gb", "1 prefill + 7 decode on gpu-24gb"):
        assert by_label[label].status != search.REFUSED_CONFIG, label
        assert by_label[label].stack.resolved.placement.unplaced("gpu-24gb") == []


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
    # The layouts of one size: 185, of which the search's own per-node arithmetic once kept 170; the
    # placement decision takes the other 15 too (3 prefill + 5 decode at TP 2, each group spread even:
    # 2 + 2 pods on one node and 1 + 3 on the other, in either order the operator creates them).
    assert len(layouts) - len(mixed) == 185
    for x in mixed:
        prefill, decode = x.groups
        # Sizes vLLM's NixlConnector pairs, taking 8 or 16 of the two nodes' GPUs.
        assert kv_ranks.refusal(prefill.tensor_parallel, decode.tensor_parallel, cfg.model.kv_heads) is None
        assert sum(g.replicas * g.tensor_parallel for g in x.groups) in (8, 16)
    labels = {x.label for x in mixed}
    assert {"4 prefill (TP 1) + 1 decode (TP 4) on gpu-80gb",
            "2 prefill (TP 4) + 4 decode (TP 2) on gpu-80gb"} <= labels
    assert len(labels) == len(mixed) == 42
    # Which of them the nodes take is the sizing's (the placement decision): 20, as the search's own
    # arithmetic had it; the other 22 are refused there, before anything is simulated.
    placed = []
    for x in mixed:
        try:
            load_stack("advised", *stack_files.config_from_doc(
                candidate_config(config, x, inputs.traffic_of(cfg), gpu_classes(config, cfg, nodes))))
            placed.append(x.label)
        except ConfigError:
            pass
    assert len(placed) == 20 and {"4 prefill (TP 1) + 1 decode (TP 4) on gpu-80gb"} <= set(placed)
    # The candidate as a stack file: each group its own size, which the config and sizing take.
    x = next(x for x in mixed if x.label == "4 prefill (TP 1) + 1 decode (TP 4) on gpu-80gb")
    doc = candidate_config(config, x, inputs.traffic_of(cfg), gpu_classes(config, cfg, nodes))
    written = {w["role"]: w for w in doc["dynamo-lab:workers"]}
    assert "tensorParallel" not in written["prefill"] and written["decode"]["tensorParallel"] == 4
    (t,) = load_stack("advised", *stack_files.config_from_doc(doc)).sizing.transfers
    assert [(r.decode_rank, r.prefill_rank) for r in t.rank_reads] == [(0, 0), (1, 0), (2, 0), (3, 0)]
