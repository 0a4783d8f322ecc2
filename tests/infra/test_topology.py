"""Clusters beyond the lab (issue 34): GPU classes of several nodes, nodes of several GPUs, tensor
parallel workers and RDMA transfers, from the stack file to the sizing and the rendered graph."""

from __future__ import annotations

import math

import pytest

from infra import units
from infra.catalogue import DEFAULT_GPU_CLASSES
from infra.manifests.graph import GROUP_LABEL
from infra.plan import plan
from tests.helpers import components, flag, loaded, main_container, refused, run_stack

F = "Pulumi.cross-server.yaml"
# Two 8-GPU nodes of 80GB-class cards with an RDMA device plugin, as a user would describe them.
H100 = {"memory": "81559Mi", "nodes": 2, "gpusPerNode": 8, "sharing": "whole", "rdmaResource": "rdma/ib",
        "nodeSelector": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}],
        "effectiveTflops": 400, "memoryBandwidth": "3350G", "peakTflops": 989}


def _big(tp: int = 2, transport: str = "rdma", model: str = "Qwen/Qwen3-8B", **group):
    """cross-server rewritten for the 8-GPU nodes: a larger model, prefill and decode at tensorParallel `tp`."""
    def edit(c):
        c["gpuClasses"] = {"h100": dict(H100)}
        c["model"] = {"name": model}
        c["workers"] = [
            {"name": "prefill", "role": "prefill", "replicas": 2, "gpuClass": "h100", "tensorParallel": tp,
             "kvCacheBytes": "8Gi", "kvTransfer": {"transport": transport}, **group},
            {"name": "decode", "role": "decode", "replicas": 4, "gpuClass": "h100", "tensorParallel": tp,
             "kvCacheBytes": "16Gi", "kvTransfer": {"transport": transport}, "spread": "even"}]
    return edit


# --- tensor parallelism -------------------------------------------------------------------------

