"""How long `advise` takes: `python3 dev.py time-advise [--runs N]`.

A benchmark, not a test: N runs, each in a fresh process, of `python -m dynamo_lab advise STACK
--from tests/data/preflight/lab.json` (the lab's cluster: 68 layouts, the stack's 8 benchmark
points, the predictor's validation for the uncertainty), as many of the same search at
concurrency 16 and 32 (`--concurrency 16,32`: each request is simulated, so a deeper queue costs
more), as many on eight nodes (tests/data/preflight/eight-nodes.json: the lab's two classes on
five 24GB servers and three 8GB laptops, 1,008 layouts, so the bounded search: docs/advise.md), and
as many of two-node-rdma on its two nodes of 8 H100s at concurrency 64 (issue 45: Qwen3-32B at
every tensorParallel, each request simulated at the deepest queue advise takes).
It prints each run's wall and CPU seconds, each case's median, and the goal (60 s on the
2-core development machines; the search simulates on every core). It judges nothing: the figures
depend on what else the machine runs (note the load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from tests.time_render import ROOT, _positive_int, _timed

GOAL_S = 60.0
CLUSTER = "tests/data/preflight/lab.json"
EIGHT_NODES = "tests/data/preflight/eight-nodes.json"
H100S = "tests/data/preflight/two-8gpu-rdma.json"
# The default search, one beyond the lab's concurrency (each request is simulated, so deeper queues
# are where a search's time goes), and one on a cluster of 8 nodes (issue 34: the search grows with
# nodes; the bounded search answers within the goal): (cluster, extra arguments).
CASES = ((CLUSTER, (), "kv-routing"), (CLUSTER, ("--concurrency", "16,32"), "kv-routing"),
         (EIGHT_NODES, (), "kv-routing"), (H100S, ("--concurrency", "64"), "two-node-rdma"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=_positive_int, default=3)
    p.add_argument("--stack", help="the base stack of every case (default: each case's own)")
    args = p.parse_args(argv)
    for cluster, extra, own in CASES:
        stack = args.stack or own
        cmd = [sys.executable, "-m", "dynamo_lab", "advise", stack, "--from", str(ROOT / cluster), *extra]
        walls = []
        for n in range(1, args.runs + 1):
            wall, cpu = _timed(cmd)
            walls.append(wall)
            case = f"{' '.join(extra) or 'default'} on {cluster.rsplit('/', 1)[-1]}"
            print(f"{case}: run {n}: {wall:.1f} s wall, {cpu:.1f} s CPU (load average "
                  f"{os.getloadavg()[0]:.2f})", flush=True)
        median = statistics.median(walls)
        print(f"advise {' '.join([stack, '--from', cluster, *extra])}: median {median:.1f} s over {args.runs} "
              f"run(s); goal {GOAL_S:.0f} s on 2 cores: {'met' if median <= GOAL_S else 'NOT met'} "
              f"({os.cpu_count()} CPUs here)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
