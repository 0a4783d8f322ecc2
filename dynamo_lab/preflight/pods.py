"""What a stack places in the cluster, per pod: read from the stack's plan (infra/plan.py), the one
`pulumi up` registers, so preflight counts exactly the requests and node affinity it deploys.

Counted: the frontend and every worker group (the DynamoGraphDeployment's components), and the
probe and benchmark Jobs when the stack enables them. A pod requests the sum of its containers'
requests (none of these pods has init containers). Sidecars the Dynamo operator might add are not
in the manifests and not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, Optional

from infra.manifests import graph
from infra.plan import StackPlan
from infra.units import parse_quantity


@dataclass(frozen=True)
class PodGroup:
    name: str  # as the report shows it: "decode", "frontend", "probe target Job"
    kind: Literal["worker", "frontend", "job"]
    replicas: int
    requests: dict[str, Fraction]  # per pod
    # The required node affinity's matchExpressions; None: no affinity, any node.
    affinity: Optional[list[dict[str, Any]]]
    gpu_class: Optional[str] = None  # the GPU class whose node selector places it
    # What else the scheduler reads off the pod template (a worker group's `spread`,
    # infra/manifests/graph.py spread_rules): its labels, its topology spread constraints and its
    # required pod anti-affinity terms.
    labels: dict[str, str] = field(default_factory=dict)
    spread: list[dict[str, Any]] = field(default_factory=list)
    anti_affinity: list[dict[str, Any]] = field(default_factory=list)


def expressions(pod_spec: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return None
    (term,) = required["nodeSelectorTerms"]  # graph.node_affinity builds one term
    return term["matchExpressions"]


def anti_affinity(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list((((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or [])


def _requests(pod_spec: dict[str, Any]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for container in pod_spec["containers"]:
        for resource, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            total[resource] = total.get(resource, Fraction(0)) + parse_quantity(quantity)
    return total


def plan_pods(planned: StackPlan) -> list[PodGroup]:
    """Every pod the stack's plan creates that runs beside the workers (replicas > 0 only): the graph's
    components, and the Jobs the plan titles (the probe and benchmark Jobs). The pre-pull Jobs finish
    before any worker starts, so they are not counted."""
    cfg = planned.stack.config
    classes = {g.name: g.gpu_class for g in cfg.workers}
    selectors = {name: graph.match_expressions(c.node_selector) for name, c in cfg.gpu_classes.items()}
    out = []
    for dgd in planned.of_kind(graph.KIND):
        for component in dgd.manifest["spec"]["components"]:
            if component["replicas"] <= 0:
                continue
            pod = component["podTemplate"]["spec"]
            kind = "frontend" if component["type"] == "frontend" else "worker"
            labels = dict((component["podTemplate"].get("metadata") or {}).get("labels") or {})
            out.append(PodGroup(component["name"], kind, component["replicas"], _requests(pod), expressions(pod),
                                classes.get(component["name"]), labels,
                                list(pod.get("topologySpreadConstraints") or []), anti_affinity(pod)))
    for job in planned.of_kind("Job"):
        if job.title is None:
            continue
        pod = job.manifest["spec"]["template"]["spec"]
        affinity = expressions(pod)
        # A Job placed like a worker group (the probe's) counts on that group's GPU class's node.
        gpu_class = next((name for name, sel in selectors.items() if affinity is not None and sel == affinity), None)
        out.append(PodGroup(job.title, "job", 1, _requests(pod), affinity, gpu_class))
    return out
