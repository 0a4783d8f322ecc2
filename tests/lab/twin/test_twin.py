"""The local twin for real (lab tier): Dynamo's frontend and KV router with mocker workers, driven
by AIPerf. `python3 dev.py test-lab` installs the twin environment; these tests install nothing.

Each test marks the processes it starts with an environment variable of its own and judges only
those, so two runs on one machine do not fail each other.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from dynamo_lab import stack_files
from tests.helpers import ROOT, unavailable

pytestmark = pytest.mark.lab
MARK = "DYNAMO_LAB_TEST_RUN"


@pytest.fixture(scope="module")
def twin_python() -> str:
    path = os.environ.get("DYNAMO_LAB_TWIN_PYTHON", "")
    if not Path(path or "/nonexistent").is_file():
        unavailable("no twin environment: run the lab tier with `python3 dev.py test-lab`")
    return path


def _marked(mark: str) -> set[int]:
    """Processes whose environment carries this test's mark (the twin passes its env on)."""
    needle = f"{MARK}={mark}".encode()
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                pids.add(int(entry))
    return pids


@pytest.fixture
def run_env(twin_python):
    """The environment for the processes this test starts, and a check that none outlives it."""
    mark = uuid.uuid4().hex
    yield {**os.environ, "DYNAMO_LAB_TWIN_PYTHON": twin_python, MARK: mark}
    time.sleep(0.5)
    leftover = _marked(mark)
    for pid in leftover:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert leftover == set(), "processes this test started were left running"


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _bench(stack, out, env):
    proc = subprocess.run([sys.executable, "-m", "dynamo_lab", "bench", stack, "--target", "twin", "--quick",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    port = int(re.search(r"frontend on http://127\.0\.0\.1:(\d+)", proc.stderr).group(1))
    assert _port_closed(port), f"frontend port {port} still open"
    (line,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert (out / stack / "p2-c4-r1" / "profile_export_aiperf.json").is_file()
    return line


def test_quick_sweep_reproduces_the_labs_direction(run_env, tmp_path):
    kv = _bench("kv-routing", tmp_path / "kv", run_env)
    same = _bench("same-server", tmp_path / "same", run_env)
    for line in (kv, same):
        requests = stack_files.load(line["stack"], ROOT).config.benchmark.requests_per_concurrency * 4
        assert {"stack", "target", "prefix_types", "concurrency", "run", "ttft_p50_ms", "ttft_p99_ms",
                "requests_per_s"} <= set(line)
        assert (line["target"], line["prefix_types"], line["concurrency"], line["run"]) == ("twin", 2, 4, 1)
        assert (line["request_count"], line["errors"]) == (requests, 0)  # the whole cell, none failed
    # The lab's direction: same-server TTFT a multiple of KV routing's. The twin's gap is narrower
    # than the lab's 8x: its decode mockers, like vLLM's decode workers, pull only the blocks they
    # lack, and the mocker has no other per-transfer cost (docs/measurements.md). Requests/s is not
    # compared here: one run is about 4 s of wall clock, and a busy 2-core machine stalls AIPerf's
    # client enough to close KV routing's lead; the report below prints both, and
    # docs/measurements.md gives the spread measured over repeated runs.
    assert same["ttft_p50_ms"] >= 2 * kv["ttft_p50_ms"]
    png = tmp_path / "plot.png"
    report = subprocess.run([sys.executable, "-m", "dynamo_lab", "report", str(tmp_path / "same" / "results.jsonl"),
                             "--baseline", str(tmp_path / "kv" / "results.jsonl"), "--plot", str(png), "--published"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert report.returncode == 0, report.stderr
    assert "same-server (twin) vs kv-routing" in report.stdout
    assert "req/s kv-routing" in report.stdout and "req/s same-server" in report.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_ctrl_c_stops_every_twin_process(run_env):
    proc = subprocess.Popen([sys.executable, "-m", "dynamo_lab", "twin", "same-server"], cwd=ROOT, env=run_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once every worker registered
        assert "ready" in line, proc.stderr.read()[-3000:] if proc.poll() is not None else line
        url = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert len(_marked(run_env[MARK]) - {proc.pid}) >= 5  # frontend + 4 mockers
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert _port_closed(int(url.group(1)))
    finally:
        if proc.poll() is None:
            proc.kill()
