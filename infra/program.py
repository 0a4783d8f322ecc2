"""The Pulumi program: load the stack's config, size it, build the components, return the outputs."""

from __future__ import annotations

import os
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import pulumi_runtime
from infra.components.benchmark_job import BenchmarkJob, BenchmarkJobArgs
from infra.components.dynamo_platform import DynamoPlatform
from infra.components.model_cache import ModelCacheArgs
from infra.components.serving_graph import ServingGraph, ServingGraphArgs
from infra.components.transfer_probe import TransferProbe, TransferProbeArgs
from infra.config import StackConfig, load
from infra.config.models import ClusterTarget
from infra.errors import UserError
from infra.manifests import (
    benchmark,
    graph,
    model_cache,
    model_pull,
    owner_labels,
    platform,
    security,
    transfer_probe,
)
from infra.sizing import StackSizing, size


def stack_outputs(cfg: StackConfig, sizing: StackSizing) -> dict[str, Any]:
    return {
        "graphNamespace": cfg.graph.namespace,
        "graphName": cfg.graph.name,
        "cluster": cfg.cluster.context,
        "frontendUrl": graph.frontend_url(cfg),
        "portForward": graph.port_forward_command(cfg),
        "placement": graph.placement(cfg),
        "sizing": sizing.as_dict(),
    }


def cluster_provider(cluster: ClusterTarget) -> k8s.Provider:
    """The one Kubernetes provider every resource uses: the stack's named context, never kubectl's current one."""
    kubeconfig = os.path.expanduser(cluster.kubeconfig) if cluster.kubeconfig else None
    return k8s.Provider("cluster", context=cluster.context, kubeconfig=kubeconfig)


def build() -> dict[str, Any]:
    """Register the stack's resources. Config and sizing errors raise before anything is registered."""
    stack = pulumi.get_stack()
    raw = pulumi_runtime.raw_config()
    cfg = load(raw, stack, secret_keys=[key for key in raw if pulumi_runtime.is_secret(key)])
    sizing = size(cfg, stack)
    on_cluster = pulumi.ResourceOptions(providers=[cluster_provider(cfg.cluster)])

    def opts(*after: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=list(after)))

    waits_for_platform: list[pulumi.Resource] = []
    if cfg.platform.manage:
        # The operator's pods are the chart's; baseline is enforced there (restricted only warned):
        # the chart's pods have not been checked against restricted.
        spec = platform.release(cfg.platform, {**owner_labels(stack), **security.namespace_labels("baseline")})
        waits_for_platform.append(DynamoPlatform("platform", spec, opts()).release)
    token = cfg.hf_token.get_secret_value() if cfg.hf_token is not None else None
    claim, pulls = model_cache.claim(cfg), model_pull.jobs(cfg)
    cache = ModelCacheArgs(claim=claim, jobs=pulls) if claim or pulls else None
    graph_ns_labels = {**owner_labels(stack), **security.namespace_labels(security.pod_security_level(cfg))}
    serving = ServingGraph("graph", ServingGraphArgs(deployment=graph.deployment(cfg, sizing), hf_token=token,
                                                     model_cache=cache, namespace_labels=graph_ns_labels,
                                                     network_policies=graph.network_policies(cfg)),
                           opts(*waits_for_platform))
    outputs = stack_outputs(cfg, sizing)
    if pulls:
        outputs["modelPullJobs"] = [j["metadata"]["name"] for j in pulls.values()]
    if cfg.probe.enabled:
        m = transfer_probe.manifests(cfg, sizing)
        TransferProbe("probe", TransferProbeArgs(**m), opts(serving.namespace))
        outputs["probeLogs"] = transfer_probe.logs_command(cfg, m["initiator"]["metadata"]["name"])
    if cfg.benchmark.enabled:
        m = benchmark.manifests(cfg, stack)
        BenchmarkJob("bench", BenchmarkJobArgs(**m), opts(serving.deployment))
        outputs["benchJob"] = m["job"]["metadata"]["name"]
        outputs["benchLogs"] = benchmark.logs_command(cfg, outputs["benchJob"])
    return outputs


def pulumi_main() -> None:
    """Entry under the Pulumi CLI: a bad stack file stops preview/up with the message, no traceback."""
    try:
        outputs = build()
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None
    for key, value in outputs.items():
        pulumi.export(key, value)
