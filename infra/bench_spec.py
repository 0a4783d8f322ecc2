"""Pure builder: the in-cluster benchmark Job (AIPerf against the graph's frontend), as manifests."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from infra import graph_spec
from infra.config import StackConfig

SWEEP_SOURCE = Path(__file__).resolve().parent / "aiperf_sweep.py"
MOUNT = "/bench"
READY_WAIT_SECONDS = 1800  # workers may still be loading the model when the Job starts


def name(cfg: StackConfig, stack: str) -> str:
    return f"{cfg.graph.name}-bench"


def plan(cfg: StackConfig, stack: str) -> dict[str, Any]:
    b = cfg.benchmark
    return {"stack": stack, "target": "cluster", "url": graph_spec.frontend_url(cfg),
            "model": cfg.model.name, "tokenizer": b.tokenizer or cfg.model.name,
            "prefix_types": b.prefix_types, "concurrency": b.concurrency, "runs": b.runs,
            "prefix_tokens": b.prefix_tokens, "unique_tokens": b.unique_tokens,
            "output_tokens": b.output_tokens, "requests_per_concurrency": b.requests_per_concurrency,
            "out_dir": "/tmp/aiperf"}


def manifests(cfg: StackConfig, stack: str) -> dict[str, dict[str, Any]]:
    b, job = cfg.benchmark, name(cfg, stack)
    # AIPerf is installed at start (pinned): the image only needs Python and pip.
    script = (f"python3 -m pip install --quiet --disable-pip-version-check aiperf=={shlex.quote(b.aiperf_version)}"
              f" && exec python3 {MOUNT}/aiperf_sweep.py --plan {MOUNT}/plan.json"
              f" --wait-ready {READY_WAIT_SECONDS}")
    container: dict[str, Any] = {
        "name": "aiperf", "image": b.image, "command": ["sh", "-c", script],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        "volumeMounts": [{"name": "bench", "mountPath": MOUNT, "readOnly": True}],
    }
    if cfg.hf_token is not None:  # the tokenizer download may need it
        container["envFrom"] = [{"secretRef": {"name": graph_spec.HF_TOKEN_SECRET}}]
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                           "volumes": [{"name": "bench", "configMap": {"name": job}}]}
    if b.node_selector:
        pod["affinity"] = graph_spec.node_affinity(b.node_selector)
    return {
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": job, "namespace": cfg.graph.namespace},
                      "data": {"aiperf_sweep.py": SWEEP_SOURCE.read_text(),
                               "plan.json": json.dumps(plan(cfg, stack), indent=2)}},
        "job": {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job, "namespace": cfg.graph.namespace,
                             "annotations": {"pulumi.com/skipAwait": "true"}},
                "spec": {"backoffLimit": 0, "template": {"spec": pod}}},
    }


def logs_command(cfg: StackConfig, stack: str) -> str:
    return f"kubectl logs -n {cfg.graph.namespace} job/{name(cfg, stack)} | grep '^{{'"
