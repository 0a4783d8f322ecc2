"""The Pulumi program: load config, size, build components, return the stack outputs."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from infra import bench_spec, graph_spec, probe_spec
from infra.components.benchmark import BenchmarkJob, BenchmarkJobArgs
from infra.components.graph import ServingGraph, ServingGraphArgs
from infra.components.platform import DynamoPlatform
from infra.components.probe import TransferProbe, TransferProbeArgs
from infra.config import PROJECT, StackConfig, load
from infra.sizing import Report, size


def raw_config() -> dict[str, str]:
    """Every `dynamo-lab:*` key Pulumi passed in, so unknown keys can be rejected, not ignored."""
    values = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    return {k: v for k, v in values.items() if k.startswith(PROJECT + ":")}


def stack_outputs(cfg: StackConfig, stack: str, report: Report) -> dict[str, Any]:
    return {
        "graphNamespace": cfg.graph.namespace,
        "graphName": cfg.graph.name,
        "frontendUrl": graph_spec.frontend_url(cfg),
        "portForward": graph_spec.port_forward_command(cfg),
        "placement": graph_spec.placement(cfg),
        "sizing": report.as_dict(),
    }


def build() -> dict[str, Any]:
    """Register the stack's resources. Config and sizing errors raise before anything is registered."""
    stack = pulumi.get_stack()
    cfg = load(raw_config(), stack)
    report = size(cfg, stack)
    platform: list[pulumi.Resource] = []
    if cfg.platform.manage:
        platform.append(DynamoPlatform("platform", cfg.platform).release)
    graph = ServingGraph("graph", ServingGraphArgs(config=cfg, stack=stack, report=report, platform=platform))
    outputs = stack_outputs(cfg, stack, report)
    if cfg.probe.enabled:
        TransferProbe("probe", TransferProbeArgs(config=cfg, stack=stack,
                                                 bytes_per_transfer=report.kv_bytes_per_request,
                                                 depends_on=[graph.namespace]))
        outputs["probeLogs"] = probe_spec.logs_command(cfg, stack)
    if cfg.benchmark.enabled:
        BenchmarkJob("bench", BenchmarkJobArgs(config=cfg, stack=stack, depends_on=[graph.deployment]))
        outputs["benchLogs"] = bench_spec.logs_command(cfg, stack)
    return outputs


def pulumi_main() -> None:
    """Entry under the Pulumi CLI: a bad stack file stops preview/up with the message, no traceback."""
    from infra.config import ConfigError

    try:
        outputs = build()
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
    for key, value in outputs.items():
        pulumi.export(key, value)
