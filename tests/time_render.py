"""How long `render` takes against the Kubernetes SDK's own import: `python3 dev.py time-render [--runs N]`.

A benchmark, not a test: N paired runs, each in fresh processes, of `python -c "import
pulumi_kubernetes.core.v1"` (what any program that deploys a Namespace pays) and the README's
`python3 dev.py render STACK` (the python3 on PATH, dev.py's check of .venv included); it prints
each pair's wall and CPU seconds and the median of the paired ratios, beside the goal (under 1.5).
It judges nothing: the figures are for the reader, and depend on what else the machine runs (note
the load).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.5


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write a positive integer")
    return int(text)


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=_positive_int, default=5)
    p.add_argument("--stack", default="cross-server")
    args = p.parse_args(argv)
    baseline = [sys.executable, "-c", "import pulumi_kubernetes.core.v1"]
    # The README's command as a user types it: dev.py's own start (its environment check) counts too.
    render = [shutil.which("python3") or sys.executable, "dev.py", "render", args.stack]
    _timed(render)  # once unmeasured: the first start pays for what the filesystem had not cached
    ratios: dict[str, list[float]] = {"wall": [], "CPU": []}
    for n in range(1, args.runs + 1):
        (bw, bc), (rw, rc) = _timed(baseline), _timed(render)
        ratios["wall"].append(rw / bw)
        ratios["CPU"].append(rc / bc)
        print(f"run {n}: import {bw:.2f} s wall, {bc:.2f} s CPU; render {rw:.2f} s wall, {rc:.2f} s CPU", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for kind, values in ratios.items():
        median = statistics.median(values)
        print(f"render / import, {kind}: median {median:.2f} over {args.runs} paired runs "
              f"(min {min(values):.2f}, max {max(values):.2f}); goal under {GOAL_RATIO}: "
              f"{'met' if median < GOAL_RATIO else 'NOT met'}")
    print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
