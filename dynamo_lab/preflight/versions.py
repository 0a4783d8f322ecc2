"""The Kubernetes versions the dynamo-platform chart supports, and a server version checked against
them the way Helm checks a chart's `kubeVersion` (Masterminds semver constraints).

Only the comparison operators (=, !=, >, <, >=, <=), ANDed by commas or spaces and ORed by `||`,
are understood: the forms charts use for kubeVersion. As in Helm, a version with a prerelease part
(v1.30.2-eks-1a2b3c) satisfies a bound only if the bound has a prerelease part too (the `-0` in
`>=1.30.0-0` is there to admit such vendor versions).
"""

from __future__ import annotations

import re
from typing import Optional

# The dynamo-platform chart's `kubeVersion` (deploy/helm/charts/platform/Chart.yaml; Kubernetes 1.30
# enables the CRD validation ratcheting its generated CRDs rely on). tests/infra/test_conformance.py
# checks this against the pinned chart's Chart.yaml.
SUPPORTED_KUBE_VERSION = ">=1.30.0-0"

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_BOUND = re.compile(r"\s*(>=|=>|<=|=<|!=|>|<|=)?\s*(v?\d[0-9A-Za-z.+-]*)\s*,?")

Version = tuple[int, int, int, tuple]


def parse(text: str) -> Optional[Version]:
    """'v1.34.1' -> (1, 34, 1, ()); 'v1.30.2-eks-1a2b' -> (1, 30, 2, ('eks-1a2b',)); None if not semver."""
    match = _VERSION.match(text.strip())
    if not match:
        return None
    major, minor, patch, pre = match.groups()
    ids = tuple(int(p) if p.isdigit() else p for p in pre.split(".")) if pre else ()
    return int(major), int(minor or 0), int(patch or 0), ids


def _pre_key(ids: tuple) -> tuple:
    # Semver precedence: no prerelease ranks above any; numeric identifiers below alphanumeric ones.
    if not ids:
        return (1,)
    return (0, *((0, i, "") if isinstance(i, int) else (1, 0, i) for i in ids))


def _key(v: Version) -> tuple:
    return v[0], v[1], v[2], _pre_key(v[3])


def _holds(op: str, version: Version, bound: Version) -> bool:
    if version[3] and not bound[3]:
        return False
    a, b = _key(version), _key(bound)
    return {">=": a >= b, "=>": a >= b, "<=": a <= b, "=<": a <= b, ">": a > b, "<": a < b,
            "!=": a != b, "=": a == b}[op]


def satisfies(version: str, constraint: str) -> bool:
    """Whether a server's gitVersion is within a chart's kubeVersion. ValueError if either is unreadable."""
    parsed = parse(version)
    if parsed is None:
        raise ValueError(f"{version!r} is not a semantic version")
    for alternative in constraint.split("||"):
        checks, at, text = [], 0, alternative.strip()
        while at < len(text):
            match = _BOUND.match(text, at)
            limit = parse(match.group(2)) if match else None
            if limit is None:
                raise ValueError(f"cannot read the version constraint {constraint!r}")
            checks.append(_holds(match.group(1) or "=", parsed, limit))
            at = match.end()
        if checks and all(checks):
            return True
    return False
