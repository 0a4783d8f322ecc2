"""The stacks' other shapes under the real engine (test_deploy.py says what is real): everything on
(the probe, the benchmark, NetworkPolicies; the token Secret is test_faults.py's, set as a secret),
the hostPath cache, and the pvc cache with a StorageClass of each binding mode and a volume of each:
Immediate, and WaitForFirstConsumer, whose claim the pinned provider treats as ready while it is
Pending (it binds once the pull Job's pod, which mounts it, is scheduled). Each goes up, previews
with no change, and is destroyed whole. A cluster of its own: the classes and volumes are
cluster-wide."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.api import STRICT
from dynamo_lab.local_cluster.standin import GraphReady
from infra.plan import plan
from tests.helpers import ROOT, everything_on, loaded, wait_for
from tests.lab.cluster.test_deploy import BESIDES, LOCAL, object_path, ok, planned_steps

pytestmark = pytest.mark.cluster

CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def _everything(stack: str):
    on = everything_on(stack)
    return lambda c: (on(c), c.update(graph={"networkPolicy": True}))


def _cache(mode: str, storage_class=None):
    pvc = {} if storage_class is None else {"pvc": {"storageClass": storage_class}}
    return lambda c: c.update(modelCache={"mode": mode, **pvc})


VARIANTS = {  # name: (stack, edit of the decoded config)
    "cross-server, everything on": ("cross-server", _everything("cross-server")),
    "same-server, hostPath cache": ("same-server", _cache("hostPath")),
    "kv-routing, pvc cache, Immediate class": ("kv-routing", _cache("pvc", "lab-immediate")),
    "kv-routing, pvc cache, WaitForFirstConsumer class": ("kv-routing", _cache("pvc", "lab-wait")),
}


def stack_file(tmp: Path, stack: str, edit) -> Path:
    """The stack's file with `edit` applied to its `dynamo-lab:` keys."""
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    prefix = "dynamo-lab:"
    short = {k.removeprefix(prefix): v for k, v in doc["config"].items() if k.startswith(prefix)}
    edit(short)
    doc["config"] = {**{k: v for k, v in doc["config"].items() if not k.startswith(prefix)},
                     **{prefix + k: v for k, v in short.items()}}
    out = tmp / f"Pulumi.{stack}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture(scope="module")
def storage(lab_cluster_with_crd):
    """A class of each binding mode, each with a volume for the claim to bind to (no provisioner
    makes one here)."""
    api = lab_cluster_with_crd.api()
    (claim,) = plan(loaded("kv-routing", lambda c: (LOCAL(c), _cache("pvc", "lab-immediate")(c)))).of_kind(
        "PersistentVolumeClaim")
    spec = claim.manifest["spec"]
    for name, binding in (("lab-immediate", "Immediate"), ("lab-wait", "WaitForFirstConsumer")):
        assert api.call("POST", f"{CLASSES}?{STRICT}", {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": binding})[0] == 201
        assert api.call("POST", f"/api/v1/persistentvolumes?{STRICT}", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{name}-cache"},
            "spec": {"storageClassName": name, "accessModes": spec["accessModes"],
                     "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/srv/{name}"}}})[0] == 201
    return api


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_goes_up_holds_still_and_is_destroyed_whole(lab_cluster_with_crd, storage, engine_bins,
                                                                  tmp_path, variant):
    stack, edit = VARIANTS[variant]
    api = storage
    source = stack_file(tmp_path, stack, edit)
    planned = plan(loaded(stack, lambda c: (LOCAL(c), edit(c))))
    ws = pulumi_workspace.Workspace(tmp_path / "ws", stack, lab_cluster_with_crd.kubeconfig)
    with GraphReady(api):
        up = ok(pulumi_cli.invoke("up", ws, engine_bins, stack_file=source))
    assert up["summary"] == {"create": len(planned_steps(stack, edit)) + BESIDES}, up["summary"]
    for o in planned.objects:
        assert api.call("GET", object_path(o.manifest))[0] == 200, o.name
    # Bound in the end, in both modes. A WaitForFirstConsumer claim binds only once a pod that mounts it
    # is scheduled: the pull Job's, which waits for the claim. That `up` completes at all shows the
    # provider took the claim as ready while it was Pending.
    for claim in planned.of_kind("PersistentVolumeClaim"):
        assert api.call("GET", object_path(claim.manifest))[1]["status"]["phase"] == "Bound", claim.name
    again = ok(pulumi_cli.invoke("preview", ws, engine_bins, stack_file=source))
    assert again["summary"] == {"same": len(planned_steps(stack, edit)) + BESIDES}, again["summary"]
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    for o in planned.objects:
        wait_for(lambda o=o: api.call("GET", object_path(o.manifest))[0] == 404, 120)
    for name in ("lab-immediate", "lab-wait"):  # a Retain volume outlives its claim: free it for the next run
        api.call("PATCH", f"/api/v1/persistentvolumes/{name}-cache", {"spec": {"claimRef": None}},
                 content_type="application/merge-patch+json")
