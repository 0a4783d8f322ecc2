"""Where the scheduler puts a stack's workers on the simulated lab nodes, and whether preflight's live
read of the same cluster predicts it, both ways. A cluster of its own: preflight reads the
namespaces, so no other test's objects may be there. The graph's pods are made from the
DynamoGraphDeployment's pod templates, as the operator would make them (test_stacks.py says why).

Two things place a worker: its GPU class's node affinity, and (modelCache.mode nodeVolume, the
default) the node affinity of its class's cache volume, which selects the same node. With the
cache off only the GPU class's affinity is left, so that is checked alone too; and a worker whose
node is cordoned stays Pending rather than take the other class's free node. A pod that stays
Pending is reported with the scheduler's own reason (its PodScheduled condition)."""

from __future__ import annotations

import copy

import pytest

from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.run import check
from infra.config.schema import ClusterTarget
from infra.plan import StackPlan, plan
from tests.helpers import STACKS, loaded, wait_for
from tests.lab.cluster.test_stacks import PODS, _namespace, _pods

pytestmark = pytest.mark.cluster

NODE_OF_CLASS = {"gpu-24gb": "gpu-server", "gpu-8gb": "gpu-laptop"}  # by their GPU memory labels


def _scheduled(pod: dict) -> dict:
    """The pod's PodScheduled condition (reason and message say why a Pending pod is not placed)."""
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {})


def _pending(placed: dict[str, list[dict]]) -> dict[str, str]:
    """Pod name -> "reason: message" of the scheduler, for every pod it did not place."""
    return {p["metadata"]["name"]: f"{_scheduled(p).get('reason')}: {_scheduled(p).get('message')}"
            for pods in placed.values() for p in pods if not p["spec"].get("nodeName")}


def _place(api, planned: StackPlan, only=None) -> dict[str, list[dict]]:
    """Create the model cache's volumes and claims and the graph's pods for real, and wait until the
    scheduler has decided each pod (a claim's volume binds it to its node, as the plan's node
    affinity says)."""
    for kind, collection in (("PersistentVolume", "/api/v1/persistentvolumes"),
                             ("PersistentVolumeClaim", "/api/v1/namespaces/{ns}/persistentvolumeclaims")):
        for o in planned.of_kind(kind):
            assert api.create(collection.format(ns=o.manifest["metadata"].get("namespace")), o.manifest) in (201, 409)
    for o in planned.of_kind("PersistentVolumeClaim"):  # the controller manager binds each to its volume
        path = f"/api/v1/namespaces/{o.manifest['metadata']['namespace']}/persistentvolumeclaims/" \
               f"{o.manifest['metadata']['name']}"
        wait_for(lambda path=path: api.call("GET", path)[1].get("status", {}).get("phase") == "Bound", 60)
    made = []
    for name, pod, replicas in _pods(planned):
        if name.startswith(("graph-model-cache", "probe", "bench")) or only and name not in only:
            continue
        for i in range(replicas):
            p = copy.deepcopy(pod)
            p["metadata"]["name"] += f"-{i}"
            assert api.create(PODS.format(ns=p["metadata"]["namespace"]), p) == 201
            made.append(p["metadata"]["name"])
    ns = planned.stack.config.graph.namespace

    def decided():
        _, body = api.call("GET", PODS.format(ns=ns))
        pods = [p for p in body["items"] if p["metadata"]["name"] in made]
        done = [p for p in pods if p["spec"].get("nodeName") or any(
            c.get("reason") == "Unschedulable" for c in p["status"].get("conditions", []))]
        return pods if len(done) == len(made) else None
    by_component: dict[str, list[dict]] = {}
    for p in wait_for(decided, 90):
        by_component.setdefault(p["metadata"]["labels"]["dynamo-lab-test/component"], []).append(p)
    return by_component


def _clear(api, ns: str) -> None:
    api.call("DELETE", PODS.format(ns=ns) + "?gracePeriodSeconds=0")
    wait_for(lambda: not api.call("GET", PODS.format(ns=ns))[1]["items"] or None)


def _preflight(handle, stack):
    data = cluster_data.read_live(ClusterTarget(context="dynamo-lab", kubeconfig=str(handle.kubeconfig)))
    return check(stack, data)


def _graph_namespace(api, planned: StackPlan) -> None:
    """The stack's graph namespace, where its pods go; not the platform namespace, which the first
    stack to create it would own in preflight's eyes (and the next stack's preflight refuse)."""
    (ns,) = [n for n in planned.of_kind("Namespace")
             if n.manifest["metadata"]["name"] == planned.stack.config.graph.namespace]
    _namespace(api, ns.manifest)


