"""The KV-transfer probe: real NIXL transfers on this machine, and the in-cluster pods under mocks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from infra import probe_local
from infra.config import ConfigError
from infra.render import normalize
from tests.conftest import ROOT, raw_config, run_stack

ENABLE = {"probe": {"enabled": True}}
RATE_1GBIT = 125e6  # bytes/s


@pytest.fixture(scope="module")
def nixl():
    """NIXL is an optional extra: installed here, by the tests that need it, not by the base install."""
    if importlib.util.find_spec("nixl_cu12") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "-r", str(ROOT / "requirements-probe.txt")], check=True, timeout=900)


@pytest.fixture
def no_leftover_namespaces():
    before = probe_local.namespaces()
    yield
    leftover = [n for n in probe_local.namespaces() if n not in before]
    probe_local.remove_namespaces(leftover)  # clean up even when the test failed ...
    assert leftover == []  # ... and fail it if the probe left any behind


def _probe(*args):
    proc = subprocess.run([sys.executable, "-m", "infra", "probe", "local", *args, "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_loopback_probe_moves_a_same_server_request_intact(nixl, no_leftover_namespaces):
    r = _probe("--link", "loopback", "--stack", "same-server", "--repeats", "3")
    assert r["intact"] is True
    assert r["bytes"] == 2371 * 114_688
    assert r["seconds_min"] <= r["seconds_median"] <= r["seconds_max"]
    assert r["throughput_bytes_per_s"] == pytest.approx(r["bytes"] / r["seconds_median"])
    assert r["predicted_seconds"] == pytest.approx(r["bytes"] / 1.2e9)
    assert r["measured_over_predicted"] == pytest.approx(r["seconds_median"] / r["predicted_seconds"])


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_1gbit_shaped_probe_matches_the_rate_and_the_sizing(nixl, no_leftover_namespaces):
    r = _probe("--link", "1gbit", "--stack", "cross-server", "--repeats", "3")
    assert r["intact"] is True
    assert 0.85 * RATE_1GBIT <= r["throughput_bytes_per_s"] <= 1.05 * RATE_1GBIT
    assert abs(r["predicted_seconds"] - r["seconds_median"]) <= 0.15 * r["seconds_median"]


def test_shaped_link_without_root_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(probe_local.ProbeError, match="needs root.*--link loopback"):
        with probe_local.shaped_pair(10**9):
            pass


def test_probe_needs_bytes_or_a_stack():
    proc = subprocess.run([sys.executable, "-m", "infra", "probe", "local"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "one of the arguments --bytes --stack is required" in proc.stderr


def _pods(run):
    jobs = {r.name: normalize(r.inputs) for r in run.resources if r.type == "kubernetes:batch/v1:Job"}
    return jobs["probe-initiator"], jobs["probe-target"]


def _expr(job):
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]


def test_in_cluster_probe_places_initiator_like_prefill_and_target_like_decode():
    run = run_stack("cross-server", lambda c: c.update(ENABLE))
    initiator, target = _pods(run)
    assert _expr(initiator) == [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]
    assert _expr(target) == [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]
    for job in (initiator, target):
        (c,) = job["spec"]["template"]["spec"]["containers"]
        assert c["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
        assert {e["name"]: e["value"] for e in c["env"]} == {"UCX_TLS": "tcp,self", "UCX_RNDV_THRESH": "inf"}
        assert c["command"] == ["python3", "/probe/probe.py"]
        assert not any("gpu" in k for k in c["resources"]["requests"])  # no GPU taken from the workers
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    (ci,) = initiator["spec"]["template"]["spec"]["containers"]
    target_host = "cross-server-kv-probe-target.dynamo-lab-cross-server.svc.cluster.local"
    assert ci["args"] == ["initiator", "--connect", f"{target_host}:5555",
                          "--bytes", str(2371 * 114_688), "--repeats", "5", "--timeout", "600"]
    (ct,) = target["spec"]["template"]["spec"]["containers"]
    assert ct["args"][:3] == ["target", "--port", "5555"]
    (cm,) = [normalize(r.inputs) for r in run.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    assert cm["data"]["probe.py"] == (ROOT / "infra" / "probe.py").read_text()
    assert run.outputs["probeLogs"] == (
        "kubectl logs -n dynamo-lab-cross-server job/cross-server-kv-probe-initiator | tail -n 1")


def test_probe_is_off_by_default():
    run = run_stack("cross-server")
    assert not [r for r in run.resources if r.type == "kubernetes:batch/v1:Job"]
    assert "probeLogs" not in run.outputs


def test_probe_on_an_aggregated_stack_is_refused():
    from infra import mockrun
    with pytest.raises(ConfigError, match="probe.enabled: this graph is aggregated"):
        mockrun.run("kv-routing", raw_config("kv-routing", lambda c: c.update(ENABLE)), [])


def test_probe_group_must_be_of_the_right_role():
    from infra import mockrun
    with pytest.raises(ConfigError, match="probe.fromGroup: 'decode' is not a prefill group"):
        mockrun.run("cross-server", raw_config("cross-server", lambda c: c.update(
            probe={"enabled": True, "fromGroup": "decode"})), [])
