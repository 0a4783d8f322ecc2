"""The local twin for real: Dynamo's frontend and KV router with mocker workers, driven by AIPerf.

Installs the twin environment (.venv-twin) on first use, as `python3 dev.py bench` does. Slow-ish
(about a minute for both quick sweeps) but bounded: --quick is one cell per stack.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

MARKERS = ("dynamo.mocker", "dynamo.frontend", "aiperf")


def _twin_processes() -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(m in cmd for m in MARKERS) and "pytest" not in cmd:
                pids.add(int(entry))
    return pids


@pytest.fixture(scope="module")
def twin_env():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    dev.ensure_twin()
    return {**os.environ, "DYNAMO_LAB_TWIN_PYTHON": str(dev._python(dev.TWIN_VENV))}


@pytest.fixture
def no_leftover_processes():
    before = _twin_processes()
    yield
    time.sleep(0.5)
    leftover = _twin_processes() - before
    for pid in leftover:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert leftover == set(), "twin processes left running"


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _bench(stack, out, env):
    proc = subprocess.run([sys.executable, "-m", "infra", "bench", stack, "--target", "twin", "--quick",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    port = int(re.search(r"frontend on http://127\.0\.0\.1:(\d+)", proc.stderr).group(1))
    assert _port_closed(port), f"frontend port {port} still open"
    (line,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert (out / stack / "p2-c4-r1" / "profile_export_aiperf.json").is_file()
    return line


def test_quick_sweep_reproduces_the_seeds_direction(twin_env, no_leftover_processes, tmp_path):
    kv = _bench("kv-routing", tmp_path / "kv", twin_env)
    same = _bench("same-server", tmp_path / "same", twin_env)
    for line in (kv, same):
        assert {"stack", "target", "prefix_types", "concurrency", "run", "ttft_p50_ms", "ttft_p99_ms",
                "requests_per_s"} <= set(line)
        assert (line["target"], line["prefix_types"], line["concurrency"], line["run"]) == ("twin", 2, 4, 1)
    assert same["ttft_p50_ms"] >= 3 * kv["ttft_p50_ms"]
    assert same["requests_per_s"] < kv["requests_per_s"]
    png = tmp_path / "plot.png"
    report = subprocess.run([sys.executable, "-m", "infra", "report", str(tmp_path / "same" / "results.jsonl"),
                             "--baseline", str(tmp_path / "kv" / "results.jsonl"), "--plot", str(png), "--seed"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert report.returncode == 0, report.stderr
    assert "same-server (twin) vs kv-routing" in report.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_ctrl_c_stops_every_twin_process(twin_env, no_leftover_processes):
    proc = subprocess.Popen([sys.executable, "-m", "infra", "twin", "same-server"], cwd=ROOT, env=twin_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once every worker registered
        assert "ready" in line, proc.stderr.read()[-3000:] if proc.poll() is not None else line
        url = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert len(_twin_processes()) >= 5  # frontend + 4 mockers
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert _port_closed(int(url.group(1)))
    finally:
        if proc.poll() is None:
            proc.kill()
