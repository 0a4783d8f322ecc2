"""What a stack places in the cluster, per pod: read from the manifests the program itself builds
(infra/manifests), so preflight counts exactly the requests and node affinity `pulumi up` deploys.

Counted: the frontend and every worker group (the DynamoGraphDeployment's components), and the
probe and benchmark Jobs when the stack enables them. A pod requests the sum of its containers'
requests (none of these pods has init containers). Sidecars the Dynamo operator might add are not
in the manifests and not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from infra.config.models import StackConfig
from infra.manifests import benchmark, graph, transfer_probe
from infra.sizing import StackSizing
from infra.units import parse_quantity


@dataclass(frozen=True)
class Workload:
    name: str  # as the report shows it: "decode", "frontend", "probe target Job"
    kind: str  # "worker", "frontend" or "job"
    replicas: int
    requests: dict[str, Fraction]  # per pod
    # The required node affinity's matchExpressions; None: no affinity, any node.
    affinity: Optional[list[dict[str, Any]]]
    gpu_class: Optional[str] = None  # the GPU class whose node selector places it


def expressions(pod_spec: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return None
    (term,) = required["nodeSelectorTerms"]  # graph.node_affinity builds one term
    return term["matchExpressions"]


def _requests(pod_spec: dict[str, Any]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for container in pod_spec["containers"]:
        for resource, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            total[resource] = total.get(resource, Fraction(0)) + parse_quantity(quantity)
    return total


def _job(name: str, job: dict[str, Any], gpu_class: Optional[str] = None) -> Workload:
    pod = job["spec"]["template"]["spec"]
    return Workload(name, "job", 1, _requests(pod), expressions(pod), gpu_class)


def workloads(cfg: StackConfig, sizing: StackSizing, stack: str) -> list[Workload]:
    """Every pod the stack creates, grouped as the manifests declare them (replicas > 0 only)."""
    classes = {g.name: g.gpu_class for g in cfg.workers}
    out = []
    for component in graph.deployment(cfg, sizing)["spec"]["components"]:
        if component["replicas"] <= 0:
            continue
        pod = component["podTemplate"]["spec"]
        kind = "frontend" if component["type"] == "frontend" else "worker"
        out.append(Workload(component["name"], kind, component["replicas"], _requests(pod), expressions(pod),
                            classes.get(component["name"])))
    if cfg.probe.enabled:
        probe = transfer_probe.manifests(cfg, sizing)
        plan = transfer_probe.stack_plan(cfg, sizing)
        src, dst = transfer_probe.groups(cfg)
        side_group = {"source": src, "destination": dst}
        out += [_job("probe target Job", probe["target"], side_group[plan.target].gpu_class),
                _job("probe initiator Job", probe["initiator"], side_group[plan.initiator].gpu_class)]
    if cfg.benchmark.enabled:
        out.append(_job("benchmark Job", benchmark.manifests(cfg, stack)["job"]))
    return out
