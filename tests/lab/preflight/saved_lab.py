"""Saved kubectl output of the lab for preflight's tests (a 24GB node and an 8GB node, both
time-sliced to 4 nvidia.com/gpu), edited into variants, and the command line run on it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable, Optional

from dynamo_lab.cli import main
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.run import check
from tests.helpers import ROOT, loaded

DATA = ROOT / "tests" / "data" / "preflight"
LAB = DATA / "lab.json"


def lab() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The lab's saved data: `kubectl version -o json` and the List of `kubectl get ... -o json`."""
    version, listing = cluster_data.documents(LAB.read_text(), str(LAB))
    return version, listing["items"]


def node(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == "Node" and i["metadata"]["name"] == name)


def saved(tmp_path: Path, edit: Optional[Callable[[dict, list], None]] = None) -> str:
    """The lab's data, edited, written in the documented format (two JSON documents, one file)."""
    version, items = copy.deepcopy(lab())
    if edit:
        edit(version, items)
    path = tmp_path / "cluster.json"
    listing = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    path.write_text(json.dumps(version, indent=4) + "\n" + json.dumps(listing, indent=4) + "\n")
    return str(path)


def preflight(capsys, stack: str, path: str, *more: str) -> tuple[int, str, str]:
    code = main(["preflight", stack, "--from", path, *more])
    out = capsys.readouterr()
    return code, out.out, out.err


def problems(text: str) -> list[tuple[str, str]]:
    """(problem line, fix line) pairs of the text report."""
    return re.findall(r"^\d+\. (.*)\n   Fix: (.*)$", text, re.MULTILINE)


def does_not_fit(out: str, stack: str, count: int) -> bool:
    s = "s" if count != 1 else ""
    return out.rstrip().endswith(f"Verdict: {stack} does NOT fit this cluster ({count} problem{s}); fix them "
                                 "before `pulumi up`.")


def gpu_classes(rule_24gb: dict, rule_8gb: dict) -> Callable[[dict], None]:
    """A stack edit: the two GPU classes, each selected by one node selector requirement."""
    def edit(c):
        c["gpuClasses"] = {
            "gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [rule_24gb]},
            "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [rule_8gb]}}
    return edit


def host(name: str) -> dict:
    return {"key": "kubernetes.io/hostname", "operator": "In", "values": [name]}


def report_for(stack: str, path: str, edit=None):
    return check(loaded(stack, edit), cluster_data.read_file(path))


def old_server(version, items):
    version["serverVersion"].update(minor="29", gitVersion="v1.29.15")
