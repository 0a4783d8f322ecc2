"""The lab cluster harness's pure parts: its nodes from the lab's saved cluster, its commands."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from infra.lab.cluster import harness

BINS = {"kubernetes": Path("/k"), "etcd": Path("/e"), "kwok": Path("/w")}


def test_lab_nodes_keep_gpus_and_labels_and_drop_addresses():
    nodes = harness.lab_nodes(harness.LAB_CLUSTER.read_text())
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-server", "gpu-laptop"]
    for n in nodes:
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert n["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
        assert n["metadata"]["annotations"][harness.KWOK_ANNOTATION] == "fake"
        assert "addresses" not in n["status"] and "conditions" not in n["status"]
        assert "192.168" not in str(n)


def test_every_component_listens_on_loopback_only(tmp_path):
    cmds = harness.commands(BINS, harness.Layout(tmp_path), tmp_path / "stages.yaml")
    assert [name for name, _ in cmds] == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                         "kwok"]
    for _name, argv in cmds:
        for arg in argv:
            for host in re.findall(r"(?:https?://|address=)([0-9.]+)", arg):
                assert host.startswith("127."), arg
    flags = dict(cmds)
    for name in ("kube-controller-manager", "kube-scheduler"):
        assert "--leader-elect=false" in flags[name]
    assert "--unsafe-no-fsync" in flags["etcd"]
    assert harness.commands(BINS, harness.Layout(tmp_path), None)[-1][0] == "kube-scheduler"


def test_kubeconfig():
    cfg = harness.kubeconfig("https://127.0.0.1:1234", Path("/ca.crt"), "t0k")
    assert cfg["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:1234", "certificate-authority": "/ca.crt"}
    assert cfg["users"][0]["user"] == {"token": "t0k"}


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_admin_credentials_are_the_owners_only_whatever_the_umask(tmp_path):
    """The admin token (tokens.csv, the kubeconfig, the plan) and the service account signing key are
    a cluster-admin credential: 0600, in 0700 directories, even under a umask that would share them."""
    old = os.umask(0o002)
    try:
        lay = harness.prepare(tmp_path / "state", {"kubernetes": Path("/k"), "etcd": Path("/e")})
    finally:
        os.umask(old)
    token = json.loads(lay.plan.read_text())["token"]
    assert _mode(lay.state) == 0o700 and _mode(lay.pki) == 0o700
    for path in (lay.pki / "tokens.csv", lay.pki / "sa.key", lay.inner_kubeconfig, lay.plan):
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
    holding = [p for p in lay.state.rglob("*") if p.is_file() and token in p.read_text(errors="replace")]
    assert sorted(p.name for p in holding) == ["kubeconfig.inner", "plan.json", "tokens.csv"]


def test_write_private_narrows_a_file_that_was_readable(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("old")
    path.chmod(0o644)
    harness.write_private(path, "secret")
    assert path.read_text() == "secret" and _mode(path) == 0o600


def test_warning_headers_are_read_as_the_api_server_writes_them():
    assert harness.warning_texts(['299 - "unknown field \\"spec.backoffLimitt\\""',
                                  '299 - "would violate PodSecurity \\"restricted:v1.34\\": a, b"', "odd"]) == [
        'unknown field "spec.backoffLimitt"', 'would violate PodSecurity "restricted:v1.34": a, b', "odd"]
