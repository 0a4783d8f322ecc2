"""Pure builder: the in-cluster benchmark Job (AIPerf against the graph's frontend), and the sweep
plan it runs, which the local twin sweep runs too.

The Job runs the `aiperf_sweep.py` payload from a ConfigMap that also holds the plan; both are
named from a digest of that content, so a changed script or plan runs a new Job on `pulumi up`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from infra import names, payloads
from infra.config.schema import BENCH_READY_WAIT_SECONDS, Benchmark, StackConfig
from infra.manifests import BENCHMARK_JOB, JOB_LABEL, digest_named, digest_suffix, kubectl, security
from infra.manifests.graph import frontend_url, node_affinity, with_hf_token

PAYLOAD = "aiperf_sweep.py"
REQUIREMENTS = "requirements.txt"  # payloads.AIPERF_REQUIREMENTS, in the ConfigMap
MOUNT = "/bench"
HOME = "/home/aiperf"  # an emptyDir: pip's --user install and the tokenizer cache
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def sweep_plan(benchmark: Benchmark, model: str, stack: str, target: str, url: str, tokenizer: str,
               out_dir: str) -> dict[str, Any]:
    """What `aiperf_sweep.py --plan` reads: the matrix, each run's load, and where to send it."""
    b = benchmark
    plan = {"stack": stack, "target": target, "url": url, "model": model, "tokenizer": tokenizer,
            "prefix_types": list(b.prefix_types), "concurrency": list(b.concurrency), "runs": b.runs,
            "prefix_tokens": b.prefix_tokens, "unique_tokens": b.unique_tokens,
            "output_tokens": b.output_tokens, "requests_per_concurrency": b.requests_per_concurrency,
            "out_dir": out_dir}
    return plan


def _build(cfg: StackConfig, stack: str, payload: str, requirements: str, digest: str) -> dict[str, dict[str, Any]]:
    b = cfg.benchmark
    job = f"{names.benchmark_base(cfg.graph.name)}{digest_suffix(digest)}"
    plan = sweep_plan(b, cfg.model.name, stack, "cluster", frontend_url(cfg), b.tokenizer or cfg.model.name,
                      "/tmp/aiperf")
    # AIPerf is installed at start, as the non-root user into a home of its own, from requirements
    # that pin it and every dependency by hash: the image only needs Python 3.11 and pip, and a
    # package that differs from the lock fails the Job instead of running.
    script = (f"python3 -m pip install --user --quiet --disable-pip-version-check --require-hashes --no-deps "
              f"--only-binary :all: -r {MOUNT}/{REQUIREMENTS}"
              f" && exec python3 {MOUNT}/{PAYLOAD} --plan {MOUNT}/plan.json"
              f" --wait-ready {BENCH_READY_WAIT_SECONDS}")
    container = with_hf_token(cfg, security.container({  # the tokenizer download may need it
        "name": "aiperf", "image": b.image, "command": ["sh", "-c", script],
        "env": [{"name": "HOME", "value": HOME}, {"name": "PATH", "value": f"{HOME}/.local/bin:{SYSTEM_PATH}"}],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        "volumeMounts": [{"name": "bench", "mountPath": MOUNT, "readOnly": True}, {"name": "home", "mountPath": HOME}],
    }))
    pod: dict[str, Any] = {"restartPolicy": "Never", "automountServiceAccountToken": False,  # no API call
                           "securityContext": security.pod(uid=security.BENCHMARK_UID, gid=security.BENCHMARK_UID),
                           "containers": [container],
                           "volumes": [{"name": "bench", "configMap": {"name": job}},
                                       {"name": "home", "emptyDir": {}}]}
    if b.node_selector:
        pod["affinity"] = node_affinity(b.node_selector)
    return {
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": job, "namespace": cfg.graph.namespace},
                      "data": {PAYLOAD: payload, "plan.json": json.dumps(plan, indent=2),
                               REQUIREMENTS: requirements}},
        "job": {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job, "namespace": cfg.graph.namespace,
                             "annotations": {"pulumi.com/skipAwait": "true"}},
                # A deadline, and cleanup once it ends: the results are the log's JSON lines, which
                # `benchLogs` collects; the Job, its pod and log go ttlSecondsAfterFinished later.
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": b.timeout_seconds,
                         "ttlSecondsAfterFinished": b.ttl_seconds_after_finished,
                         "template": {"metadata": {"labels": {JOB_LABEL: BENCHMARK_JOB}}, "spec": pod}}},
    }


@dataclass(frozen=True)
class BenchmarkObjects:
    """What the benchmark deploys: its ConfigMap (the sweep's script, plan and requirements) and the Job."""

    configmap: dict[str, Any]
    job: dict[str, Any]


def manifests(cfg: StackConfig, stack: str) -> BenchmarkObjects:
    """The ConfigMap (payload + plan) and the Job, both named `<graph>-bench-<digest>`."""
    payload, requirements = payloads.source(PAYLOAD), payloads.source(payloads.AIPERF_REQUIREMENTS)
    return BenchmarkObjects(**digest_named(lambda digest: _build(cfg, stack, payload, requirements, digest)))


def logs_command(cfg: StackConfig, job: str) -> str:
    """The stack output benchLogs: a shell command (a pipe) printing the Job's JSON result lines.
    Run it as `eval "$(pulumi stack output benchLogs)"`: a bare `$(...)` does not run pipes."""
    return f"{kubectl(cfg.target)} logs -n {cfg.graph.namespace} job/{job} | grep '^{{'"