def test_a_tp2_worker_renders_two_gpus_and_the_flag():
    comps = components(run_stack("cross-server", _big()))
    main = main_container(comps["decode"])
    assert main["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert flag(main["args"], "--tensor-parallel-size") == "2"


def test_a_tp2_worker_sizes_its_weights_and_pool_per_gpu_and_its_host_memory_per_replica():
    stack = loaded("cross-server", _big())
    m, s = stack.config.model, stack.config.sizing
    decode = stack.sizing.group("decode")
    weights = m.parameters * m.dtype_bytes
    assert decode.tensor_parallel == 2
    assert decode.weights_bytes == math.ceil(weights / 2)  # each rank holds half the weights
    assert decode.gpu_bytes_per_worker == decode.weights_bytes + 16 * units.GI + s.gpu_overhead_per_worker
    # A rank's 16 GiB pool holds half of each block (4 of the 8 KV heads): twice the blocks of one GPU.
    per_token = 2 * m.layers * m.kv_heads * m.head_dim * m.dtype_bytes
    assert decode.pool_blocks == 16 * units.GI // (per_token * 16 // 2)
    # One pod mirrors both ranks' pools, and runs a vLLM process per rank.
    floor = 2 * s.vllm_base_memory + 2 * 16 * units.GI * (1 + s.host_headroom_percent / 100)
    assert decode.host_memory_floor_bytes == units.ceil_mi(floor)
    # Whole GPUs: one rank per GPU, so a GPU carries one worker's share.
    (fit,) = stack.sizing.gpus
    assert (fit.sharing, fit.planned_bytes, fit.gpus_needed) == (1, decode.gpu_bytes_per_worker, 2 * 2 + 4 * 2)


def test_tp1_renders_no_tensor_parallel_flag_and_one_gpu():
    main = main_container(components(run_stack("cross-server"))["decode"])
    assert "--tensor-parallel-size" not in main["args"]
    assert main["resources"]["requests"]["nvidia.com/gpu"] == "1"


@pytest.mark.parametrize("tp, heads", [(3, "32 attention heads")])
def test_a_tp_that_does_not_divide_the_heads_is_refused_with_the_sizes_that_do(tp, heads):
    def edit(c):
        _big(tp)(c)
        c["gpuClasses"]["h100"]["gpusPerNode"] = 16
    msg = str(refused("cross-server", edit))
    assert f"workers.prefill.tensorParallel: tensorParallel {tp} does not divide Qwen/Qwen3-8B's {heads}" in msg
    # The sizes that fit both head counts and the node: 16 divides the 32 attention heads, not the 8 KV
    # heads, and would be refused in turn.
    assert "Write one of [1, 2, 4, 8]" in msg and "16]" not in msg


def test_a_tp_that_would_replicate_kv_heads_is_refused_as_the_sizings_limit_not_vllms():
    # 16 ranks over Qwen3-8B's 8 KV heads: vLLM 0.31.0 runs it, each KV head on 2 ranks
    # (QKVParallelLinear: num_kv_head_replicas = tp / kv heads), and the sizing, which splits a
    # token's KV over the ranks, does not model that. The refusal must not blame vLLM.
    def edit(c):
        _big(16)(c)
        c["gpuClasses"]["h100"]["gpusPerNode"] = 16
    msg = dict(refused("cross-server", edit).problems)["workers.prefill.tensorParallel"]
    assert msg.startswith("tensorParallel 16 is above Qwen/Qwen3-8B's 8 KV heads (model.kvHeads): vLLM would hold "
                          "each KV head on 2 ranks, which the sizing does not model")
    assert "vLLM refuses" not in msg and "Write one of [1, 2, 4, 8]" in msg


def test_a_tp_above_the_gpus_of_one_node_is_refused():
    def edit(c):
        _big(4)(c)
        c["gpuClasses"]["h100"]["gpusPerNode"] = 2
    msg = str(refused("cross-server", edit))
    assert ("tensorParallel 4 needs 4 GPUs on one node, and a h100 node has 2 (gpuClasses.h100.gpusPerNode); the "
            "pod would stay Pending. Write at most 2") in msg


def test_tp_on_time_sliced_gpus_is_refused():
    def edit(c):
        _big()(c)
        c["gpuClasses"]["h100"]["sharing"] = "timeSliced"
    msg = str(refused("cross-server", edit))
    assert "whose GPUs are time-sliced: two of a pod's slices may be the same card" in msg


def _mixed(prefill_tp: int, prefill_replicas: int, decode_tp: int, decode_replicas: int, **model):
    """_big with each role its own tensorParallel and replicas (and the model's geometry edited)."""
    def edit(c):
        _big()(c)
        c["model"].update(model)
        for w, tp, n in zip(c["workers"], (prefill_tp, decode_tp), (prefill_replicas, decode_replicas), strict=True):
            w.update(tensorParallel=tp, replicas=n)
    return edit


# A model of 10 KV heads and 40 attention heads (Phi-3-medium's counts): tensorParallel 1, 2, 5 and
# 10 divide both, and 2 and 5 divide neither each other. 16 GPUs a node, so 10 fits one.
TEN_HEADS = {"name": "example/ten-kv-heads", "layers": 40, "kvHeads": 10, "headDim": 128, "attentionHeads": 40,
             "parameters": 14_000_000_000}


def _sixteen_gpus(edit):
    def wrapped(c):
        edit(c)
        c["gpuClasses"]["h100"]["gpusPerNode"] = 16
    return wrapped


# Counts that fit the two 8-GPU nodes whichever group's pods the scheduler gets first (a TP 8 decode
# pod beside one TP 2 prefill pod: two would take a GPU of each node where they came first).
@pytest.mark.parametrize("prefill_tp, prefill_replicas, decode_tp, decode_replicas",
                         [(1, 4, 4, 2), (1, 6, 2, 4), (4, 2, 2, 4), (4, 2, 1, 8), (2, 1, 8, 1)])
def test_prefill_and_decode_of_different_tp_are_taken_where_nixl_pairs_them(prefill_tp, prefill_replicas,
                                                                              decode_tp, decode_replicas):
    # Any replica ratio, and each side's own --tensor-parallel-size and GPUs per pod.
    comps = components(run_stack("cross-server", _mixed(prefill_tp, prefill_replicas, decode_tp, decode_replicas)))
    for name, tp, n in (("prefill", prefill_tp, prefill_replicas), ("decode", decode_tp, decode_replicas)):
        main = main_container(comps[name])
        assert main["resources"]["requests"]["nvidia.com/gpu"] == str(tp)
        assert ("--tensor-parallel-size" in main["args"]) == (tp > 1)
        if tp > 1:
            assert flag(main["args"], "--tensor-parallel-size") == str(tp)
        assert comps[name]["replicas"] == n


@pytest.mark.parametrize("prefill_tp, decode_tp, fits", [(2, 5, "[1, 2, 10]"), (5, 2, "[1, 5, 10]")])
def test_a_pair_whose_sizes_do_not_divide_is_refused_with_vllms_reason_and_the_sizes_that_pair(prefill_tp, decode_tp,
                                                                                               fits):
    msg = str(refused("cross-server", _sixteen_gpus(_mixed(prefill_tp, 1, decode_tp, 1, **TEN_HEADS))))
    local, remote = (decode_tp, prefill_tp) if decode_tp > prefill_tp else (prefill_tp, decode_tp)
    said = (f"Local tensor parallel size {local} is not divisible by remote tensor parallel size {remote}"
            if decode_tp > prefill_tp else
            f"Remote tensor parallel size {local} is not divisible by local tensor parallel size {remote}")
    assert (f"Pulumi.cross-server.yaml: workers.decode.tensorParallel: prefill 'prefill' and decode 'decode' run "
            f"tensorParallel {prefill_tp} and {decode_tp}: neither divides the other") in msg
    assert f"TransferTopology.tp_ratio asserts: \"{said}.\"" in msg
    assert f"Write a decode tensorParallel of {fits}" in msg
    # One problem, the pair's: each size on its own divides the heads and fits the node.
    assert msg.count("tensorParallel:") == 1


def test_a_pair_of_sizes_that_divide_is_taken_on_that_model():
    stack = loaded("cross-server", _sixteen_gpus(_mixed(2, 2, 10, 1, **TEN_HEADS)))
    assert [g.tensor_parallel for g in stack.config.workers] == [2, 10]


def test_a_size_refused_on_its_own_is_said_once_not_again_for_the_pair():
    msg = str(refused("cross-server", _mixed(2, 1, 3, 1)))
    assert "workers.decode.tensorParallel: tensorParallel 3 does not divide Qwen/Qwen3-8B's 32 attention heads" in msg
    assert "neither divides the other" not in msg


def test_each_decode_rank_of_a_mixed_pair_is_sized_reading_its_heads_from_the_prefill_rank_holding_them():
    # Four TP1 prefill workers into one TP4 decode worker: each decode rank pulls its 2 of Qwen3-8B's
    # 8 KV heads from the one prefill rank, a quarter of the request's bytes each.
    stack = loaded("cross-server", _mixed(1, 4, 4, 1))
    (t,) = stack.sizing.transfers
    assert [(x.decode_rank, x.prefill_rank, x.heads, x.first_head) for x in t.rank_reads] == \
        [(0, 0, 2, 0), (1, 0, 2, 2), (2, 0, 2, 4), (3, 0, 2, 6)]
    assert {x.cold_bytes for x in t.rank_reads} == {t.cold_bytes // 4}
    assert sum(x.warm_bytes for x in t.rank_reads) == t.warm_bytes
    # The other way: a TP4 prefill worker into TP2 decode workers, each decode rank from two.
    (t,) = loaded("cross-server", _mixed(4, 1, 2, 2)).sizing.transfers
    assert [(x.decode_rank, x.prefill_rank, x.heads) for x in t.rank_reads] == \
        [(0, 0, 2), (0, 1, 2), (1, 2, 2), (1, 3, 2)]
    assert sum(x.cold_bytes for x in t.rank_reads) == t.cold_bytes


def test_a_tp1_pair_is_one_read_of_the_whole_request():
    (t,) = loaded("cross-server").sizing.transfers
    assert [(x.decode_rank, x.prefill_rank, x.cold_bytes) for x in t.rank_reads] == [(0, 0, t.cold_bytes)]


@pytest.mark.parametrize("rate, flows_bps", [("100gbit", 4 * 940e6), ("10gbit", 10e9 / 8 * 0.9)])
def test_rank_reads_over_tcp_move_side_by_side_up_to_the_link(rate, flows_bps):
    # Four reads, each between its own ranks' NIXL agents, each at most the TCP software path (READ,
    # 940 MB/s); together no more than the link carries.
    def edit(c):
        _mixed(1, 4, 4, 1)(c)
        c["sizing"] = {"link": {"rate": rate, "efficiency": 0.9}}
        for w in c["workers"]:
            w["kvTransfer"] = {"transport": "tcp"}
    (t,) = loaded("cross-server", edit).sizing.transfers
    assert t.throughput_bytes_per_s == pytest.approx(flows_bps)
    assert ("4 rank pairs side by side" in t.throughput_source) == (rate == "100gbit")


def test_more_whole_gpus_than_the_nodes_hold_is_refused_with_the_count():
    def edit(c):
        _big()(c)
        c["workers"][1]["replicas"] = 7  # 2 x 2 + 7 x 2 = 18 GPUs, the class has 16
    msg = str(refused("cross-server", edit))
    assert "gpuClasses.h100: its workers need 18 whole GPUs" in msg
    assert "2 nodes x 8 GPUs (nodes, gpusPerNode) cannot hold them" in msg


# --- RDMA ---------------------------------------------------------------------------------------

PVC_8B = {"mode": "pvc", "pvc": {"storageClass": "nfs", "size": "16Gi"}}  # holds Qwen3-8B's 15.3Gi


@pytest.mark.parametrize("cache, level", [({}, "baseline"), ({"mode": "off"}, "restricted"), (PVC_8B, "restricted")])
def test_an_rdma_worker_requests_the_device_adds_no_capability_and_its_namespace_follows_the_cache(cache, level):
    # IPC_LOCK could not take effect for the worker's uid 1000 (infra/manifests/security.py), so
    # none is added, and the RDMA workers leave the namespace where the model cache puts it: baseline
    # for the node cache's root step, restricted without it (issue 43: it was privileged).
    run = run_stack("cross-server", lambda c: (_big()(c), c.update(modelCache=cache)))
    main = main_container(components(run)["prefill"])
    assert main["resources"]["requests"]["rdma/ib"] == "1"
    assert main["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert {e["name"]: e["value"] for e in main["env"]}["UCX_TLS"] == "rc,self"
    (ns,) = [r for r in run.of_type("kubernetes:core/v1:Namespace")
             if r.inputs["metadata"]["name"] == "dynamo-lab-cross-server"]
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == level


def test_tcp_workers_keep_no_capability_and_request_no_rdma_device():
    main = main_container(components(run_stack("cross-server", _big(transport="tcp")))["prefill"])
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "rdma/ib" not in main["resources"]["requests"]


def test_rdma_on_a_class_without_an_rdma_device_is_refused():
    def edit(c):
        _big()(c)
        del c["gpuClasses"]["h100"]["rdmaResource"]
    assert ("workers.prefill.kvTransfer.transport: transport rdma needs an RDMA device in each pod, and GPU class "
            "'h100' names none. Set gpuClasses.h100.rdmaResource") in str(refused("cross-server", edit))


def test_gpu_buffers_are_refused_over_tcp_and_taken_over_rdma():
    def cuda(transport):
        def edit(c):
            _big(transport=transport)(c)
            for w in c["workers"]:
                w["kvTransfer"]["bufferDevice"] = "cuda"
        return edit
    assert ("cuda buffers over UCX_TLS=tcp,self (TCP only) crash UCX copying GPU memory over TCP (segfault in "
            "uct_tcp_ep_am_bcopy)") in str(refused("cross-server", cuda("tcp")))
    stack = loaded("cross-server", cuda("rdma"))
    assert [g.kv_transfer.ucx_tls for g in stack.config.workers] == ["rc,cuda_copy,self"] * 2
    # GPU buffers keep no host mirror: the floor is the ranks' vLLM base alone.
    assert stack.sizing.group("decode").host_memory_floor_bytes == 2 * stack.config.sizing.vllm_base_memory


def test_rdma_transports_under_transport_tcp_are_refused():
    def edit(c):
        c["workers"][0]["kvTransfer"] = {"ucxTls": "rc,self"}
    assert ("workers.prefill.kvTransfer.ucxTls: UCX_TLS=rc,self names RDMA transports (rc) but transport is "
            "tcp") in str(refused("cross-server", edit))


def test_a_pair_on_two_transports_is_refused():
    def edit(c):
        _big()(c)
        c["workers"][1]["kvTransfer"] = {"transport": "tcp"}
    assert "prefill 'prefill' and decode 'decode' use transports rdma and tcp" in str(refused("cross-server", edit))


def test_an_rdma_transfer_goes_at_the_link_not_the_tcp_software_path():
    def edit(c):
        _big()(c)
        c["sizing"] = {"link": {"rate": "100gbit", "efficiency": 0.9}}
    (t,) = loaded("cross-server", edit).sizing.transfers
    # One class of two nodes: the pair may be on two nodes, so the sizing takes the cross-node path.
    assert (t.path, t.transport) == ("cross-node", "rdma")
    assert t.throughput_bytes_per_s == pytest.approx(100e9 / 8 * 0.9)
    assert "UCX over RDMA, an ESTIMATE" in t.throughput_source


# --- several nodes per class, spread ------------------------------------------------------------

def _two_servers(spread: str, replicas: int = 8):
    """kv-routing's 24GB class as two servers, `replicas` aggregated workers on it."""
    def edit(c):
        c["gpuClasses"] = {**DEFAULT_GPU_CLASSES, "gpu-24gb": {**DEFAULT_GPU_CLASSES["gpu-24gb"], "nodes": 2}}
        c["workers"] = [{"name": "worker", "role": "agg", "replicas": replicas, "gpuClass": "gpu-24gb",
                         "spread": spread}]
    return edit


def test_workers_spread_evenly_over_two_servers_share_each_gpu_four_ways():
    spread = loaded("kv-routing", _two_servers("even"))
    four = loaded("kv-routing", lambda c: c.update(workers=[
        {"name": "worker", "role": "agg", "replicas": 4, "gpuClass": "gpu-24gb"}]))
    assert spread.sizing.gpus[0].sharing == 4
    assert spread.sizing.group("worker").kv_cache_bytes == four.sizing.group("worker").kv_cache_bytes
    # Without a spread the scheduler may put all eight on one server, whose GPU cannot hold them.
    msg = str(refused("kv-routing", _two_servers("none")))
    assert "leaves 90.0Mi of KV pool per worker for 8 workers" in msg
    assert "or spread them over the class's 2 nodes (workers.worker.spread: even" in msg


def test_spread_even_renders_a_topology_spread_constraint_on_the_groups_own_label():
    comp = components(run_stack("kv-routing", _two_servers("even")))["worker"]
    label = comp["podTemplate"]["metadata"]["labels"][GROUP_LABEL]
    assert label == "kv-routing-worker"
    (rule,) = comp["podTemplate"]["spec"]["topologySpreadConstraints"]
    assert rule == {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {GROUP_LABEL: label}}}


def test_spread_one_per_node_renders_anti_affinity_beside_the_node_affinity():
    comp = components(run_stack("kv-routing", _two_servers("onePerNode", replicas=2)))["worker"]
    affinity = comp["podTemplate"]["spec"]["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": {GROUP_LABEL: "kv-routing-worker"}},
                    "topologyKey": "kubernetes.io/hostname"}


def test_one_per_node_with_more_replicas_than_nodes_is_refused():
    assert ("workers.worker.spread: onePerNode puts at most one of the 3 replicas on each node, and gpu-24gb has 2 "
            "(gpuClasses.gpu-24gb.nodes): 1 would stay Pending") in \
        str(refused("kv-routing", _two_servers("onePerNode", replicas=3)))


def test_the_model_cache_is_pre_pulled_on_every_node_of_a_class():
    terms = lambda job: job.manifest["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][  # noqa: E731
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    jobs = {terms(j)[0]["matchExpressions"][0]["values"][0]: j.manifest
            for j in plan(loaded("kv-routing", _two_servers("even"))).of_kind("Job")}
    assert jobs["20000"]["spec"]["completions"] == jobs["20000"]["spec"]["parallelism"] == 2
    (apart,) = jobs["20000"]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    assert apart["labelSelector"]["matchLabels"]["batch.kubernetes.io/job-name"] == jobs["20000"]["metadata"]["name"]
    # A class of one node: one pod, as before.
    assert all("completions" not in j.manifest["spec"] for j in plan(loaded("cross-server")).of_kind("Job"))


def test_slices_per_gpu_on_a_whole_class_is_refused():
    def edit(c):
        _big()(c)
        c["gpuClasses"]["h100"]["slicesPerGpu"] = 4
    assert ("gpuClasses.h100.slicesPerGpu: slicesPerGpu applies to sharing: timeSliced only"
            in str(refused("cross-server", edit)))


def test_the_probe_is_refused_where_the_kv_moves_over_rdma():
    def edit(c):
        _big()(c)
        c["probe"] = {"enabled": True}
    assert ("probe.enabled: the probe moves KV-sized host buffers over UCX TCP (infra/payloads/kv_probe.py), and "
            "decode, prefill move their KV over RDMA") in str(refused("cross-server", edit))


# --- what a review found --------------------------------------------------------------------------

def test_more_workers_than_the_time_sliced_units_are_refused_with_the_count():
    def edit(c):
        _two_servers("even", replicas=4)(c)
        c["gpuClasses"]["gpu-24gb"].update(nodes=1, slicesPerGpu=2)
    msg = str(refused("kv-routing", edit))
    assert ("gpuClasses.gpu-24gb: its 4 workers each take one time-sliced unit, and its nodes advertise 2 (1 node x "
            "1 GPU x 2 slices: nodes, gpusPerNode, slicesPerGpu), so 2 would stay Pending") in msg


def test_an_rdma_resource_that_is_the_gpu_resource_is_refused():
    def edit(c):
        _big()(c)
        c["gpuClasses"]["h100"]["rdmaResource"] = "nvidia.com/gpu"
    msg = str(refused("cross-server", edit))
    assert "gpuClasses.h100.rdmaResource: rdmaResource nvidia.com/gpu is the class's GPU resource" in msg


@pytest.mark.parametrize("key, value", [("nodes", 1025), ("gpusPerNode", 65), ("slicesPerGpu", 1025)])
def test_counts_past_any_cluster_are_refused_before_anything_is_sized(key, value):
    def edit(c):
        _two_servers("even", replicas=2)(c)
        c["gpuClasses"]["gpu-24gb"][key] = value
    assert f"gpuClasses.gpu-24gb.{key}" in str(refused("kv-routing", edit))


def test_a_default_class_left_out_of_a_stack_files_gpu_classes_says_they_replace_the_defaults():
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": DEFAULT_GPU_CLASSES["gpu-24gb"]}
    msg = str(refused("cross-server", edit))
    assert "unknown GPU class 'gpu-8gb'" in msg
    assert "gpuClasses in this stack file replaces the default classes, so copy each one you still use" in msg


def test_mixed_fixed_and_derived_pools_fit_whichever_workers_share_a_gpu():
    # Two of four workers may share a card (slicesPerGpu 2): any pair must fit, the fixed 6 GiB pool
    # with a derived one, or two derived ones; here the second binds (a derived pool comes out larger).
    def edit(c):
        c["gpuClasses"] = {**DEFAULT_GPU_CLASSES, "gpu-24gb": {**DEFAULT_GPU_CLASSES["gpu-24gb"], "nodes": 2,
                                                              "slicesPerGpu": 2}}
        c["workers"] = [{"name": "big", "role": "agg", "replicas": 1, "gpuClass": "gpu-24gb", "kvCacheBytes": "6Gi"},
                        {"name": "small", "role": "agg", "replicas": 3, "gpuClass": "gpu-24gb"}]
    s = loaded("kv-routing", edit).sizing
    (fit,) = s.gpus
    assert fit.sharing == 2
    big, small = s.group("big"), s.group("small")
    each = big.weights_bytes + big.gpu_overhead_bytes
    assert small.kv_cache_bytes == (fit.budget_bytes - 2 * each) // 2 // units.MI * units.MI
    assert small.kv_cache_bytes > big.kv_cache_bytes
    assert fit.planned_bytes == 2 * small.gpu_bytes_per_worker <= fit.budget_bytes
    assert big.gpu_bytes_per_worker + small.gpu_bytes_per_worker <= fit.budget_bytes


def test_predict_of_a_class_without_card_figures_is_one_line_not_a_traceback(tmp_path):
    import shutil

    from tests.helpers import ROOT, run_cli

    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    text = (ROOT / "Pulumi.cross-server.yaml").read_text().replace("config:\n", (
        "config:\n  dynamo-lab:gpuClasses:\n    gpu-8gb: {memory: 8188Mi, effectiveTflops: 15, nodeSelector: "
        "[{key: nvidia.com/gpu.memory, operator: Lt, values: ['12000']}]}\n    gpu-24gb: {memory: 24564Mi, "
        "effectiveTflops: 40, nodeSelector: [{key: nvidia.com/gpu.memory, operator: Gt, values: ['20000']}]}\n"), 1)
    (tmp_path / "Pulumi.mine.yaml").write_text(text)
    result = run_cli("predict", "mine", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "memoryBandwidth" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
