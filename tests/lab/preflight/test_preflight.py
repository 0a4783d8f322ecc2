"""`dynamo-lab preflight STACK --from FILE` on the lab's saved kubectl output: every shipped stack
fits, and the report says so in its table and its JSON, each problem with its fix."""

from __future__ import annotations

import json
import re

from tests.lab.preflight.saved_lab import (
    LAB,
    old_server,
    preflight,
    saved,
)

# --- The lab: everything fits -------------------------------------------------------------------


def test_every_stack_fits_the_lab(capsys, stack):
    code, out, err = preflight(capsys, stack, str(LAB))
    assert (code, err) == (0, "")
    assert out.startswith(f"Preflight {stack}: {LAB}, Kubernetes v1.34.1\n")
    assert out.rstrip().endswith(f"Verdict: {stack} fits this cluster.")
    assert "Problems" not in out


def test_the_table_shows_needs_against_has_per_node(capsys):
    code, out, _ = preflight(capsys, "cross-server", str(LAB))
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("gpu-server ", "gpu-laptop "))}
    # 2 decode workers (7.9Gi each) + the frontend (2Gi), 2 x 2 + 1 CPUs; their GPU plan against
    # 24576Mi less 10%.
    assert re.search(r"2 x decode, 1 x frontend \(may land here\)\s+2 / 4 nvidia.com/gpu\s+13.2Gi / 21.6Gi "
                     r"\(24576Mi\)\s+17.8Gi / 62.6Gi\s+5 / 16\s+fits$", rows["gpu-server"])
    assert re.search(r"1 x prefill, 1 x frontend \(may land here\)\s+1 / 4 nvidia.com/gpu\s+4.6Gi / 7.2Gi "
                     r"\(8192Mi\)\s+7.7Gi / 15.4Gi\s+3 / 16\s+fits$", rows["gpu-laptop"])
    assert re.search(r"^gpu-8gb\s+nvidia.com/gpu.memory Lt 12000\s+1\s+gpu-laptop\s+ok$", out, re.MULTILINE)
    assert re.search(r"^kubernetes version\s+ok\s+v1.34.1 is within >=1.30.0-0", out, re.MULTILINE)


def test_json_for_ci(capsys):
    code, out, _ = preflight(capsys, "kv-routing", str(LAB), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fits"] is True and doc["problems"] == []
    assert set(doc) == {"fits", "stack", "source", "server_version", "classes", "nodes", "checks", "problems",
                        "notes", "pending"}  # pending: the worker pods the packing leaves Pending (none here)
    assert doc["pending"] == []
    server = next(n for n in doc["nodes"] if n["name"] == "gpu-server")
    assert server["places"][0] == {"name": "worker-24gb", "replicas": 4, "bound": True}
    assert {"name": "frontend", "replicas": 1, "bound": False} in server["places"]
    resources = {r["resource"]: r for r in server["resources"]}
    assert resources["nvidia.com/gpu"] == {"resource": "nvidia.com/gpu", "needs": 4, "has": 4, "ok": True}
    assert resources["memory"]["needs"] == 4 * 3584 * 2**20 + 2 * 2**30  # bytes
    assert resources["cpu"] == {"resource": "cpu", "needs": 9, "has": 16, "ok": True}  # cores
    assert server["gpu_memory"]["reported_mib"] == 24576
    assert {c["name"] for c in doc["checks"]} == {"kubernetes version", "dynamo operator", "platform.namespace",
                                                  "graph.namespace", "pod security"}


def test_json_lists_each_problem_with_its_fix(capsys, tmp_path):
    code, out, _ = preflight(capsys, "kv-routing", saved(tmp_path, old_server), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["fits"] is False
    (problem,) = doc["problems"]
    assert set(problem) == {"where", "check", "problem", "fix"}
    assert problem["check"] == "kubernetes version"
