"""Preflight beyond the lab's one node per class (issue 34, item 3): a GPU class over several nodes,
its workers packed per node as kube-scheduler places them (dynamo_lab/preflight/packing.py), on the
saved clusters tests/data/preflight/lab-two-servers.json (the lab plus a second 24GB server) and
two-8gpu-rdma.json (two 8-GPU H100 nodes with an RDMA device, and a CPU node)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from fractions import Fraction

import pytest

from dynamo_lab.preflight import cluster_data, packing
from dynamo_lab.preflight.pods import plan_pods
from dynamo_lab.preflight.run import check
from dynamo_lab.preflight.text import text
from infra.errors import ConfigError
from infra.plan import plan
from tests.helpers import ROOT, loaded

DATA = ROOT / "tests" / "data" / "preflight"
TWO_SERVERS = cluster_data.read_file(str(DATA / "lab-two-servers.json"))
LAB = cluster_data.read_file(str(DATA / "lab.json"))
RDMA = cluster_data.read_file(str(DATA / "two-8gpu-rdma.json"))
BIG = {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}
SMALL = {"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}
PRE_PULL_SHORT = ("The model cache is a directory on each node (modelCache.mode nodeVolume), and the pre-pull Job "
                  "fills 2 nodes (gpuClasses.gpu-24gb.nodes; one pod a node), and 1 of its nodes take pods: 1 "
                  "pre-pull pod(s) would stay Pending and `pulumi up` would fail at the Job's deadline "
                  "(modelCache.prePull.timeoutSeconds)")


def kv_routing(replicas: int, spread: str, nodes: int = 2):
    """kv-routing with its 24GB class over `nodes` servers and `replicas` aggregated workers there."""
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodes": nodes, "nodeSelector": [BIG]},
                           "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [SMALL]}}
        c["workers"][0].update(replicas=replicas, spread=spread)
    return edit


def per_node(report, group: str) -> dict[str, int]:
    return {n.name: c for n in report.nodes if (c := sum(p.rsplit("-", 1)[0] == group for p in n.pods))}


def test_eight_workers_spread_evenly_over_two_24gb_servers_fit_four_a_server():
    """Issue 34's done-when: on the lab with a second 24GB server, eight workers over the two."""
    report = check(loaded("kv-routing", kv_routing(8, "even")), TWO_SERVERS)
    assert report.fits, report.problems
    assert per_node(report, "worker-24gb") == {"gpu-server": 4, "gpu-server-2": 4}
    assert report.pending == [] and report.notes == []
    server = next(n for n in report.nodes if n.name == "gpu-server-2")
    gpu = next(r for r in server.resources if r.resource == "nvidia.com/gpu")
    assert (gpu.needs, gpu.has) == (4, 4)
    # The sizing planned each GPU for ceil(8/2) = 4 workers; 4 land on each server's one card.
    assert (server.gpu_memory.workers, server.gpu_memory.sharing, server.gpu_memory.planned_sharing) == (4, 4, 4)
    (row,) = [c for c in report.classes if c.gpu_class == "gpu-24gb"]
    assert (row.nodes, row.planned_nodes, row.ok) == (["gpu-server", "gpu-server-2"], 2, True)


def test_without_a_spread_eight_workers_are_what_the_sizing_says_eight_on_one_gpu():
    # spread none: the scheduler may pack them all on one server, so the sizing plans one GPU for 8,
    # whose pools cannot hold a sequence; it refuses the stack and names the spread that fixes it.
    with pytest.raises(ConfigError) as info:
        loaded("kv-routing", kv_routing(8, "none"))
    assert "for 8 workers" in str(info.value) and "workers.worker-24gb.spread: even" in str(info.value)
    # Four fit either way: the plan for all four on one GPU covers whatever the scheduler does.
    report = check(loaded("kv-routing", kv_routing(4, "none")), TWO_SERVERS)
    assert report.fits, report.problems
    assert sum(per_node(report, "worker-24gb").values()) == 4
    servers = [n.gpu_memory for n in report.nodes if n.gpu_memory and n.gpu_memory.gpu_class == "gpu-24gb"]
    assert servers and all(g.sharing <= g.planned_sharing == 4 for g in servers)


