"""How long the fast test tier takes: `python3 dev.py time-tests [--runs N]`.

A benchmark, not a test: it runs `python3 dev.py test`'s pytest (the fast tier, everything
installed) N times in fresh processes and prints each wall time, the median and the goal (20 s
on the 2-core development machine). It judges nothing: the figures are for the reader; it exits
non-zero only when a run's tests fail. Before and after the runs it times one pure-Python loop of
REFERENCE_STEPS and reads the load average: the development machine is shared and its speed varies
from day to day and within minutes (this loop took from 1.39 to 2.54 s between 22:12 and 22:18 UTC
on 2026-12-06: docs/testing.md), so a median is read against the machine's speed when it was taken.
Only this loop's own figures compare: other forms of a 10^8-step loop take from twice to four times
as long on the same interpreter (docs/testing.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dev import FAST_TIER

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 20
REFERENCE_STEPS = 10**8


def machine_now(load: bool = True) -> str:
    """This machine's speed at the moment: one core's time for a fixed loop (one core's Python speed,
    which the pure-Python fast tier follows), and, before the runs, the load average (what else shares
    the cores; after them it would mostly count the runs themselves)."""
    start = time.perf_counter()
    for _ in range(REFERENCE_STEPS):
        pass
    said = f"a {REFERENCE_STEPS:,}-step Python loop took {time.perf_counter() - start:.2f} s"
    return f"{said}, load average {os.getloadavg()[0]:.1f}" if load else said


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write a positive integer")
    return int(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=_positive_int, default=3)
    p.add_argument("pytest_args", nargs="*", help="passed to pytest after the fast-tier selection")
    args = p.parse_args(argv)
    cmd = [sys.executable, "-m", "pytest", "-q", *FAST_TIER, *args.pytest_args]
    times = []
    print(f"machine before: {machine_now()}", flush=True)
    for n in range(1, args.runs + 1):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"run {n}: {elapsed:.1f} s  ({last})", flush=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n")
            return proc.returncode
        times.append(elapsed)
    median = statistics.median(times)
    print(f"machine after: {machine_now(load=False)}")
    print(f"fast tier on {os.cpu_count()} CPUs: median {median:.1f} s over {len(times)} runs "
          f"(min {min(times):.1f}, max {max(times):.1f}); goal {GOAL_SECONDS} s on 2 cores: "
          f"{'met' if median <= GOAL_SECONDS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
