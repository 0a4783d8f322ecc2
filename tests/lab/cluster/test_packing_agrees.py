"""Preflight's packing (dynamo_lab/preflight/packing.py) against the real kube-scheduler, on kwok
clusters beyond the lab's one node per class (issue 34, item 3): the lab with a second 24GB server
(tests/data/preflight/lab-two-servers.json: 3 nodes) and two 8-GPU H100 nodes with an RDMA device
beside a CPU node (two-8gpu-rdma.json: 3 nodes). Each cluster runs in its own network namespace, as
every cluster of this tier.

For each stack the worker pods are made from the plan's pod templates (labels included, which the
spread rules select by) and created in the order preflight packs them, which the scheduler's FIFO
queue keeps; then the scheduler's placement must agree with preflight's: the same pods Pending (with
the message preflight quotes as the start of the scheduler's), and the same number of each group's
pods per node where the spread rules fix it (even, onePerNode). With spread none the scheduler's
choice among nodes is its own (scores, then a random tie), so only what must hold is checked: every
pod on a node of its class, and as many placed. The model cache is off: its volume's node affinity
is the class's (test_placement.py checks the two agree), so the class's alone decides here."""

from __future__ import annotations

import copy
import time
from collections import Counter

import pytest

from dynamo_lab.local_cluster import harness
from dynamo_lab.preflight import packing
from dynamo_lab.preflight.pods import plan_pods
from infra.plan import plan
from tests.helpers import ROOT, loaded, wait_for
from tests.lab.cluster.test_placement import _clear, _cordon, _graph_namespace, _preflight, _scheduled
from tests.lab.cluster.test_stacks import PODS, _pods

pytestmark = pytest.mark.cluster

