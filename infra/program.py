"""The Pulumi program: load and size the stack, plan it, register the plan, return the outputs."""

from __future__ import annotations

import os
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import pulumi_runtime
from infra.components import deploy
from infra.config.schema import ClusterTarget
from infra.errors import UserError
from infra.plan import load_stack, plan


def cluster_provider(cluster: ClusterTarget) -> k8s.Provider:
    """The one Kubernetes provider every resource uses: the stack's named context, never kubectl's current one."""
    kubeconfig = os.path.expanduser(cluster.kubeconfig) if cluster.kubeconfig else None
    return k8s.Provider("cluster", context=cluster.context, kubeconfig=kubeconfig)


def build() -> dict[str, Any]:
    """Register the stack's resources. Config and sizing errors raise before anything is registered."""
    raw = pulumi_runtime.raw_config()
    stack = load_stack(pulumi.get_stack(), raw, secret_keys=[key for key in raw if pulumi_runtime.is_secret(key)])
    planned = plan(stack)
    deploy(planned, cluster_provider(stack.config.target))
    return planned.outputs


def pulumi_main() -> None:
    """Entry under the Pulumi CLI: a bad stack file stops preview/up with the message, no traceback."""
    try:
        outputs = build()
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None
    for key, value in outputs.items():
        pulumi.export(key, value)
