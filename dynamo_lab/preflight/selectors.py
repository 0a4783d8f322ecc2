"""Node affinity, matched as the scheduler matches it: one NodeSelectorTerm's matchExpressions
(ANDed) against a node's labels, with the six operators of a NodeSelectorRequirement.

Semantics of k8s.io/apimachinery `labels.Requirement.Matches`: In needs the label with one of the
values; NotIn matches a node without the label too; Gt/Lt need the label, and both it and the
value must parse as base-10 int64 (strconv.ParseInt), else the node does not match.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from infra.manifests.graph import describe_requirement

_INT64 = re.compile(r"^[+-]?\d+$")


def _int64(text: str) -> Optional[int]:
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def matches(req: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether one requirement ({key, operator, values}) holds for a node's labels."""
    key, op, values = req["key"], req["operator"], list(req.get("values") or [])
    has = key in labels
    if op == "In":
        return has and labels[key] in values
    if op == "NotIn":
        return not has or labels[key] not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        if not has or len(values) != 1:
            return False
        mine, theirs = _int64(labels[key]), _int64(values[0])
        if mine is None or theirs is None:
            return False
        return mine > theirs if op == "Gt" else mine < theirs
    raise ValueError(f"unknown node selector operator {op!r}")


def term_matches(expressions: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """A NodeSelectorTerm: all its expressions hold. An empty term matches no node (as in Kubernetes)."""
    return bool(expressions) and all(matches(e, labels) for e in expressions)


def why_not(req: dict[str, Any], labels: dict[str, str]) -> str:
    """Why a node fails one requirement, in words."""
    key = req["key"]
    if key not in labels:
        return f"has no label {key}"
    return f"has {key}={labels[key]}, not {describe_requirement(req)}"
