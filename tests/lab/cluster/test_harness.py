"""The lab cluster harness's pure parts: its nodes from the lab's saved cluster, its commands."""

from __future__ import annotations

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