def _cordon(api, node: str, on: bool) -> None:
    code, body = api.call("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": on or None}},
                          content_type="application/merge-patch+json")
    assert code == 200, body


# The shipped cache (nodeVolume: a volume per class, on the class's node), and none, which leaves
# the GPU class's node affinity alone to place each worker.
CACHES = {"nodeVolume": None, "off": lambda c: c.update(modelCache={"mode": "off"})}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("cache", sorted(CACHES))
def test_every_worker_of_every_stack_lands_on_its_classs_node(lab_cluster, stack, cache):
    api = lab_cluster.api()
    fits = loaded(stack, CACHES[cache])
    report = _preflight(lab_cluster, fits)
    assert report.fits, report.problems
    planned = plan(fits)
    claims = {v["persistentVolumeClaim"]["claimName"] for o in planned.of_kind("DynamoGraphDeployment")
              for comp in o.manifest["spec"]["components"] for v in comp["podTemplate"]["spec"].get("volumes", [])
              if "persistentVolumeClaim" in v}
    assert bool(claims) == (cache == "nodeVolume")  # off: no volume places anything
    _graph_namespace(api, planned)
    placed = _place(api, planned)
    try:
        assert _pending(placed) == {}  # else: each pod's scheduler reason
        for g in fits.config.workers:
            nodes = [p["spec"]["nodeName"] for p in placed[g.name]]
            assert nodes == [NODE_OF_CLASS[g.gpu_class]] * g.replicas, (g.name, nodes)
        assert [p["spec"]["nodeName"] in NODE_OF_CLASS.values() for p in placed["frontend"]] == [True]
    finally:
        _clear(api, fits.config.graph.namespace)


@pytest.mark.parametrize("gpu_class", sorted(NODE_OF_CLASS))
def test_a_worker_whose_node_is_cordoned_stays_pending_and_never_takes_the_other_classs_node(lab_cluster, gpu_class):
    """GPU-class affinity alone (no cache volume): the other node has every GPU free, and is refused."""
    api = lab_cluster.api()
    stack = loaded("kv-routing", CACHES["off"])
    (group,) = [g for g in stack.config.workers if g.gpu_class == gpu_class]
    planned = plan(stack)
    _graph_namespace(api, planned)
    node = NODE_OF_CLASS[gpu_class]
    _cordon(api, node, True)
    try:
        placed = _place(api, planned, only={group.name})
        pending = _pending(placed)
        assert sorted(pending) == sorted(p["metadata"]["name"] for p in placed[group.name])  # every replica
        for why in pending.values():
            assert why.startswith("Unschedulable: 0/2 nodes are available: "), why
            assert "1 node(s) didn't match Pod's node affinity/selector" in why, why  # the other class's node
            assert "1 node(s) were unschedulable" in why, why  # its own, cordoned
    finally:
        _cordon(api, node, False)
        _clear(api, stack.config.graph.namespace)


def test_the_scheduler_and_preflight_agree_on_where_the_workers_go_and_what_stays_pending(lab_cluster):
    api = lab_cluster.api()
    fits = loaded("kv-routing")
    report = _preflight(lab_cluster, fits)
    assert report.fits, report.problems
    planned = plan(fits)
    _graph_namespace(api, planned)
    placed = _place(api, planned)
    for g in fits.config.workers:
        nodes = [p["spec"].get("nodeName") for p in placed[g.name]]
        assert nodes == [NODE_OF_CLASS[g.gpu_class]] * g.replicas, (g.name, nodes)  # its class's node, never the other
    _clear(api, fits.config.graph.namespace)

    # Five workers on the 24GB node's four time-sliced GPUs: the memory plan fits, the GPU count does not.
    five = loaded("kv-routing", lambda c: c["workers"][0].update(replicas=5, kvCacheBytes="1Gi"))
    report = _preflight(lab_cluster, five)
    assert not report.fits
    (problem,) = report.problems
    assert problem.where == "node gpu-server" and problem.check == "gpu units" and "so 1 of them" in problem.problem
    placed = _place(api, plan(five))
    pending = [p for p in placed["worker-24gb"] if not p["spec"].get("nodeName")]
    assert len(pending) == 1 and len(placed["worker-24gb"]) == 5
    assert all(p["spec"]["nodeName"] == "gpu-server" for p in placed["worker-24gb"] if p not in pending)
    # The scheduler's reason, as preflight's problem says: no GPU left on its node, and the other
    # node is not its class's.
    (why,) = _pending(placed).values()
    assert why.startswith("Unschedulable: 0/2 nodes are available: "), why
    assert "1 Insufficient nvidia.com/gpu" in why and "1 node(s) didn't match Pod's node affinity/selector" in why, why
    _clear(api, five.config.graph.namespace)
