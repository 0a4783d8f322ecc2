"""The cluster tier: a real control plane (etcd, kube-apiserver, controller manager, scheduler) with
kwok's simulated GPU nodes, in a network namespace of its own. Needs root (namespaces) and the
tools of `python3 dev.py cluster-tools` (built on first use: about 20 minutes cold)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from dynamo_lab.local_cluster import harness, tools
from dynamo_lab.paths import ROOT
from tests.helpers import wait_for

pytestmark = pytest.mark.cluster

NEEDED = ("kubernetes", "etcd", "kwok")


def test_server_reports_its_pinned_version(lab_cluster):
    code, body = lab_cluster.api().call("GET", "/version")
    assert code == 200 and body["gitVersion"] == tools.KUBERNETES and body["minor"] == "34"


def test_the_two_gpu_nodes_are_ready_with_their_gpus(lab_cluster):
    code, body = lab_cluster.api().call("GET", "/api/v1/nodes")
    nodes = {n["metadata"]["name"]: n for n in body["items"]}
    assert sorted(nodes) == ["gpu-laptop", "gpu-server"]
    for n in nodes.values():
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert n["metadata"]["labels"]["nvidia.com/gpu.product"].startswith("NVIDIA-GeForce-RTX-30")
        assert {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"] == "True"
        assert all(a["address"].startswith("127.") for a in n["status"].get("addresses", [])
                   if a["type"] == "InternalIP")


def test_a_gpu_deployment_is_scheduled_and_runs(lab_cluster):
    api = lab_cluster.api()
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-probe", "namespace": "default"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "gpu-probe"}},
                    "template": {"metadata": {"labels": {"app": "gpu-probe"}},
                                 "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-server"},
                                          "containers": [{"name": "c", "image": "example.invalid/none:0",
                                                          "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}
    assert api.create("/apis/apps/v1/namespaces/default/deployments", dep) == 201

    def running():
        _, body = api.call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dgpu-probe")
        pods = body.get("items", [])
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == "gpu-server"]
        return ok if len(ok) == 2 else None
    assert len(wait_for(running)) == 2
    # The node's four GPU replicas are taken: a third pod stays Pending, unschedulable.
    code, _ = api.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/gpu-probe",
                       {"spec": {"replicas": 3}}, content_type="application/merge-patch+json")
    assert code == 200

    def unschedulable():
        _, body = api.call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dgpu-probe")
        return [p for p in body["items"] if any(c.get("reason") == "Unschedulable"
                                                for c in p["status"].get("conditions", []))]
    assert len(wait_for(unschedulable)) == 1


def test_killed_owner_leaves_nothing_behind(cluster_bins, tmp_path):
    """SIGKILL the process that started a cluster: every process of it, and so its namespaces, go."""
    state = tmp_path / "state"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from dynamo_lab.local_cluster import harness
        bins = {{k: Path(v) for k, v in {({k: str(v) for k, v in cluster_bins.items()})!r}.items()}}
        harness.up(Path({str(state)!r}), bins, attached=True)
        print("UP", flush=True)
        time.sleep(600)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             cwd=ROOT)
    try:
        assert any(line.strip() == "UP" for line in iter(owner.stdout.readline, "")), "never came up"
        assert harness.leftovers(state), "the cluster should be running"
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        assert wait_for(lambda: not harness.leftovers(state) or None, timeout=30) is True
    finally:
        if owner.poll() is None:
            owner.kill()
        harness.stop(state)


def test_a_running_clusters_admin_credentials_are_readable_by_their_owner_only(lab_cluster):
    """The kubeconfig the outer writes, the apiserver's own serving key and every file holding the admin
    token or a private key: 0600, in a 0700 state directory and pki/."""
    lay = lab_cluster.state_dir
    token = json.loads(lay.plan.read_text())["token"]
    assert {d.name: oct(d.stat().st_mode & 0o777) for d in (lay.path, lay.pki)} == {
        lay.path.name: "0o700", "pki": "0o700"}
    secret = {}
    for path in lay.path.rglob("*"):
        if path.is_file() and not path.is_socket():
            text = path.read_bytes()
            if token.encode() in text or b"PRIVATE KEY" in text:
                secret[str(path.relative_to(lay.path))] = oct(path.stat().st_mode & 0o777)
    assert {"kubeconfig", "kubeconfig.inner", "plan.json", "pki/tokens.csv", "pki/sa.key",
            "pki/apiserver.key"} <= set(secret), secret
    assert set(secret.values()) == {"0o600"}, secret
