"""DynamoPlatform: the operator's namespace and the dynamo-platform Helm release."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.config import Platform
from infra.platform_spec import chart_values, release_settings


class DynamoPlatform(pulumi.ComponentResource):
    """Installs the Dynamo operator cluster-wide with Grove and KAI off.

    helm.v3.Release (real Helm) rather than helm.v4.Chart: the chart uses hooks and `lookup`,
    which Chart drops or renders empty (FIELD-NOTES). Helm waits for readiness, so `release`
    resolves only once the operator is Ready, has applied the CRDs and serves its webhooks.
    """

    def __init__(self, name: str, args: Platform, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:DynamoPlatform", name, None, opts)
        rel = release_settings(args)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=rel["namespace"]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=rel["name"],
                chart=rel["chart"],
                version=rel["version"],
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=rel["repository"]),
                namespace=self.namespace.metadata.name,
                values=chart_values(args),
                timeout=rel["timeout"],
                skip_await=False,
                wait_for_jobs=True,
                cleanup_on_fail=True,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"namespace": self.namespace.metadata.name,
                               "releaseStatus": self.release.status})
