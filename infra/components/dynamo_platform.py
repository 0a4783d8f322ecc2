"""DynamoPlatform: the operator's namespace and the dynamo-platform Helm release."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components import after
from infra.manifests.platform import ReleaseSpec


class DynamoPlatform(pulumi.ComponentResource):
    """Installs the Dynamo operator cluster-wide with Grove and KAI off.

    helm.v3.Release (real Helm) rather than helm.v4.Chart: the chart uses hooks and `lookup`,
    which Chart drops or renders empty (docs/sources.md). Helm waits for readiness, so `release`
    resolves only once the operator is Ready, has applied the CRDs and serves its webhooks.
    """

    def __init__(self, name: str, args: ReleaseSpec, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:DynamoPlatform", name, None, opts)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace, labels=args.namespace_labels or None),
            opts=after(self, opts))
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=args.name,
                chart=args.chart,
                version=args.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=args.repository),
                namespace=self.namespace.metadata.name,
                values=args.values,
                timeout=args.timeout_seconds,
                skip_await=False,
                wait_for_jobs=True,
                cleanup_on_fail=True,
            ),
            opts=after(self, opts),
        )
        self.register_outputs({"namespace": self.namespace.metadata.name,
                               "releaseStatus": self.release.status})
