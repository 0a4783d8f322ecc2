"""The shipped stacks' objects against a real Kubernetes 1.34 API server, admission and scheduler.

What is real here: the API server's validation of every object the plan holds (and of the
DynamoGraphDeployment against the pinned CRD, from Dynamo's 1.5.0 development line at upstream
commit 2a6da14c, not the v1.6.2 release: dynamo_lab/upstream.py), Pod Security admission of every pod
under the labels the stack gives its namespaces, the scheduler placing pods by the GPU classes'
node affinity and time-sliced GPU counts (kwok's simulated lab nodes), and preflight's live read of
the same cluster. What is not: the Dynamo operator, whose module no registry serves here, so the
graph's pods are created directly from the DynamoGraphDeployment's pod templates, as the operator
would create them (its own additions to a pod are not modelled). The objects go straight from the
plan to the API server here; test_deploy.py sends them the way users do, through the real Pulumi
engine and provider (docs/real-engine.md).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from dynamo_lab.local_cluster.api import STRICT
from infra.manifests.security import ENFORCE_LABEL, PSA_VERSION
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
    code, body = api.call("POST", f"/api/v1/namespaces?{STRICT}", doc)
    if code == 409:
        code, body = api.call("PATCH", f"/api/v1/namespaces/{doc['metadata']['name']}?{STRICT}",
                              {"metadata": {"labels": doc["metadata"]["labels"]}},
                              content_type="application/merge-patch+json")
    assert code in (200, 201), body
    assert not api.last_warnings, api.last_warnings


def _dry_run(api, collection: str, doc: dict[str, Any]) -> tuple[int, Any]:
    """A server-side dry run with every field checked: a field the API server (or the CRD's schema)
    does not know fails with 400 instead of being dropped with a warning."""
    return api.call("POST", f"{collection}?dryRun=All&{STRICT}", doc)


# Pod Security's warn level is `restricted` in every namespace (infra/manifests/security.py), so a
# pod or pod template allowed by a lower enforce level draws this warning, by design.
PSA_WARNING = f'would violate PodSecurity "restricted:{PSA_VERSION}"'


def _unexpected_warnings(warnings: list[str], enforce: dict[str, str]) -> list[str]:
    """The API server's warnings other than Pod Security's restricted-level one in a namespace
    that enforces less (`enforce`: namespace -> its enforce level)."""
    out = []
    for w in warnings:
        ns = re.search(r"/namespaces/([^/?]+)/", w)
        if PSA_WARNING in w and ns and enforce.get(ns.group(1)) not in (None, "restricted"):
            continue
        out.append(w)
    return out


def _pods(planned: StackPlan) -> list[tuple[str, dict[str, Any], int]]:
    """(name, pod, replicas) of every pod the plan's graph and Jobs start."""
    out = []
    for dgd in planned.of_kind("DynamoGraphDeployment"):
        ns, graph = dgd.manifest["metadata"]["namespace"], dgd.manifest["metadata"]["name"]
        for comp in dgd.manifest["spec"]["components"]:
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{graph}-{comp['name']}", "namespace": ns,
                                "labels": {**comp["podTemplate"].get("metadata", {}).get("labels", {}),
                                           "nvidia.com/dynamo-component-type": comp["type"],
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
    enforce = {}
    for ns in planned.of_kind("Namespace"):
        _namespace(api, ns.manifest)
        enforce[ns.manifest["metadata"]["name"]] = ns.manifest["metadata"]["labels"][ENFORCE_LABEL]
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
    # No deprecation, no dropped field, no other complaint: only Pod Security's report of what a
    # namespace below `restricted` allows.
    assert _unexpected_warnings(api.warnings, enforce) == []


def _misspell_job(planned: StackPlan) -> tuple[str, dict[str, Any]]:
    job = copy.deepcopy(planned.of_kind("Job")[0].manifest)
    job["spec"]["backoffLimitt"] = job["spec"].pop("backoffLimit")
    return COLLECTIONS[("batch/v1", "Job")].format(ns=job["metadata"]["namespace"]), job


def _misspell_pod(planned: StackPlan) -> tuple[str, dict[str, Any]]:
    _, pod, _ = next(p for p in _pods(planned) if p[0] == "decode")
    pod["spec"]["containers"][0]["imagePullPolicyy"] = pod["spec"]["containers"][0].pop("imagePullPolicy", "Always")
    return PODS.format(ns=pod["metadata"]["namespace"]), pod


# The misspelled field as Strict validation names it -> the edit, and the field as server-side apply names it.
MISSPELLED = {"spec.backoffLimitt": (_misspell_job, "spec.backoffLimitt"),
              "spec.containers[0].imagePullPolicyy": (_misspell_pod, 'spec.containers[name="main"].imagePullPolicyy')}


@pytest.mark.parametrize("field", sorted(MISSPELLED))
def test_a_misspelled_field_fails_at_the_api_server_instead_of_being_dropped_with_a_warning(lab_cluster, field):
    """Without fieldValidation=Strict the API server accepts the object, drops the field and only
    warns (its default for create): the checks above send Strict and fail on any warning, so neither
    is missed. Server-side apply refuses the field in any case."""
    api = lab_cluster.api()
    planned = plan(loaded("cross-server", lambda c: (everything_on("cross-server")(c),
                                                     c.update(modelCache={"mode": "pvc"}))))
    for ns in planned.of_kind("Namespace"):
        _namespace(api, ns.manifest)
    misspell, applied = MISSPELLED[field]
    collection, doc = misspell(planned)
    code, body = _dry_run(api, collection, doc)
    assert code == 400 and f'unknown field "{field}"' in body["message"], body
    code, _ = api.call("POST", f"{collection}?dryRun=All", doc)
    assert code == 201 and api.last_warnings == [f'POST {collection}?dryRun=All: unknown field "{field}"'], \
        api.last_warnings
    # Server-side apply, as the Pulumi provider sends objects, refuses it whatever fieldValidation says.
    code, body = api.call("PATCH", f"{collection}/{doc['metadata']['name']}?fieldManager=test&dryRun=All",
                          json.dumps(doc).encode(), content_type="application/apply-patch+yaml")
    assert code >= 400 and f".{applied}: field not declared in schema" in body["message"], body


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
        assert api.last_warnings == [], (stack, api.last_warnings)
        bad = copy.deepcopy(dgd.manifest)
        bad["spec"]["components"][1]["type"] = "prefiller"
        code, body = _dry_run(api, collection, bad)
        assert code == 422 and "prefiller" in body["message"], body  # a value the CRD's schema refuses
        # A field the CRD's schema does not have, on the graph and inside a component's pod template:
        # refused, not pruned.
        for where, field in ((("spec", "components", 0), "replicaz"),
                             (("spec", "components", 1, "podTemplate", "spec", "containers", 0), "imagePullPolicyy")):
            bad = copy.deepcopy(dgd.manifest)
            target = bad
            for key in where:
                target = target[key]
            target[field] = 1
            path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where)[1:] + f".{field}"
            code, body = _dry_run(api, collection, bad)
            assert code == 400 and f'unknown field "{path}"' in body["message"], (path, body)
