"""The one part of the Dynamo operator that a deploy waits on, played where no operator can run.

The operator's module is served by no registry these machines reach, so the local cluster has no
operator. A DynamoGraphDeployment carries `pulumi.com/waitFor: condition=Ready`, so `pulumi up`
waits until something writes the Ready condition. `GraphReady` writes it, through the status
subresource only (as the operator does, `status.conditions[Ready]`, `status.state: successful`,
`status.observedGeneration`), for each graph it sees, at each new generation.

What it leaves out is everything else the operator does: it starts no pod, creates no Service,
checks nothing of the graph (a graph whose workers would crash is marked Ready all the same). What
the graph's pods would be is checked apart from this (tests/lab/cluster/test_stacks.py,
test_placement.py), from the graph's pod templates.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

from dynamo_lab.local_cluster.api import Api

GRAPHS = "/apis/nvidia.com/v1beta1/dynamographdeployments"
STANDIN_REASON = "StandInForOperator"


def ready_status(generation: int, now: Optional[str] = None) -> dict:
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"status": {"state": "successful", "observedGeneration": generation, "conditions": [{
        "type": "Ready", "status": "True", "reason": STANDIN_REASON, "observedGeneration": generation,
        "lastTransitionTime": now,
        "message": "marked Ready by dynamo-lab's stand-in for the Dynamo operator "
                   "(dynamo_lab/local_cluster/standin.py): no operator runs here and no worker was started"}]}}


def is_ready(graph: dict) -> bool:
    status = graph.get("status") or {}
    generation = graph["metadata"].get("generation")
    return status.get("observedGeneration") == generation and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


class GraphReady(threading.Thread):
    """Marks every DynamoGraphDeployment Ready (or only `names`, namespace/name) as it appears."""

    def __init__(self, api: Api, names: Optional[set[str]] = None, poll: float = 0.5):
        super().__init__(name="graph-ready-standin", daemon=True)
        self.api, self.names, self.poll = api, names, poll
        self.marked: list[str] = []
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.mark_once()
            except OSError as exc:  # the API server restarting or gone: try again
                self.errors.append(str(exc))
            self._halt.wait(self.poll)

    def mark_once(self) -> list[str]:
        code, body = self.api.call("GET", GRAPHS)
        if code == 404:  # the CRD is not there (yet)
            return []
        marked = []
        for graph in (body or {}).get("items", []) if code == 200 else []:
            meta = graph["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if (self.names is not None and key not in self.names) or is_ready(graph):
                continue
            code, out = self.api.call("PATCH", f"/apis/nvidia.com/v1beta1/namespaces/{meta['namespace']}/"
                                      f"dynamographdeployments/{meta['name']}/status", ready_status(meta["generation"]),
                                      content_type="application/merge-patch+json")
            if code == 200:
                marked.append(key)
                self.marked.append(key)
            else:
                self.errors.append(f"{key}: {code} {out}")
        return marked

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)

    def __enter__(self) -> "GraphReady":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
