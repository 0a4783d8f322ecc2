"""The lab cluster harness's pure parts: its nodes from the lab's saved cluster, each component's
command line, the kubeconfig, the admin credentials' modes and the API server's warnings."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dynamo_lab.local_cluster import api, components, nodes, state

BINS = {"kubernetes": "/k", "etcd": "/e", "kwok": "/w"}


def _plan(stages) -> state.Startup:
    return state.Startup(token="t0k", bins=BINS, kwok_stages=stages, nodes=[], crd_dir=None)


def test_lab_nodes_keep_gpus_and_labels_and_drop_addresses():
    lab = nodes.lab_nodes(nodes.LAB_CLUSTER.read_text())
    assert [n["metadata"]["name"] for n in lab] == ["gpu-server", "gpu-laptop"]
    for n in lab:
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert n["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
        assert n["metadata"]["annotations"][nodes.KWOK_ANNOTATION] == "fake"
        assert "addresses" not in n["status"] and "conditions" not in n["status"]
        assert "192.168" not in str(n)


def test_every_component_listens_on_loopback_only(tmp_path):
    plane = components.lab_components(state.StateDir(tmp_path), _plan(str(tmp_path / "stages.yaml")), None)
    assert [c.name for c in plane] == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    assert [type(c) for c in plane] == [components.Etcd, components.KubeApiserver, components.KubeControllerManager,
                                        components.KubeScheduler, components.Kwok]
    for c in plane:
        for arg in c.argv():
            for host in re.findall(r"(?:https?://|address=)([0-9.]+)", arg):
                assert host.startswith("127."), arg
    flags = {c.name: c.argv() for c in plane}
    for name in ("kube-controller-manager", "kube-scheduler"):
        assert "--leader-elect=false" in flags[name]
    assert "--unsafe-no-fsync" in flags["etcd"]
    assert flags["etcd"][0] == "/e/etcd" and flags["kube-apiserver"][0] == "/k/kube-apiserver"
    assert f"--config={tmp_path / 'stages.yaml'}" in flags["kwok"]
    assert components.lab_components(state.StateDir(tmp_path), _plan(None), None)[-1].name == "kube-scheduler"


def test_kubeconfig():
    cfg = state.kubeconfig("https://127.0.0.1:1234", Path("/ca.crt"), "t0k")
    assert cfg["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:1234", "certificate-authority": "/ca.crt"}
    assert cfg["users"][0]["user"] == {"token": "t0k"}


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> state.StateDir:
    """A new cluster's state directory, prepared once under a umask that would share its files (0002):
    prepare makes its service account key with two openssl runs (an RSA key, about 0.35 s of CPU), and
    the tests below only read what it wrote."""
    old = os.umask(0o002)
    try:
        return state.prepare(tmp_path_factory.mktemp("prepared") / "state",
                             {"kubernetes": Path("/k"), "etcd": Path("/e")})
    finally:
        os.umask(old)


def test_the_admin_credentials_are_the_owners_only_whatever_the_umask(prepared):
    """The admin token (tokens.csv, the kubeconfig, the plan) and the service account signing key are
    a cluster-admin credential: 0600, in 0700 directories, even under a umask that would share them."""
    sd = prepared
    token = state.Startup.read(sd.plan).token
    assert json.loads(sd.plan.read_text())["token"] == token
    assert _mode(sd.path) == 0o700 and _mode(sd.pki) == 0o700
    for path in (sd.pki / "tokens.csv", sd.pki / "sa.key", sd.inner_kubeconfig, sd.plan):
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
    holding = [p for p in sd.path.rglob("*") if p.is_file() and token in p.read_text(errors="replace")]
    assert sorted(p.name for p in holding) == ["kubeconfig.inner", "plan.json", "tokens.csv"]


def test_the_plan_names_each_tools_directory_and_no_kwok_without_its_stages(prepared):
    plan = state.Startup.read(prepared.plan)
    assert plan.bins == {"kubernetes": "/k", "etcd": "/e"} and plan.kwok_stages is None and plan.nodes == []


def test_write_private_narrows_a_file_that_was_readable(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("old")
    path.chmod(0o644)
    state.write_private(path, "secret")
    assert path.read_text() == "secret" and _mode(path) == 0o600


def test_warning_headers_are_read_as_the_api_server_writes_them():
    assert api.warning_texts(['299 - "unknown field \\"spec.backoffLimitt\\""',
                              '299 - "would violate PodSecurity \\"restricted:v1.34\\": a, b"', "odd"]) == [
        'unknown field "spec.backoffLimitt"', 'would violate PodSecurity "restricted:v1.34": a, b', "odd"]


def test_the_plan_of_a_cluster_started_before_the_typed_plan_still_gives_its_token(tmp_path):
    old = tmp_path / "plan.json"
    old.write_text(json.dumps({"token": "t0k", "commands": [["etcd", ["/e/etcd"]]], "nodes": [], "crd_dir": None}))
    assert state.Startup.read(old).token == "t0k"
