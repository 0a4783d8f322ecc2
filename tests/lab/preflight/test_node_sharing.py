"""Preflight judges the stack file's GPU classes against the nodes as they are (dynamo_lab/preflight/
gpus.py, classes.pre_pull_problem, shortfall.rdma_fix): a node's physical GPUs (nvidia.com/gpu.count)
and its time-slicing (allocatable over them, or GFD's nvidia.com/gpu.replicas) against the class's
sharing, gpusPerNode and slicesPerGpu; the nodes a per-node model cache's pre-pull fills against the
nodes the class selects; an RDMA resource the nodes lack, with the RDMA device plugin's fix."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from dynamo_lab.preflight.run import check
from tests.helpers import loaded
from tests.lab.preflight.test_packing import BIG, LAB, RDMA, SMALL, TWO_SERVERS


def classes(**big):
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [BIG], **big},
                           "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [SMALL]}}
    return edit


def test_two_slices_a_gpu_planned_on_a_node_sliced_four_ways_is_a_problem():
    """The review's repro: 4 workers planned 2 a card (slicesPerGpu 2 over 2 GPUs) on the lab's one
    card sliced 4 ways: all 4 share it."""
    def edit(c):
        classes(slicesPerGpu=2, gpusPerNode=2)(c)
        c["workers"][0].update(replicas=4)
    report = check(loaded("kv-routing", edit), LAB)
    assert not report.fits
    (problem,) = report.problems
    assert (problem.where, problem.check) == ("node gpu-server", "gpu memory")
    assert "4 gpu-24gb workers land on gpu-server, where up to 4 may share one GPU" in problem.problem
    assert "the sizing planned each GPU for 2" in problem.problem
    assert "time-sliced 4 ways (nvidia.com/gpu.replicas=4" in problem.problem
    assert "gpuClasses.gpu-24gb.slicesPerGpu says 2" in problem.problem
    assert problem.fix.startswith("Give the NVIDIA device plugin `replicas: 2` on gpu-server")
    assert "gpuClasses.gpu-24gb.slicesPerGpu: 4" in problem.fix
    gpu = next(n.gpu_memory for n in report.nodes if n.name == "gpu-server")
    assert (gpu.workers, gpu.sharing, gpu.planned_sharing, gpu.ok) == (4, 4, 2, False)
    fewer = "node gpu-server: has 1 GPU (nvidia.com/gpu.count), fewer than the 2"
    assert any(n.startswith(fewer) for n in report.notes)


def test_whole_gpus_planned_on_time_sliced_nodes_of_one_gpu_are_problems():
    """The review's repro: sharing whole, 2 GPUs a node, a TP-2 worker on each of the two servers,
    whose one card each is sliced 4 ways: the 4 units fit, the card does not."""
    def edit(c):
        classes(sharing="whole", nodes=2, gpusPerNode=2)(c)
        c["workers"][0].update(replicas=2, tensorParallel=2, spread="even")
        c["workers"][0].pop("memoryLimit", None)
    report = check(loaded("kv-routing", edit), TWO_SERVERS)
    assert not report.fits
    found = {(p.where, p.check): p for p in report.problems}
    assert set(found) == {(f"node {n}", c) for n in ("gpu-server", "gpu-server-2") for c in ("gpu sharing", "gpus")}
    sharing = found[("node gpu-server", "gpu sharing")]
    assert "gpuClasses.gpu-24gb.sharing is whole" in sharing.problem and "time-sliced 4 ways" in sharing.problem
    assert sharing.fix.startswith("Run the NVIDIA device plugin without time-slicing on gpu-server")
    assert "gpuClasses.gpu-24gb.sharing: timeSliced, slicesPerGpu: 4, and tensorParallel 1" in sharing.fix
    gpus = found[("node gpu-server", "gpus")]
    assert gpus.problem.startswith("its pods need 2 whole GPUs (1 x worker-24gb, 2 each), and it has 1 "
                                   "(nvidia.com/gpu.count) where gpuClasses.gpu-24gb.gpusPerNode plans 2")
    assert gpus.fix.startswith("Plan for the GPUs there: gpuClasses.gpu-24gb.gpusPerNode: 1")


def test_more_gpus_on_a_node_than_the_class_plans_is_a_note():
    report = check(loaded("two-node-rdma", lambda c: c["gpuClasses"]["gpu-80gb"].update(gpusPerNode=4)), RDMA)
    assert report.fits, report.problems
    assert report.notes == [f"node {n}: has 8 GPUs (nvidia.com/gpu.count), more than the 4 gpuClasses.gpu-80gb."
                            "gpusPerNode plans; the sizing planned for fewer. Write gpuClasses.gpu-80gb.gpusPerNode: "
                            "8 to plan for the GPUs there" for n in ("gpu-a", "gpu-b")]


def test_a_node_cache_class_selecting_more_nodes_than_its_pre_pull_fills_is_a_problem():
    """The review's repro: cross-server plans gpu-24gb on one node; lab-two-servers has two, and the
    pre-pull fills one (the CLI's exit 1 is what `fits` False gives)."""
    report = check(loaded("cross-server"), TWO_SERVERS)
    (problem,) = report.problems
    assert (problem.where, problem.check) == ("gpuClasses.gpu-24gb", "nodes")
    assert "the pre-pull Job fills 1 node" in problem.problem and "HF_HUB_OFFLINE=1, crash-loops" in problem.problem
    assert problem.fix.startswith("Plan for them all: gpuClasses.gpu-24gb.nodes: 2")
    assert report.notes == []
    # hostPath is a cache on each node too; pvc is one for all: the note of before.
    assert not check(loaded("cross-server", lambda c: c.update(modelCache={"mode": "hostPath"})), TWO_SERVERS).fits
    off = check(loaded("cross-server", lambda c: c.update(modelCache={"mode": "off"})), TWO_SERVERS)
    assert off.fits and off.notes[0].startswith("gpuClasses.gpu-24gb: its node selector matches 2 nodes")


def test_a_cordoned_node_leaves_a_pre_pull_pod_pending():
    cordoned = dataclasses.replace(TWO_SERVERS, nodes=[dataclasses.replace(n, unschedulable=n.name == "gpu-server-2")
                                                       for n in TWO_SERVERS.nodes])
    def two(c):
        classes(nodes=2)(c)
        c["workers"][0].update(replicas=2, spread="onePerNode")
    problem = next(p for p in check(loaded("kv-routing", two), cordoned).problems if p.where == "gpuClasses.gpu-24gb")
    assert "1 of its nodes take pods (gpu-server-2 cordoned or tainted): 1 pre-pull pod(s) would stay Pending" \
        in problem.problem
    assert problem.fix.startswith("Make gpu-server-2 schedulable")


def _rdma(nodes: tuple[str, ...], instead: str = "") -> object:
    def strip(n):
        have = {k: v for k, v in n.allocatable.items() if not k.startswith("rdma/")}
        return dataclasses.replace(n, allocatable={**have, **({instead: Fraction(1000)} if instead else {})})
    return dataclasses.replace(RDMA, nodes=[strip(n) if n.name in nodes else n for n in RDMA.nodes])


def test_a_missing_rdma_resource_names_the_rdma_device_plugin_and_the_class_key():
    report = check(loaded("two-node-rdma"), _rdma(("gpu-b",)))
    assert [p.pod for p in report.pending] == ["prefill-1", "decode-1"]
    for problem in report.problems:
        assert problem.fix.startswith("Install the RDMA device plugin (k8s-rdma-shared-dev-plugin")
        assert "on gpu-b" in problem.fix and "gpuClasses.gpu-80gb.rdmaResource" in problem.fix
        assert "time-slicing" not in problem.fix and "NVIDIA device plugin" not in problem.fix
    renamed = check(loaded("two-node-rdma"), _rdma(("gpu-b",), "rdma/hca_shared_devices_a"))
    assert renamed.problems and all(p.fix.startswith(
        "On gpu-b the RDMA device plugin advertises rdma/hca_shared_devices_a instead of rdma/rdma_shared_device_a: "
        "set gpuClasses.gpu-80gb.rdmaResource: rdma/hca_shared_devices_a") for p in renamed.problems)


def test_a_node_without_the_rdma_resource_its_pods_want_is_its_own_problem():
    def one(c):  # the class narrowed to gpu-a: its Pending pods have only that node
        cls = c["gpuClasses"]["gpu-80gb"]
        cls.update(nodes=1, nodeSelector=[*cls["nodeSelector"], {"key": "kubernetes.io/hostname", "operator": "In",
                                                                 "values": ["gpu-a"]}])
        for w in c["workers"]:
            w.update(replicas=1)
    report = check(loaded("two-node-rdma", one), _rdma(("gpu-a",)))
    problem = next(p for p in report.problems if p.check == "rdma")
    assert problem.where == "node gpu-a"
    assert "each worker with kvTransfer.transport: rdma requests one rdma/rdma_shared_device_a" in problem.problem
    assert problem.fix.startswith("Install the RDMA device plugin") and "time-slicing" not in problem.fix


def _relabelled(data, node: str, labels: dict):
    """`data` with `node`'s labels changed (a value None removes the label)."""
    def edit(n):
        merged = {**n.labels, **labels}
        return dataclasses.replace(n, labels={k: v for k, v in merged.items() if v is not None})
    return dataclasses.replace(data, nodes=[edit(n) if n.name == node else n for n in data.nodes])


def test_mps_sharing_is_a_problem_since_it_caps_each_workers_memory():
    # The second review: MPS caps each client at the card's memory over its replicas, which the
    # sizing (shares of an uncapped, time-sliced card) does not plan for.
    mps = _relabelled(LAB, "gpu-server", {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"})
    report = check(loaded("kv-routing"), mps)
    assert not report.fits
    (problem,) = [p for p in report.problems if p.check == "gpu sharing"]
    assert problem.where == "node gpu-server"
    assert "shares its GPUs with MPS (nvidia.com/gpu.sharing-strategy=mps, 4 replicas a GPU)" in problem.problem
    assert check(loaded("kv-routing"), LAB).fits  # the lab's own labels: time-slicing, as before


def test_without_a_gpu_count_the_replicas_label_gives_it_and_a_zero_count_is_none():
    # 4 units advertised 4 ways is one card: planned for 2 a GPU over 2 GPUs, all 4 would share it.
    def edit(c):
        classes(slicesPerGpu=2, gpusPerNode=2)(c)
        c["workers"][0].update(replicas=4)
    no_count = _relabelled(LAB, "gpu-server", {"nvidia.com/gpu.count": None})
    report = check(loaded("kv-routing", edit), no_count)
    assert not report.fits and "up to 4 may share one GPU" in report.problems[0].problem
    zero = _relabelled(LAB, "gpu-server", {"nvidia.com/gpu.count": "0"})
    assert not any("gpusPerNode: 0" in n for n in check(loaded("kv-routing"), zero).notes)
