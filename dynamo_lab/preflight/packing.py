"""Where kube-scheduler puts a stack's worker pods, node by node, and which stay Pending and why.

Pure: the nodes and the pods come in as data. Each pod is placed as kube-scheduler 1.34's default
profile places it (k8s.io/kubernetes v1.34.4, pkg/scheduler), one at a time, against the pods
placed before it. A node is feasible when it passes these Filter plugins, in the profile's order
(apis/config/v1/default_plugins.go); the first that fails names the node's reason, in the
plugin's own words:

- NodeUnschedulable: a cordoned node ("node(s) were unschedulable").
- TaintToleration: a NoSchedule or NoExecute taint; dynamo-lab sets no tolerations
  ("node(s) had untolerated taint(s)").
- NodeAffinity: the pod's required node affinity ("node(s) didn't match Pod's node affinity/selector").
- NodeResourcesFit: the pod count, cpu, memory and every extended resource the pod requests (GPUs,
  the RDMA device) against allocatable less what the pods placed there request; one reason per
  short resource ("Too many pods", "Insufficient nvidia.com/gpu").
- PodTopologySpread, whenUnsatisfiable DoNotSchedule: a node lacking the topology key is out;
  else matching pods in its domain + 1 - the fewest in any domain <= maxSkew. The domains are
  those of the nodes the pod's node affinity selects (nodeAffinityPolicy Honor, the default),
  tainted and cordoned ones included (nodeTaintsPolicy Ignore, the default): a cordoned node of
  the class holds the minimum at what it has ("node(s) didn't match pod topology spread
  constraints"; filtering.go calPreFilterState and Filter).
- InterPodAffinity, required anti-affinity: no pod its terms select in the node's domain ("node(s)
  didn't match pod anti-affinity rules"), and no placed pod whose own terms select it there
  ("node(s) didn't satisfy existing pods anti-affinity rules").

A pod no node passes stays Pending with the scheduler's message, "0/N nodes are available: " and
each reason with how many nodes gave it, sorted as strings (framework/types.go FitError.Error).

Among feasible nodes the scheduler takes the best score, ties at random. Preflight's simple stand-in
for the scores that differ between our pods' nodes: fewest pods of the pod's own spread selector in
the node's domain (PodTopologySpread's score, weight 2), then least allocated (NodeResourcesFit's
LeastAllocated: the mean of the cpu and memory fractions requested once the pod is there), then the
node's name. Where spread rules fix the count per node, the scheduler's choice agrees with this one;
without them (spread none) it may differ, and only what must hold is certain (the cluster tier).

Order: the scheduler takes pods as they are created (its queue is FIFO at one priority). Preflight
takes the worker groups largest request first (extended resources, then memory, then cpu; the
plan's order among equals), all pods of a group together; the cluster tier creates them so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from dynamo_lab.preflight import selectors
from dynamo_lab.preflight.cluster_data import Node
from dynamo_lab.preflight.workloads import PodGroup

UNSCHEDULABLE = "node(s) were unschedulable"
TAINTED = "node(s) had untolerated taint(s)"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
BASIC = ("cpu", "memory", "ephemeral-storage")  # NodeResourcesFit checks these first, then the others


@dataclass(frozen=True)
class Pod:
    name: str  # "<group>-<i>", as the report names it
    group: PodGroup

    @property
    def requests(self) -> dict[str, Fraction]:
        return self.group.requests


@dataclass
class Packing:
    placed: dict[str, list[Pod]] = field(default_factory=dict)  # node -> its pods, in placement order
    pending: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's message
    order: list[Pod] = field(default_factory=list)  # every pod, in the order it was placed (or not)

    def node_of(self, pod: str) -> Optional[str]:
        return next((n for n, pods in self.placed.items() if any(p.name == pod for p in pods)), None)

    def count(self, node: str, group: str) -> int:
        return sum(p.group.name == group for p in self.placed.get(node, []))


def _size(g: PodGroup) -> tuple:
    extended = sum(q for r, q in g.requests.items() if r not in BASIC)
    return (-extended, -g.requests.get("memory", 0), -g.requests.get("cpu", 0))


def pods(groups: list[PodGroup]) -> list[Pod]:
    """Each group's pods in packing order: groups largest request first (sorted is stable, so the
    plan's order among equals), each group's pods together."""
    return [Pod(f"{g.name}-{i}", g) for g in sorted(groups, key=_size) for i in range(g.replicas)]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions, ANDed (an empty one selects all)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(selectors.matches(e, labels) for e in selector.get("matchExpressions") or [])


def affine(pod: Pod, node: Node) -> bool:
    return pod.group.affinity is None or selectors.term_matches(pod.group.affinity, node.labels)


class _Scheduler:
    def __init__(self, nodes: list[Node], booked: Optional[dict[str, dict[str, Fraction]]] = None):
        self.nodes = nodes
        self.packing = Packing(placed={n.name: [] for n in nodes})
        self.used: dict[str, dict[str, Fraction]] = {n.name: defaultdict(Fraction, (booked or {}).get(n.name, {}))
                                                      for n in nodes}
        self.pod_count: Counter = Counter()

    def _fit(self, pod: Pod, node: Node) -> list[str]:
        short = []
        allowed = node.allocatable.get("pods")
        if allowed is not None and self.pod_count[node.name] + 1 > allowed:
            short.append("Too many pods")
        order = [r for r in BASIC if r in pod.requests] + sorted(r for r in pod.requests if r not in BASIC)
        for r in order:
            want = pod.requests[r]
            if want > 0 and want > node.allocatable.get(r, Fraction(0)) - self.used[node.name][r]:
                short.append(f"Insufficient {r}")
        return short

    def _in_domain(self, node: Node, key: str, selector: dict, domain_nodes: list[Node]) -> dict[str, int]:
        """Pods the selector matches per value of `key`, over `domain_nodes`."""
        counts: dict[str, int] = defaultdict(int)
        for n in domain_nodes:
            if key in n.labels:
                counts[n.labels[key]] += sum(_selects(selector, p.group.labels) for p in self.packing.placed[n.name])
        return counts

    def _spread(self, pod: Pod, node: Node) -> Optional[str]:
        constraints = [c for c in pod.group.spread if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]
        # nodeAffinityPolicy Honor: only the nodes the pod's node affinity selects are domains.
        domain_nodes = [n for n in self.nodes if affine(pod, n)]
        for c in constraints:
            key = c["topologyKey"]
            if key not in node.labels:
                return SPREAD_LABEL
            counts = self._in_domain(node, key, c.get("labelSelector") or {}, domain_nodes)
            fewest = min(counts.values()) if counts else 0
            mine = 1 if _selects(c.get("labelSelector") or {}, pod.group.labels) else 0
            if counts.get(node.labels[key], 0) + mine - fewest > int(c.get("maxSkew", 1)):
                return SPREAD
        return None

    def _anti(self, pod: Pod, node: Node) -> Optional[str]:
        for term in pod.group.anti_affinity:
            key = term["topologyKey"]
            if key in node.labels and any(
                    n.labels.get(key) == node.labels[key] and _selects(term.get("labelSelector") or {}, p.group.labels)
                    for n in self.nodes for p in self.packing.placed[n.name]):
                return ANTI_AFFINITY
        for n in self.nodes:
            for p in self.packing.placed[n.name]:
                for term in p.group.anti_affinity:
                    key = term["topologyKey"]
                    if (key in node.labels and n.labels.get(key) == node.labels[key]
                            and _selects(term.get("labelSelector") or {}, pod.group.labels)):
                        return EXISTING_ANTI_AFFINITY
        return None

    def reasons(self, pod: Pod, node: Node) -> list[str]:
        """Why `node` cannot take `pod` now (the first failing filter's reasons); [] where it can."""
        if node.unschedulable:
            return [UNSCHEDULABLE]
        if node.taints:
            return [TAINTED]
        if not affine(pod, node):
            return [NODE_AFFINITY]
        short = self._fit(pod, node)
        if short:
            return short
        why = self._spread(pod, node) or self._anti(pod, node)
        return [why] if why else []

    def _score(self, pod: Pod, node: Node) -> tuple:
        same = sum(_selects(c.get("labelSelector") or {}, p.group.labels)
                   for c in pod.group.spread for p in self.packing.placed[node.name])
        fractions = [(self.used[node.name][r] + pod.requests.get(r, 0)) / node.allocatable[r]
                     for r in ("cpu", "memory") if node.allocatable.get(r)]
        allocated = sum(fractions) / len(fractions) if fractions else 0
        return (same, allocated, node.name)

    def place(self, pod: Pod) -> None:
        self.packing.order.append(pod)
        why = {n.name: self.reasons(pod, n) for n in self.nodes}
        feasible = [n for n in self.nodes if not why[n.name]]
        if not feasible:
            counts = Counter(r for rs in why.values() for r in rs)
            self.packing.pending[pod.name] = (f"0/{len(self.nodes)} nodes are available: "
                                              + ", ".join(sorted(f"{k} {r}" for r, k in counts.items())) + ".")
            return
        best = min(feasible, key=lambda n: self._score(pod, n))
        self.packing.placed[best.name].append(pod)
        self.pod_count[best.name] += 1
        for r, q in pod.requests.items():
            self.used[best.name][r] += q


def pack(nodes: list[Node], groups: list[PodGroup],
         booked: Optional[dict[str, dict[str, Fraction]]] = None) -> Packing:
    """Place every pod of `groups` on `nodes` as the scheduler would (the module's docstring);
    `booked`: requests already on a node (pods bound there before these)."""
    scheduler = _Scheduler(nodes, booked)
    for pod in pods(groups):
        scheduler.place(pod)
    return scheduler.packing
