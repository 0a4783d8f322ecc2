"""Where the scheduler puts a stack's workers on the simulated lab nodes, and whether preflight's live
read of the same cluster predicts it, both ways. A cluster of its own: preflight reads the
namespaces, so no other test's objects may be there. The graph's pods are made from the
DynamoGraphDeployment's pod templates, as the operator would make them (test_stacks.py says why)."""

from __future__ import annotations

import copy

import pytest

from infra.config.models import ClusterTarget
from infra.lab.preflight import cluster_data
from infra.lab.preflight.checks import check
from infra.plan import StackPlan, plan
from tests.helpers import loaded, wait_for
from tests.lab.cluster.test_stacks import PODS, _namespace, _pods

pytestmark = pytest.mark.cluster

NODE_OF_CLASS = {"gpu-24gb": "gpu-server", "gpu-8gb": "gpu-laptop"}  # by their GPU memory labels


def _place(api, planned: StackPlan) -> dict[str, list[dict]]:
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
        if name.startswith(("graph-model-cache", "probe", "bench")):
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


def test_the_scheduler_and_preflight_agree_on_where_the_workers_go_and_what_stays_pending(lab_cluster):
    api = lab_cluster.api()
    fits = loaded("kv-routing")
    report = _preflight(lab_cluster, fits)
    assert report.fits, report.problems
    planned = plan(fits)
    for ns in planned.of_kind("Namespace"):
        _namespace(api, ns.manifest)
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
    _clear(api, five.config.graph.namespace)
