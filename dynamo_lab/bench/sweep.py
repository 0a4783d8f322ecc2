"""`dynamo-lab bench STACK --target twin|cluster`: the benchmark matrix, on a local twin or in the cluster.

Against the twin, every run gets a fresh twin (no prefix cache carried over between runs), and
writes AIPerf's JSON under DIR/<stack>/p<prefix>-c<concurrency>-r<run>/ plus one line per run in
DIR/results.jsonl. `--quick` reduces the matrix to prefix types 2 x concurrency 4 x 1 run.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Optional

from dynamo_lab.twin.runner import Twin, TwinError, twin_python
from infra import manifests
from infra.config.schema import StackConfig
from infra.manifests import benchmark
from infra.payloads import aiperf_sweep
from infra.sizing import StackSizing


def aiperf_executable() -> list[str]:
    exe = twin_python().parent / "aiperf"
    if not exe.exists():
        raise TwinError(f"aiperf not found next to {twin_python()}: run through `python3 dev.py bench ...`")
    return [str(exe)]


# `--quick`: one cell of the matrix, one run (the twin sweep's; the cluster Job runs the stack's matrix).
QUICK = {"prefix_types": [2], "concurrency": [4], "runs": 1}


def run_twin(cfg: StackConfig, sizing: StackSizing, stack: str, out: Path, quick: bool, log=print,
             overrides: Optional[dict] = None) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    aiperf = aiperf_executable()
    # The twin's URL and tokenizer are known only once each fresh twin runs; filled in per run.
    base = {**benchmark.sweep_plan(cfg.benchmark, cfg.model.name, stack, "twin", "", "", str(out)),
            **(QUICK if quick else {}), **(overrides or {})}
    grid = list(aiperf_sweep.points(base))
    lines = []
    for n, (prefix_types, concurrency, run) in enumerate(grid, start=1):
        log(f"[{n}/{len(grid)}] {stack}: prefix types {prefix_types}, concurrency {concurrency}, run {run}")
        with Twin(cfg, sizing, log=log) as twin:  # a fresh twin (and prefix cache) per run
            plan = {**base, "url": twin.url, "tokenizer": str(twin.model_dir)}
            try:
                line = aiperf_sweep.run_point(plan, prefix_types, concurrency, run, aiperf)
            except RuntimeError as exc:  # aiperf_sweep is standalone: it knows no project errors
                raise TwinError(str(exc)) from None
        with results.open("a") as f:
            f.write(json.dumps(line) + "\n")
        log(f"      TTFT p50 {line['ttft_p50_ms']:.0f} ms, p99 {line['ttft_p99_ms']:.0f} ms, "
            f"{line['requests_per_s']:.2f} requests/s")
        lines.append(line)
    return lines


def cluster_steps(stack: str, cfg: StackConfig, out: Path) -> str:
    """The in-cluster steps as shell lines, each of which runs as printed (`eval` runs benchLogs,
    a command with a pipe)."""
    ns, q = cfg.graph.namespace, shlex.quote
    results = q(str(out / "results.jsonl"))
    return "\n".join([
        f"# The benchmark runs as a Job next to the graph of stack {stack}:",
        f"pulumi config set --path benchmark.enabled true --stack {q(stack)}",
        f"pulumi up --stack {q(stack)}",
        "# Follow it (the stack output benchJob names the Job); each finished run prints one JSON line:",
        f'{manifests.kubectl(cfg.target)} logs -n {q(ns)} -f "job/$(pulumi stack output benchJob --stack {q(stack)})"',
        f"# Collect the lines into the same results format the twin writes (benchLogs is a shell command),"
        f" within {cfg.benchmark.ttl_seconds_after_finished} s of the Job's end: then Kubernetes deletes it and"
        " its log (benchmark.ttlSecondsAfterFinished):",
        f'mkdir -p {q(str(out))} && eval "$(pulumi stack output benchLogs --stack {q(stack)})" > {results}',
        f"python3 dev.py report {results}",
    ])


def main_twin(cfg, sizing, stack, out, quick, overrides=None) -> int:
    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    run_twin(cfg, sizing, stack, out, quick, log, overrides)
    log(f"results: {out / 'results.jsonl'}")
    return 0
