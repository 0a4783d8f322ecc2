"""With graph.networkPolicy: whether the cluster's DNS runs where the graph's policies let its pods
look names up (kube-system's `k8s-app: kube-dns` pods, infra.manifests.graph.DNS_PEER). The API
server's addresses (graph.apiServerCidrs) are not among what preflight reads: it says so in a note."""

from __future__ import annotations

from typing import Any

from dynamo_lab.preflight.cluster_data import ClusterData
from dynamo_lab.preflight.report import Check, Problem, Report
from infra.config.schema import StackConfig
from infra.manifests.graph import DNS_PEER

DNS_NAMESPACE = DNS_PEER["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
DNS_LABELS = DNS_PEER["podSelector"]["matchLabels"]


def _pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    template = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return template.get("labels") or {}


def network_checks(cfg: StackConfig, data: ClusterData, report: Report) -> None:
    if not cfg.graph.network_policy:
        return
    labels = ",".join(f"{k}={v}" for k, v in DNS_LABELS.items())
    dns = [d["metadata"]["name"] for d in data.deployments
           if (d.get("metadata") or {}).get("namespace") == DNS_NAMESPACE
           and all(_pod_labels(d).get(k) == v for k, v in DNS_LABELS.items())]
    if dns:
        report.checks.append(Check("network policy: dns", True, f"{DNS_NAMESPACE}/{', '.join(dns)} runs pods labelled "
                                   f"{labels}, the DNS the graph's policies let every pod reach"))
    else:
        report.problems.append(Problem(
            "graph.networkPolicy", "network policy: dns",
            f"no Deployment in {DNS_NAMESPACE} runs pods labelled {labels}, the only DNS the graph's policies let "
            "its pods reach (UDP and TCP 53): every name lookup, the Services' and the Hub's, would time out",
            f"find the cluster's DNS pods (`kubectl get pods -A -l {labels}`, or the DNS Service's selector) and "
            "label them so, or set graph.networkPolicy: false"))
    report.notes.append(
        "graph.networkPolicy: the frontend and workers reach the API server only at graph.apiServerCidrs "
        f"({', '.join(cfg.graph.api_server_cidrs)}), on 443 and 6443; preflight does not read its addresses: check "
        "`kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes` lies within them")