DATA = ROOT / "tests" / "data" / "preflight"
BIG = {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}
SMALL = {"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}
OFF = {"mode": "off"}


def _cluster(cluster_bins, tmp_path_factory, saved: str):
    state = tmp_path_factory.mktemp("cluster") / "state"
    t0 = time.monotonic()
    with harness.running(state, cluster_bins, nodes_from=DATA / saved) as handle:
        print(f"{saved}: cluster up in {time.monotonic() - t0:.1f} s")
        yield handle
    assert harness.leftovers(state) == []


@pytest.fixture(scope="module")
def two_servers(cluster_bins, tmp_path_factory):
    yield from _cluster(cluster_bins, tmp_path_factory, "lab-two-servers.json")


@pytest.fixture(scope="module")
def rdma_nodes(cluster_bins, tmp_path_factory):
    yield from _cluster(cluster_bins, tmp_path_factory, "two-8gpu-rdma.json")


def kv_routing(replicas: int, spread: str, nodes: int = 2):
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodes": nodes, "nodeSelector": [BIG]},
                           "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [SMALL]}}
        c["workers"][0].update(replicas=replicas, spread=spread)
        c["modelCache"] = OFF
    return edit


def rdma(replicas: int = 2, nodes: int = 2):
    def edit(c):
        c["gpuClasses"]["gpu-80gb"]["nodes"] = nodes
        for w in c["workers"]:
            w["replicas"] = replicas
        c["modelCache"] = OFF
    return edit


def _schedule(api, stack) -> dict[str, dict]:
    """The stack's worker pods, created in preflight's packing order, once the scheduler has decided
    each: preflight's pod name ("decode-1") -> the pod."""
    planned = plan(stack)
    _graph_namespace(api, planned)
    templates = {name: pod for name, pod, _ in _pods(planned)}
    groups = [w for w in plan_pods(planned) if w.kind == "worker"]
    ns = stack.config.graph.namespace
    names = {}
    for p in packing.pods(groups):
        pod = copy.deepcopy(templates[p.group.name])
        pod["metadata"]["labels"].update(p.group.labels)  # the template's labels, which the spread selects
        pod["metadata"]["name"] += "-" + p.name.rsplit("-", 1)[1]
        assert api.create(PODS.format(ns=ns), pod) == 201
        names[pod["metadata"]["name"]] = p.name

    def decided():
        pods = [p for p in api.call("GET", PODS.format(ns=ns))[1]["items"] if p["metadata"]["name"] in names]
        done = [p for p in pods if p["spec"].get("nodeName") or _scheduled(p).get("reason") == "Unschedulable"]
        return pods if len(done) == len(names) else None
    return {names[p["metadata"]["name"]]: p for p in wait_for(decided, 90)}


def _agree(api, handle, stack, spread_fixed: bool = True) -> dict[str, Counter]:
    """The scheduler's placement of `stack` against preflight's; returns it per group and node."""
    t0 = time.monotonic()
    report = _preflight(handle, stack)
    pods = _schedule(api, stack)
    try:
        real_pending = {name: f"{_scheduled(p).get('message')}" for name, p in pods.items()
                        if not p["spec"].get("nodeName")}
        assert sorted(real_pending) == sorted(p.pod for p in report.pending), (real_pending, report.pending)
        for p in report.pending:  # the scheduler adds what preemption found after preflight's words
            assert real_pending[p.pod].startswith(p.reason), (real_pending[p.pod], p.reason)
        real = {}
        for name, p in pods.items():
            if p["spec"].get("nodeName"):
                real.setdefault(name.rsplit("-", 1)[0], Counter())[p["spec"]["nodeName"]] += 1
        mine = {}
        for row in report.nodes:
            for name in row.pods:
                mine.setdefault(name.rsplit("-", 1)[0], Counter())[row.name] += 1
        if spread_fixed:
            # What the spread fixes is each node's share, not which of two identical nodes takes the
            # larger one: the scheduler breaks a score tie at random (a CI run put prefill's 3 on gpu-b
            # where preflight put them on gpu-a). So the nodes' shares are compared as a multiset,
            # each node's counts of every group together; a node that differs (cordoned) keeps its own.
            groups = sorted(set(real) | set(mine))

            def shares(placed: dict[str, Counter]) -> Counter:
                return Counter(tuple(placed.get(g, Counter())[r.name] for g in groups) for r in report.nodes)
            assert shares(real) == shares(mine), (real, mine)
        else:
            assert {g: sum(c.values()) for g, c in real.items()} == {g: sum(c.values()) for g, c in mine.items()}
            for g in stack.config.workers:
                nodes = {r.name for r in report.nodes if any(p.rsplit("-", 1)[0] == g.name for p in r.pods)}
                assert set(real.get(g.name, {})) <= {c.name for c in report.nodes} and nodes
        print(f"{stack.name}: agreed in {time.monotonic() - t0:.1f} s: {real}; pending {sorted(real_pending)}")
        return real
    finally:
        _clear(api, stack.config.graph.namespace)


def test_eight_workers_spread_evenly_land_four_on_each_24gb_server(two_servers):
    real = _agree(two_servers.api(), two_servers, loaded("kv-routing", kv_routing(8, "even")))
    assert real["worker-24gb"] == {"gpu-server": 4, "gpu-server-2": 4}
    assert real["worker-8gb"] == {"gpu-laptop": 2}


def test_ten_workers_spread_evenly_leave_the_two_without_a_gpu_pending(two_servers):
    stack = loaded("kv-routing", kv_routing(10, "even"))
    assert [p.pod for p in _preflight(two_servers, stack).pending] == ["worker-24gb-8", "worker-24gb-9"]
    _agree(two_servers.api(), two_servers, stack)


def test_one_per_node_and_no_spread(two_servers):
    real = _agree(two_servers.api(), two_servers, loaded("kv-routing", kv_routing(2, "onePerNode")))
    assert real["worker-24gb"] == {"gpu-server": 1, "gpu-server-2": 1}
    real = _agree(two_servers.api(), two_servers, loaded("kv-routing", kv_routing(4, "none")), spread_fixed=False)
    assert set(real["worker-24gb"]) <= {"gpu-server", "gpu-server-2"}


def test_a_cordoned_server_still_counts_for_an_even_spread(two_servers):
    """nodeTaintsPolicy Ignore: the cordoned server's domain keeps the minimum at 0."""
    api = two_servers.api()
    _cordon(api, "gpu-server-2", True)
    try:
        stack = loaded("kv-routing", kv_routing(4, "even"))
        real = _agree(api, two_servers, stack)
        assert real["worker-24gb"] == {"gpu-server": 1}
    finally:
        _cordon(api, "gpu-server-2", False)


def test_the_two_node_rdma_stack_places_its_tp2_pods_one_of_each_group_a_node(rdma_nodes):
    real = _agree(rdma_nodes.api(), rdma_nodes, loaded("two-node-rdma", rdma()))
    assert real == {"prefill": {"gpu-a": 1, "gpu-b": 1}, "decode": {"gpu-a": 1, "gpu-b": 1}}


def test_too_many_tp2_pods_for_sixteen_gpus_leave_the_same_pods_pending(rdma_nodes):
    stack = loaded("two-node-rdma", rdma(replicas=5, nodes=3))
    assert [p.pod for p in _preflight(rdma_nodes, stack).pending] == ["decode-3", "decode-4"]
    _agree(rdma_nodes.api(), rdma_nodes, stack)
