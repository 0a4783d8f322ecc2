"""One benchmark run with AIPerf, and the sweep over a matrix: one JSON line per run.

STANDALONE on purpose (stdlib only): the in-cluster benchmark Job runs this file from a ConfigMap,
and the lab's twin sweep imports it to build the same AIPerf command, parse the same output and
poll the frontend the same way.

    python aiperf_sweep.py --plan PLAN.json

PLAN: {"stack", "target", "url", "model", "tokenizer", "prefix_types": [...], "concurrency": [...],
"runs", "prefix_tokens", "unique_tokens", "output_tokens", "requests_per_concurrency", "out_dir"}.
AIPerf flags as Dynamo's docs use them (docs/sources.md); input length = prefix + unique.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

RESULT_FILE = "profile_export_aiperf.json"


def aiperf_command(plan: dict, prefix_types: int, concurrency: int, artifact_dir: Path,
                   aiperf: list[str]) -> list[str]:
    return aiperf + [
        "profile", "--model", plan["model"], "--url", plan["url"], "--endpoint-type", "chat", "--streaming",
        "--tokenizer", plan["tokenizer"],
        "--synthetic-input-tokens-mean", str(plan["unique_tokens"]), "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", str(plan["output_tokens"]), "--extra-inputs", "ignore_eos:true",
        "--num-prefix-prompts", str(prefix_types), "--prefix-prompt-length", str(plan["prefix_tokens"]),
        "--concurrency", str(concurrency),
        "--request-count", str(plan["requests_per_concurrency"] * concurrency),
        "--artifact-dir", str(artifact_dir), "--ui", "none",
    ]


def parse(profile: dict) -> dict:
    """AIPerf's profile_export_aiperf.json -> the figures the report uses (ms, requests/s)."""
    ttft = profile["time_to_first_token"]
    if ttft.get("unit", "ms") != "ms":
        raise ValueError(f"unexpected TTFT unit {ttft.get('unit')!r}")
    errors = (profile.get("error_summary") or [])
    return {
        "ttft_p50_ms": ttft["p50"], "ttft_p99_ms": ttft["p99"], "ttft_avg_ms": ttft["avg"],
        "requests_per_s": profile["request_throughput"]["avg"],
        "request_count": int(profile.get("request_count", {}).get("avg", 0)),
        "errors": sum(int(e.get("count", 0)) for e in errors) if isinstance(errors, list) else 0,
        "aiperf_version": profile.get("aiperf_version"),
    }


def run_point(plan: dict, prefix_types: int, concurrency: int, run: int, aiperf: list[str],
              timeout: float = 1800) -> dict:
    out = Path(plan["out_dir"]) / plan["stack"] / f"p{prefix_types}-c{concurrency}-r{run}"
    out.mkdir(parents=True, exist_ok=True)
    cmd = aiperf_command(plan, prefix_types, concurrency, out, aiperf)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    (out / "aiperf.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise RuntimeError(f"aiperf failed for prefix types {prefix_types}, concurrency {concurrency}:\n{tail}")
    figures = parse(json.loads((out / RESULT_FILE).read_text()))
    return {"stack": plan["stack"], "target": plan["target"], "prefix_types": prefix_types,
            "concurrency": concurrency, "run": run,
            "input_tokens": plan["prefix_tokens"] + plan["unique_tokens"],
            "output_tokens": plan["output_tokens"], **figures, "aiperf_json": str(out / RESULT_FILE)}


def model_listed(url: str, model: str, timeout: float = 5) -> bool:
    """Whether the frontend at `url` lists `model` (workers register it once loaded)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=timeout) as resp:
            return any(m.get("id") == model for m in json.load(resp).get("data", []))
    except (OSError, ValueError):
        return False


def wait_ready(url: str, model: str, seconds: float, poll: float = 5) -> None:
    """Wait until the frontend lists the model (in the cluster the workers may still be loading)."""
    import time

    deadline = time.monotonic() + seconds
    while not model_listed(url, model):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not list model {model} within {seconds:.0f} s")
        time.sleep(poll)


def points(plan: dict):
    for prefix_types in plan["prefix_types"]:
        for concurrency in plan["concurrency"]:
            for run in range(1, plan["runs"] + 1):
                yield prefix_types, concurrency, run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True, type=Path)
    p.add_argument("--aiperf", default="aiperf", help="the aiperf executable")
    p.add_argument("--wait-ready", type=float, default=0, metavar="SECONDS",
                   help="first wait up to SECONDS for the frontend to serve the model")
    args = p.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    if args.wait_ready:
        wait_ready(plan["url"], plan["model"], args.wait_ready)
    failed = 0
    for prefix_types, concurrency, run in points(plan):
        try:
            line = run_point(plan, prefix_types, concurrency, run, [args.aiperf])
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as exc:
            failed += 1
            line = {"stack": plan["stack"], "target": plan["target"], "prefix_types": prefix_types,
                    "concurrency": concurrency, "run": run, "error": str(exc)}
        print(json.dumps(line), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
