"""The lab's nodes as kwok simulates them: read from a saved `kubectl get nodes -o json` of the lab
(tests/data/preflight/lab.json), with what a simulated node must not carry left out.

Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

from dynamo_lab.paths import ROOT

LAB_CLUSTER = ROOT / "tests" / "data" / "preflight" / "lab.json"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def _documents(text: str) -> list[Any]:
    """The JSON documents of a saved `kubectl version -o json; kubectl get ... -o json` file."""
    decoder, at, docs = json.JSONDecoder(), 0, []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return docs
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)


def lab_nodes(text: str) -> list[dict]:
    """The lab's Nodes as kwok nodes: the same names, labels, capacity, allocatable (GPU replicas
    and GPU feature discovery labels included) and node info; no addresses (kwok gives loopback),
    no conditions (kwok's node-initialize stage sets them), annotated for kwok to manage."""
    nodes = []
    for doc in _documents(text):
        for item in doc.get("items", []) if isinstance(doc, dict) else []:
            if item.get("kind") != "Node":
                continue
            meta, status = item["metadata"], item.get("status", {})
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": meta["name"], "labels": dict(meta.get("labels", {})),
                             "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": list(item.get("spec", {}).get("taints", []))},
                "status": {"capacity": dict(status.get("capacity", {})),
                           "allocatable": dict(status.get("allocatable", {})),
                           "nodeInfo": dict(status.get("nodeInfo", {}))},
            })
    return nodes
