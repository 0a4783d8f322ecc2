"""The local probe: real NIXL transfers on this machine (lab tier), and its refusals (fast tier)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from infra.lab import probe_runner
from tests.helpers import ROOT

RATE_1GBIT = 125e6  # bytes/s


@pytest.fixture(scope="module")
def nixl():
    """NIXL comes with the `probe` extra, which `python3 dev.py test-lab` installs; tests install nothing."""
    if importlib.util.find_spec("nixl_cu12") is None:
        message = "NIXL is not installed: run the lab tier with `python3 dev.py test-lab`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def no_leftover_namespaces():
    before = probe_runner.namespaces()
    yield
    leftover = [n for n in probe_runner.namespaces() if n not in before]
    probe_runner.remove_namespaces(leftover)  # clean up even when the test failed ...
    assert leftover == []  # ... and fail it if the probe left any behind


def _probe(*args):
    proc = subprocess.run([sys.executable, "-m", "infra.lab", "probe", "local", *args, "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.lab
def test_loopback_probe_moves_a_same_server_request_intact(nixl, no_leftover_namespaces):
    r = _probe("--link", "loopback", "--stack", "same-server", "--repeats", "3")
    assert r["intact"] is True
    assert r["bytes"] == 2371 * 114_688
    assert r["ucx_tls"] == "tcp,self"  # the workers' settings reached the probe
    assert r["seconds_min"] <= r["seconds_median"] <= r["seconds_max"]
    assert r["throughput_bytes_per_s"] == pytest.approx(r["bytes"] / r["seconds_median"])
    assert r["predicted_seconds"] == pytest.approx(r["bytes"] / 1.2e9)
    assert r["measured_over_predicted"] == pytest.approx(r["seconds_median"] / r["predicted_seconds"])


@pytest.mark.lab
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_1gbit_shaped_probe_matches_the_rate_and_the_sizing(nixl, no_leftover_namespaces):
    r = _probe("--link", "1gbit", "--stack", "cross-server", "--repeats", "3")
    assert r["intact"] is True
    assert 0.85 * RATE_1GBIT <= r["throughput_bytes_per_s"] <= 1.05 * RATE_1GBIT
    assert abs(r["predicted_seconds"] - r["seconds_median"]) <= 0.15 * r["seconds_median"]


def test_shaped_link_without_root_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(probe_runner.ProbeError, match="needs root.*--link loopback"):
        with probe_runner.shaped_pair(10**9):
            pass


def test_probe_needs_bytes_or_a_stack():
    proc = subprocess.run([sys.executable, "-m", "infra.lab", "probe", "local"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "one of the arguments --bytes --stack is required" in proc.stderr
