"""The preflight report in words: a table per GPU class and per node (needs against has, verdict),
the cluster-wide checks, then each problem with its fix."""

from __future__ import annotations

import json

from dynamo_lab.preflight.fit import fmt
from dynamo_lab.preflight.report import GpuMemory, Need, NodeRow, PendingPod, Placed, Report
from dynamo_lab.sizing_text import text_table
from infra import units


def _need(n: Need | None, unit: str = "") -> str:
    if n is None:
        return "-"
    return f"{fmt(n.resource, n.needs)} / {fmt(n.resource, n.has)}{unit}{'' if n.ok else ' !'}"


def _resource(needs: list[Need], resource: str) -> str:
    return _need(next((n for n in needs if n.resource == resource), None))


def _gpu_units(needs: list[Need]) -> str:
    return ", ".join(_need(n, f" {n.resource}") for n in needs if n.resource not in ("memory", "cpu")) or "-"


def _gpu_memory(g: GpuMemory | None) -> str:
    if g is None:
        return "-"
    if g.reported_mib is None:
        return f"{units.human(g.planned_bytes)} / no label !"
    return (f"{units.human(g.planned_bytes)} / {units.human(g.budget_bytes or 0)} "
            f"({g.reported_mib}Mi){'' if g.ok else ' !'}")


def _places(row: NodeRow, pending: list[PendingPod]) -> str:
    """What is placed on a node, each group's Pending pods counted by the group the packing gave them."""
    def waiting(p: Placed) -> str:
        n = sum(pp.group == p.name and pp.pod in row.pending for pp in pending) if p.bound else 0
        return f" ({n} Pending)" if n else ""
    return ", ".join(f"{p.replicas} x {p.name}" + ("" if p.bound else " (may land here)") + waiting(p)
                     for p in row.places) or "-"


def _verdict(row: NodeRow) -> str:
    if not row.resources:
        return "nothing bound"
    return "fits" if row.ok else "DOES NOT FIT"


def text(r: Report) -> str:
    out = [f"Preflight {r.stack}: {r.source}, Kubernetes {r.server_version}", "",
           "GPU classes (the nodes each selects; no node may serve two):",
           text_table(["gpu class", "node selector", "workers", "matching nodes", "verdict"],
                      [[c.gpu_class, c.selector, str(c.workers), ", ".join(c.nodes) or "none",
                        ("ok" if c.ok else "FAILS") if c.workers else "unused"] for c in r.classes]),
           "",
           "Nodes (needs / has: requests of the pods placed there / allocatable; GPU memory: the sizing's plan /"
           " the reported GPU less the class's reserve):",
           text_table(["node", "places", "GPU units", "GPU memory", "memory", "CPU", "verdict"],
                      [[n.name, _places(n, r.pending), _gpu_units(n.resources), _gpu_memory(n.gpu_memory),
                        _resource(n.resources, "memory"), _resource(n.resources, "cpu"), _verdict(n)]
                       for n in r.nodes]),
           *([""] + ["Pending (the scheduler's words):"] + [f"- {p.pod}: {p.reason}" for p in r.pending]
             if r.pending else []),
           "",
           "Cluster:",
           text_table(["check", "verdict", "detail"],
                      [[c.name, "not checked" if c.ok is None else "ok" if c.ok else "FAILS", c.detail]
                       for c in r.checks])]
    if r.notes:
        out += ["", "Notes:"] + [f"- {note}" for note in r.notes]
    if r.problems:
        out += ["", f"Problems ({len(r.problems)}):"]
        for i, p in enumerate(r.problems, 1):
            out += [f"{i}. {p.where}: {p.check}: {p.problem}", f"   Fix: {p.fix}"]
    out += ["", f"Verdict: {r.stack} fits this cluster." if r.fits else
            f"Verdict: {r.stack} does NOT fit this cluster ({len(r.problems)} problem"
            f"{'s' if len(r.problems) != 1 else ''}); fix them before `pulumi up`."]
    return "\n".join(out)


def to_json(r: Report) -> str:
    return json.dumps(r.as_dict(), indent=2)
