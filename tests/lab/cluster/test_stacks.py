"""The shipped stacks' objects against a real Kubernetes 1.34 API server, admission and scheduler.

What is real here: the API server's validation of every object the plan holds (and of the
DynamoGraphDeployment against the pinned release's CRD), Pod Security admission of every pod
under the labels the stack gives its namespaces, the scheduler placing pods by the GPU classes'
node affinity and time-sliced GPU counts (kwok's simulated lab nodes), and preflight's live read of
the same cluster. What is not: the Dynamo operator, whose module no registry serves here, so the
graph's pods are created directly from the DynamoGraphDeployment's pod templates, as the operator
would create them (its own additions to a pod are not modelled); and the Pulumi engine and
provider, which cannot be built here (docs/testing.md, "Cluster tier").
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.plan import HELM_RELEASE, StackPlan, plan
from tests.helpers import STACKS, everything_on, loaded

pytestmark = pytest.mark.cluster

COLLECTIONS = {  # (apiVersion, kind) -> the collection under a namespace
    ("v1", "Secret"): "/api/v1/namespaces/{ns}/secrets",
    ("v1", "ConfigMap"): "/api/v1/namespaces/{ns}/configmaps",
    ("v1", "Service"): "/api/v1/namespaces/{ns}/services",
    ("v1", "PersistentVolumeClaim"): "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    ("v1", "PersistentVolume"): "/api/v1/persistentvolumes",  # cluster-wide
    ("batch/v1", "Job"): "/apis/batch/v1/namespaces/{ns}/jobs",
    ("networking.k8s.io/v1", "NetworkPolicy"): "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    ("nvidia.com/v1beta1", "DynamoGraphDeployment"): "/apis/nvidia.com/v1beta1/namespaces/{ns}/dynamographdeployments",
}
PODS = "/api/v1/namespaces/{ns}/pods"
VARIANTS = {"shipped": None, "everything on": "all", "everything on, pvc cache": "pvc",
            "everything on, hostPath cache": "hostPath"}


def _edit(stack: str, variant):
    if variant is None:
        return None
    on = everything_on(stack)
    if variant in ("pvc", "hostPath"):
        return lambda c: (on(c), c.update(modelCache={"mode": variant}, graph={"networkPolicy": True}))
    return lambda c: (on(c), c.update(graph={"networkPolicy": True}))


def _namespace(api, doc: dict[str, Any]) -> None:
    """Create the plan's namespace, or give an existing one the plan's labels (Pod Security among them)."""
    code, body = api.call("POST", "/api/v1/namespaces", doc)
    if code == 409:
        code, body = api.call("PATCH", f"/api/v1/namespaces/{doc['metadata']['name']}",
                              {"metadata": {"labels": doc["metadata"]["labels"]}},
                              content_type="application/merge-patch+json")
    assert code in (200, 201), body


def _dry_run(api, collection: str, doc: dict[str, Any]) -> tuple[int, Any]:
    return api.call("POST", collection + "?dryRun=All", doc)


def _pods(planned: StackPlan) -> list[tuple[str, dict[str, Any], int]]:
    """(name, pod, replicas) of every pod the plan's graph and Jobs start."""
    out = []
    for dgd in planned.of_kind("DynamoGraphDeployment"):
        ns, graph = dgd.manifest["metadata"]["namespace"], dgd.manifest["metadata"]["name"]
        for comp in dgd.manifest["spec"]["components"]:
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{graph}-{comp['name']}", "namespace": ns,
                                "labels": {"nvidia.com/dynamo-component-type": comp["type"],
                                           "nvidia.com/dynamo-graph-deployment-name": graph,
                                           "dynamo-lab-test/component": comp["name"]}},
                   "spec": copy.deepcopy(comp["podTemplate"]["spec"])}
            out.append((comp["name"], pod, comp["replicas"]))
    for job in planned.of_kind("Job"):
        meta = job.manifest["metadata"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
               "spec": copy.deepcopy(job.manifest["spec"]["template"]["spec"])}
        out.append((job.name, pod, 1))
    return out


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_api_server_accepts_every_object_and_pod_security_admits_every_pod(lab_cluster, stack, variant):
    api = lab_cluster.api()
    planned = plan(loaded(stack, _edit(stack, VARIANTS[variant])))
    for ns in planned.of_kind("Namespace"):
        _namespace(api, ns.manifest)
    for o in planned.objects:
        if o.kind in (HELM_RELEASE, ("v1", "Namespace"), ("nvidia.com/v1beta1", "DynamoGraphDeployment")):
            continue  # the release is Helm's; the graph's schema is the CRD's (below)
        doc = copy.deepcopy(o.manifest)
        if o.kind == ("v1", "Secret"):
            doc["stringData"] = {k: "not-a-token" for k in doc["stringData"]}
        code, body = _dry_run(api, COLLECTIONS[o.kind].format(ns=doc["metadata"].get("namespace")), doc)
        assert code == 201, (o.name, body)
    for name, pod, _ in _pods(planned):
        code, body = _dry_run(api, PODS.format(ns=pod["metadata"]["namespace"]), pod)
        assert code == 201, (name, body)  # a pod Pod Security refuses is 403


def test_pod_security_is_enforced_here_so_the_check_above_can_fail(lab_cluster):
    api = lab_cluster.api()
    planned = plan(loaded("cross-server", lambda c: c.update(modelCache={"mode": "pvc"})))
    (ns,) = [n for n in planned.of_kind("Namespace") if n.manifest["metadata"]["name"] == "dynamo-lab-cross-server"]
    assert ns.manifest["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    _namespace(api, ns.manifest)
    _, pod, _ = next(p for p in _pods(planned) if p[0] == "decode")
    pod["spec"]["securityContext"]["runAsUser"] = 0
    code, body = _dry_run(api, PODS.format(ns="dynamo-lab-cross-server"), pod)
    assert code == 403 and "violates PodSecurity" in body["message"], body


def test_every_graph_validates_against_the_crd_at_the_api_server_and_a_bad_field_fails(lab_cluster_with_crd):
    api = lab_cluster_with_crd.api()
    for stack in STACKS:
        planned = plan(loaded(stack, everything_on(stack)))
        for ns in planned.of_kind("Namespace"):
            _namespace(api, ns.manifest)
        (dgd,) = planned.of_kind("DynamoGraphDeployment")
        collection = COLLECTIONS[dgd.kind].format(ns=dgd.manifest["metadata"]["namespace"])
        code, body = _dry_run(api, collection, dgd.manifest)
        assert code == 201, (stack, body)
        bad = copy.deepcopy(dgd.manifest)
        bad["spec"]["components"][1]["type"] = "prefiller"
        code, body = _dry_run(api, collection, bad)
        assert code == 422 and "prefiller" in body["message"], body
