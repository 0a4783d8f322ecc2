"""Pure builder: the dynamo-platform Helm release (chart, pinned version, values) of a stack."""

from __future__ import annotations

import copy
from typing import Any

from infra.config.models import Platform

# The Helm release is not a Kubernetes object: the plan holds it as a document of this kind, which
# the components install with helm.v3.Release.
HELM_RELEASE = ("helm.sh/v3", "Release")


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


def release(platform: Platform) -> dict[str, Any]:
    """The release as a HELM_RELEASE document: chart, pinned version, repository, namespace, values."""
    api_version, kind = HELM_RELEASE
    return {"apiVersion": api_version, "kind": kind, "name": platform.release_name, "chart": platform.chart,
            "version": platform.version, "repository": platform.chart_repo, "namespace": platform.namespace,
            "timeoutSeconds": platform.timeout_seconds, "values": chart_values(platform)}
