"""`platform`: the Dynamo platform chart, and the chart keys Dynamo removed."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from infra.catalogue import DYNAMO_RELEASE
from infra.config.base import Section
from infra.config.fields import DnsLabel, ExactRelease

# Top-level chart keys that Dynamo 1.4+ removed; setting them makes the chart fail (docs/sources.md).
REMOVED_CHART_KEYS = {
    "grove": "global.grove.install / global.grove.enabled",
    "nats": "global.nats.install",
    "etcd": "global.etcd.install",
    "kai-scheduler": "global.kai-scheduler.install / global.kai-scheduler.enabled",
}


class Platform(Section):
    manage: bool = Field(True, description="install the Dynamo platform chart in this stack")
    chart: str = Field("dynamo-platform", description="the platform chart's name",
                       json_schema_extra={"accepts": "a chart name"})
    chart_repo: str = Field("https://helm.ngc.nvidia.com/nvidia/ai-dynamo", description="the chart's repository",
                            json_schema_extra={"accepts": "an `https://` or `oci://` URL"})
    # One exact release: a range would let Helm install whatever is newest.
    version: ExactRelease = Field(DYNAMO_RELEASE, description="the chart version", json_schema_extra={
        "accepts": f"one exact release (`{DYNAMO_RELEASE}`); ranges such as `1.6`, `^1.6.2`, `>=1.6.0` are refused"})
    namespace: DnsLabel = Field("dynamo-system", description="the namespace the platform is installed in")
    # Helm release names are DNS labels of at most 53 characters.
    release_name: DnsLabel = Field("dynamo-platform", max_length=53, description="the Helm release's name")
    timeout_seconds: int = Field(900, gt=0, description="how long Helm waits for the platform to be ready")
    values: dict[str, Any] = Field({}, description="extra chart values (Grove and KAI stay off; the removed "
                                   "top-level `grove.enabled`, `nats.enabled`, `etcd.enabled`, "
                                   "`kai-scheduler.enabled` are refused)", json_schema_extra={"accepts": "a map"})

    @field_validator("chart_repo")
    @classmethod
    def _repository_url(cls, url: str) -> str:
        if not re.match(r"^(https?|oci)://[^\s/]+", url):
            raise ValueError(f"{url!r} is not a chart repository URL; write e.g. "
                             "https://helm.ngc.nvidia.com/nvidia/ai-dynamo")
        return url

    @field_validator("values")
    @classmethod
    def _no_removed_keys(cls, values: dict[str, Any]) -> dict[str, Any]:
        for key, replacement in REMOVED_CHART_KEYS.items():
            if isinstance(values.get(key), dict) and "enabled" in values[key]:
                raise ValueError(
                    f"`{key}.enabled` was removed from the dynamo-platform chart and makes it fail; "
                    f"use {replacement} instead"
                )
        return values
