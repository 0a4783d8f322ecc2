"""Pure builder: the dynamo-platform Helm release (chart, pinned version, values) of a stack."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from infra.config.schema import Platform

# The Helm release is not a Kubernetes object: the plan holds it as a HelmRelease, which the
# components install with pulumi-kubernetes' helm.v3.Release, whose type this is.
HELM_RELEASE = ("helm.sh/v3", "Release")


@dataclass(frozen=True)
class HelmRelease:
    """One Helm release: the chart at a pinned version from its repository, into a namespace, with
    values, waited on for this long."""

    name: str
    chart: str
    version: str
    repository: str
    namespace: str
    timeout_seconds: int
    values: dict[str, Any]


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_values(platform: Platform) -> dict[str, Any]:
    """Grove and the KAI scheduler off, explicitly, under `global.*` (the chart's 1.4+ switches).

    The old top-level `grove.enabled` / `kai-scheduler.enabled` keys make the chart fail; config
    validation refuses them in `platform.values`. User values are merged first and ours last, so
    the Grove/KAI switches stay off: the lab runs without them (docs/lab.md).
    """
    off = {"install": False, "enabled": False}
    ours = {"global": {"grove": dict(off), "kai-scheduler": dict(off)}}
    return _merge(platform.values, ours)


def release(platform: Platform) -> HelmRelease:
    """The platform's release: chart, pinned version, repository, namespace, values."""
    return HelmRelease(name=platform.release_name, chart=platform.chart, version=platform.version,
                       repository=platform.chart_repo, namespace=platform.namespace,
                       timeout_seconds=platform.timeout_seconds, values=chart_values(platform))