def test_one_per_node_puts_one_worker_on_each_server():
    report = check(loaded("kv-routing", kv_routing(2, "onePerNode")), TWO_SERVERS)
    assert report.fits, report.problems
    assert per_node(report, "worker-24gb") == {"gpu-server": 1, "gpu-server-2": 1}


def test_a_class_planning_two_servers_on_the_lab_with_one_reports_the_shortfall():
    # spread even: the one server's domain is the minimum too, so all four land there, where the
    # sizing planned each GPU for ceil(4/2) = 2.
    (problem,) = check(loaded("kv-routing", kv_routing(4, "even")), LAB).problems
    assert (problem.where, problem.check) == ("gpuClasses.gpu-24gb", "nodes")
    assert problem.problem.startswith("plans 2 nodes (gpuClasses.gpu-24gb.nodes) and its node selector matches 1 "
                                      "(gpu-server), so the sizing's per-GPU plan assumed nodes that are not there: "
                                      "4 gpu-24gb workers land on gpu-server, where up to 4 may share one GPU")
    assert "the sizing planned each GPU for 2" in problem.problem
    # The model cache is on each node (nodeVolume): the pre-pull Job's second pod has no second node.
    assert problem.problem.endswith(PRE_PULL_SHORT)
    assert problem.fix.startswith("Plan for the nodes you have: gpuClasses.gpu-24gb.nodes: 1")
    # onePerNode: the second replica has no second node.
    report = check(loaded("kv-routing", kv_routing(2, "onePerNode")), LAB)
    (problem,) = report.problems
    assert (
        "1 of its pods would stay Pending (worker-24gb-1): the scheduler would say \"0/2 nodes are available: 1 "
        "node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod anti-affinity rules.\"."
    ) in problem.problem and problem.problem.endswith(PRE_PULL_SHORT)
    assert [(p.pod, p.node) for p in report.pending] == [("worker-24gb-1", "gpu-server")]
    # The table counts it where it waits, by the group the packing gave it (not by its name).
    (row,) = [line for line in text(report).splitlines() if line.startswith("gpu-server ")]
    assert "2 x worker-24gb (1 Pending), 1 x frontend (may land here)" in row
    # spread none planned every worker on one GPU: the workers fit, but the pre-pull Job does not.
    (problem,) = check(loaded("kv-routing", kv_routing(4, "none")), LAB).problems
    assert problem.problem.endswith(PRE_PULL_SHORT) and "would stay Pending (" not in problem.problem
    # With one cache for all nodes (pvc) or none, fewer nodes only costs a note.
    for mode in ("pvc", "off"):
        def cache(c, mode=mode):
            kv_routing(4, "none")(c)
            c["modelCache"] = {"mode": mode}
        report = check(loaded("kv-routing", cache), LAB)
        assert report.fits and report.notes[0].endswith("Write gpuClasses.gpu-24gb.nodes: 1 to plan for them")


def test_the_two_node_rdma_stack_fits_two_8gpu_nodes_tp2_pods_taking_two_gpus_and_an_rdma_device():
    report = check(loaded("two-node-rdma"), RDMA)
    assert report.fits, report.problems
    for name in ("gpu-a", "gpu-b"):
        row = next(n for n in report.nodes if n.name == name)
        assert Counter(p.rsplit("-", 1)[0] for p in row.pods) == {"prefill": 1, "decode": 1}
        needs = {r.resource: (r.needs, r.has) for r in row.resources}
        assert needs["nvidia.com/gpu"] == (4, 8)  # 2 pods x tensorParallel 2
        assert needs["rdma/rdma_shared_device_a"] == (2, 1000)
    cpu = next(n for n in report.nodes if n.name == "cpu-0")
    assert cpu.pods == [] and cpu.resources == []


