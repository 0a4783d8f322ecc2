"""Every preflight check of a stack against a cluster, as one Report: where the stack's pods land
and whether they fit (fit.py), what is already installed there (ownership.py), whether the model
cache claim's StorageClass is there (storage.py), and whether the cluster's DNS is where the graph's
NetworkPolicies let its pods reach it (network.py). Pure: the cluster comes in as data."""

from __future__ import annotations

from dynamo_lab.preflight import fit, network, ownership, storage
from dynamo_lab.preflight.cluster_data import ClusterData
from dynamo_lab.preflight.pods import plan_pods
from dynamo_lab.preflight.report import Report
from infra.plan import Stack, plan


def check(stack: Stack, data: ClusterData) -> Report:
    report = Report(stack=stack.name, source=data.source, server_version=data.server_version)
    fit.nodes_and_classes(stack.resolved, stack.sizing, data, plan_pods(plan(stack)), report)
    ownership.cluster_checks(stack.config, stack.name, data, report)
    storage.storage_class_check(stack.resolved, data, report)
    network.network_checks(stack.config, data, report)
    return report
