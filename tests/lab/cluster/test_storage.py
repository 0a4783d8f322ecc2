"""Preflight's live read of StorageClasses against a real API server, and what the model cache
claim (`modelCache.mode: pvc`) really does with each answer: with a class the cluster lacks the
claim never binds (what `pulumi up` would wait five minutes on), so preflight refuses it; with an
Immediate class it binds to a volume of that class; with a WaitForFirstConsumer class it waits,
Pending, for the pod that mounts it. A cluster of its own: the classes are cluster-wide."""

from __future__ import annotations

import copy

import pytest

from dynamo_lab.local_cluster.api import STRICT
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.run import check
from infra.config.schema import ClusterTarget
from infra.plan import plan
from tests.helpers import loaded, wait_for
from tests.lab.cluster.test_stacks import _namespace

pytestmark = pytest.mark.cluster

STACK = "kv-routing"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
DEFAULT = "storageclass.kubernetes.io/is-default-class"


def _pvc(storage_class=None):
    claim = {} if storage_class is None else {"storageClass": storage_class}
    return loaded(STACK, lambda c: c.update(modelCache={"mode": "pvc", "pvc": claim}))


def _preflight(handle, stack):
    data = cluster_data.read_live(ClusterTarget(context="dynamo-lab", kubeconfig=str(handle.kubeconfig)))
    return check(stack, data)


def _storage(report):
    (row,) = [c for c in report.checks if c.name == "storage class"]
    return row


def _create(api, collection: str, obj: dict) -> None:
    code, body = api.call("POST", f"{collection}?{STRICT}", obj)
    assert code == 201 and not api.last_warnings, (body, api.last_warnings)


def _storage_class(name: str, binding: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": binding}


def test_preflight_refuses_what_would_never_bind_and_accepts_each_binding_mode(lab_cluster):
    api = lab_cluster.api()
    code, body = api.call("GET", CLASSES)
    assert code == 200 and body["items"] == []  # a bare control plane has no class

    report = _preflight(lab_cluster, _pvc())
    (problem,) = report.problems
    assert "the cluster has no default class (it has no StorageClass at all)" in problem.problem
    assert "modelCache.mode nodeVolume" in problem.fix

    _create(api, CLASSES, _storage_class("lab-immediate", "Immediate"))
    _create(api, CLASSES, _storage_class("lab-wait", "WaitForFirstConsumer"))
    for asked, binding in (("lab-immediate", "Immediate"), ("lab-wait", "WaitForFirstConsumer")):
        report = _preflight(lab_cluster, _pvc(asked))
        assert report.fits, report.problems
        assert _storage(report).detail.endswith(f"asks for a class the cluster has: {asked} (provisioner "
                                                f"kubernetes.io/no-provisioner, {binding})")
        assert "binds only to a PersistentVolume of that class made beforehand" in report.notes[0]
    report = _preflight(lab_cluster, _pvc("nfs"))
    (problem,) = report.problems
    assert "asks for StorageClass 'nfs', which the cluster does not have (its classes: lab-immediate, lab-wait)" \
        in problem.problem
    (problem,) = _preflight(lab_cluster, _pvc()).problems
    assert "no default class (its classes: lab-immediate, lab-wait; none is annotated" in problem.problem

    code, _ = api.call("PATCH", f"{CLASSES}/lab-wait", {"metadata": {"annotations": {DEFAULT: "true"}}},
                       content_type="application/merge-patch+json")
    assert code == 200
    report = _preflight(lab_cluster, _pvc())
    assert report.fits and "gets the cluster's default, lab-wait (provisioner kubernetes.io/no-provisioner, " \
        "WaitForFirstConsumer)" in _storage(report).detail
    (problem,) = _preflight(lab_cluster, _pvc("nfs")).problems
    assert "(its classes: lab-immediate, lab-wait (default))" in problem.problem
    assert "remove the key to use the default class lab-wait" in problem.fix


def _claim_events(api, ns: str, name: str) -> list[tuple[str, str]]:
    _, body = api.call("GET", f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name}")
    return [(e.get("reason"), e.get("message", "")) for e in body.get("items", [])]


def test_what_the_claim_does_on_the_cluster_is_what_preflight_says(lab_cluster):
    """The plan's own claim, with each class: the one preflight refuses never binds."""
    api = lab_cluster.api()
    for name, binding in (("lab-immediate", "Immediate"), ("lab-wait", "WaitForFirstConsumer")):
        if api.call("GET", f"{CLASSES}/{name}")[0] == 404:
            _create(api, CLASSES, _storage_class(name, binding))
    planned = plan(_pvc())
    for ns in planned.of_kind("Namespace"):
        _namespace(api, ns.manifest)
    (claim,) = planned.of_kind("PersistentVolumeClaim")
    ns = claim.manifest["metadata"]["namespace"]
    size = claim.manifest["spec"]["resources"]["requests"]["storage"]
    _create(api, "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "lab-immediate-volume"},
        "spec": {"capacity": {"storage": size}, "accessModes": claim.manifest["spec"]["accessModes"],
                 "storageClassName": "lab-immediate", "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": "/var/lib/dynamo-lab/test-volume"}}})
    claims = {}
    for storage_class in ("nfs", "lab-immediate", "lab-wait"):
        doc = copy.deepcopy(claim.manifest)
        doc["metadata"]["name"] += f"-{storage_class}"
        doc["spec"]["storageClassName"] = storage_class
        _create(api, f"/api/v1/namespaces/{ns}/persistentvolumeclaims", doc)
        claims[storage_class] = doc["metadata"]["name"]

    def phase(storage_class):
        _, body = api.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claims[storage_class]}")
        return body["status"].get("phase")
    wait_for(lambda: phase("lab-immediate") == "Bound", 60)
    missing = wait_for(lambda: [m for r, m in _claim_events(api, ns, claims["nfs"]) if r == "ProvisioningFailed"], 60)
    assert 'storageclass.storage.k8s.io "nfs" not found' in missing[0]
    waiting = wait_for(lambda: [m for r, m in _claim_events(api, ns, claims["lab-wait"])
                                if r == "WaitForFirstConsumer"], 60)
    assert "waiting for first consumer" in waiting[0]
    assert (phase("nfs"), phase("lab-wait")) == ("Pending", "Pending")