def test_too_many_tp_pods_for_the_gpus_leave_named_pods_pending():
    def ten(c):  # planned over 3 nodes (24 GPUs): 20 GPUs fit the plan, not the 16 there
        c["gpuClasses"]["gpu-80gb"]["nodes"] = 3
        for w in c["workers"]:
            w["replicas"] = 5
    report = check(loaded("two-node-rdma", ten), RDMA)
    reason = ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient "
              "nvidia.com/gpu.")
    assert [(p.pod, p.node, p.reason) for p in report.pending] == [("decode-3", None, reason),
                                                                   ("decode-4", None, reason)]
    (problem,) = report.problems
    assert problem.where == "gpuClasses.gpu-80gb" and "2 of its pods would stay Pending (decode-3, decode-4)" \
        in problem.problem
    # Planned for the two nodes there, the sizing refuses ten such pods before preflight.
    with pytest.raises(ConfigError, match="cannot hold them"):
        loaded("two-node-rdma", lambda c: [w.update(replicas=5) for w in c["workers"]])


def test_a_node_advertising_fewer_gpus_than_planned_leaves_pods_pending_in_the_schedulers_words():
    fewer = dataclasses.replace(RDMA, nodes=[dataclasses.replace(n, allocatable={**n.allocatable,
                                                                                 "nvidia.com/gpu": Fraction(2)})
                                             if n.name == "gpu-b" else n for n in RDMA.nodes])
    report = check(loaded("two-node-rdma"), fewer)
    (problem,) = report.problems
    assert problem.where == "workers.decode" and problem.check == "schedulable"
    assert "decode-1" in problem.problem and "1 Insufficient nvidia.com/gpu" in problem.problem
    assert "node(s) didn't match pod topology spread constraints" in problem.problem  # gpu-a has the other


def test_a_cordoned_node_of_an_evenly_spread_class_still_counts_as_a_domain():
    """PodTopologySpread's nodeTaintsPolicy defaults to Ignore: the cordoned server holds the minimum at
    0, so the other takes one worker and the rest stay Pending."""
    cordoned = dataclasses.replace(TWO_SERVERS, nodes=[dataclasses.replace(n, unschedulable=n.name == "gpu-server-2")
                                                       for n in TWO_SERVERS.nodes])
    report = check(loaded("kv-routing", kv_routing(4, "even")), cordoned)
    assert per_node(report, "worker-24gb") == {"gpu-server": 1}
    assert [p.pod for p in report.pending] == ["worker-24gb-1", "worker-24gb-2", "worker-24gb-3"]
    assert report.pending[0].reason == ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/"
                                        "selector, 1 node(s) didn't match pod topology spread constraints, 1 node(s) "
                                        "were unschedulable.")
    problem = next(p for p in report.problems if p.where == "workers.worker-24gb")
    assert "cordoned and tainted ones too (nodeTaintsPolicy Ignore)" in problem.fix


def test_packing_order_is_largest_group_first_then_the_plans_order():
    groups = [w for w in plan_pods(plan(loaded("cross-server"))) if w.kind == "worker"]
    assert [g.name for g in groups] == ["prefill", "decode"]
    assert [p.name for p in packing.pods(groups)] == ["decode-0", "decode-1", "prefill-0"]  # 4Gi pools before 2Gi


def _shares(placed: dict) -> Counter:
    return Counter(tuple(sorted(c.items())) for c in placed.values())


@pytest.mark.parametrize("replicas", [2, 3])
def test_the_stacks_nominal_nodes_and_a_cluster_of_those_nodes_get_the_same_placement(replicas):
    """Predict places two-node-rdma's replicas where preflight places its pods on two-8gpu-rdma.json,
    two 8-GPU nodes as the stack plans them: one decision (infra/placement/decide.py), fed two ways."""
    stack = loaded("two-node-rdma", lambda c: [w.update(replicas=replicas) for w in c["workers"]])
    nominal: dict[int, Counter] = {}
    for r in stack.resolved.placement.replicas:
        nominal.setdefault(r.node, Counter())[r.group.name] += 1
    report = check(stack, RDMA)
    real = {row.name: Counter(p.rsplit("-", 1)[0] for p in row.pods) for row in report.nodes if row.pods}
    assert report.pending == [] and _shares(nominal) == _shares(real)
    assert sum(real.values(), Counter()) == {"prefill": replicas, "decode": replicas}
