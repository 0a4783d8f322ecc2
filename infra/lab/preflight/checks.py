"""Every preflight check of a stack against a cluster, as one Report: where the stack's pods land
and whether they fit (fit.py), and what is already installed there (ownership.py). Pure: the
cluster comes in as data."""

from __future__ import annotations

from infra.config.models import StackConfig
from infra.lab.preflight import fit, ownership
from infra.lab.preflight.cluster_data import ClusterData
from infra.lab.preflight.report import Report
from infra.lab.preflight.workloads import workloads
from infra.sizing import StackSizing


def check(cfg: StackConfig, sizing: StackSizing, stack: str, data: ClusterData) -> Report:
    report = Report(stack=stack, source=data.source, server_version=data.server_version)
    fit.nodes_and_classes(cfg, sizing, data, workloads(cfg, sizing, stack), report)
    ownership.cluster_checks(cfg, stack, data, report)
    return report
