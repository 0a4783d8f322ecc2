"""Pure builder: the dynamo-platform chart values and release settings for a stack."""

from __future__ import annotations

import copy
from typing import Any

from infra.config import Platform


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
    validation rejects them in `platform.values`. User values are merged last, except that the
    Grove/KAI switches stay off: the lab runs without them (seed notes, FIELD-NOTES).
    """
    off = {"install": False, "enabled": False}
    ours = {"global": {"grove": dict(off), "kai-scheduler": dict(off)}}
    return _merge(platform.values, ours)


def release_settings(platform: Platform) -> dict[str, Any]:
    return {
        "name": platform.release_name,
        "chart": platform.chart,
        "version": platform.version,
        "repository": platform.chart_repo,
        "namespace": platform.namespace,
        "timeout": platform.timeout_seconds,
    }
