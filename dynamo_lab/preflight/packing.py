"""Where kube-scheduler puts a stack's worker pods, node by node, and which stay Pending and why: the
one placement decision (infra/placement/decide.py) on the cluster's real nodes.

This module is the decision's Kubernetes adapter. It reads what the scheduler reads (k8s.io/kubernetes
v1.34.4, pkg/scheduler) into the decision's terms, and words the decision back as the scheduler does:
- a node: its allocatable, what pods bound there before request (`booked`), cordoned or tainted with
  a NoSchedule or NoExecute taint (dynamo-lab sets no tolerations), its hostname label (the spread
  rules' topology key, infra/manifests/graph.py spread_rules) as its domain;
- a pod: its containers' requests, checked in NodeResourcesFit's order (cpu, memory, ephemeral
  storage, then the others by name), the nodes its required node affinity selects, and its group's
  spread from the pod template: a DoNotSchedule topology spread constraint on the hostname over its
  own group's pods (even, its maxSkew), or required anti-affinity against them (onePerNode); a rule
  of another shape is no pod the plan makes, and is refused;
- each node's reason, in the filter plugin's own words ("node(s) were unschedulable", "node(s) had
  untolerated taint(s)", "node(s) didn't match Pod's node affinity/selector", "Too many pods",
  "Insufficient nvidia.com/gpu", "node(s) didn't match pod topology spread constraints" and its
  "(missing required label)", "node(s) didn't match pod anti-affinity rules"), and a pod no node
  takes stays Pending with the scheduler's message, "0/N nodes are available: " and each reason with
  how many nodes gave it, sorted as strings (framework/types.go FitError.Error).

Order, filters and score are the decision's (its docstring); nodes of equal score are taken by name,
where the scheduler takes one at random.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from dynamo_lab.preflight import selectors
from dynamo_lab.preflight.cluster_data import Node
from dynamo_lab.preflight.pods import PodGroup
from infra.manifests.graph import HOSTNAME
from infra.placement import decide
from infra.placement.decide import BASIC, Spread

UNSCHEDULABLE = "node(s) were unschedulable"
TAINTED = "node(s) had untolerated taint(s)"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"


@dataclass(frozen=True)
class GroupPod:
    name: str  # "<group>-<i>", as the report names it
    group: PodGroup

    @property
    def requests(self) -> dict[str, Fraction]:
        return self.group.requests


@dataclass
class Packing:
    placed: dict[str, list[GroupPod]] = field(default_factory=dict)  # node -> its pods, in placement order
    pending: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's message
    order: list[GroupPod] = field(default_factory=list)  # every pod, in the order it was placed (or not)

    def node_of(self, pod: str) -> Optional[str]:
        return next((n for n, pods in self.placed.items() if any(p.name == pod for p in pods)), None)

    def count(self, node: str, group: str) -> int:
        return sum(p.group.name == group for p in self.placed.get(node, []))


def affine(pod: GroupPod, node: Node) -> bool:
    return pod.group.affinity is None or selectors.term_matches(pod.group.affinity, node.labels)


def _selects_own(term: dict[str, Any], group: PodGroup) -> bool:
    """Whether a spread rule's term counts the group's own pods on the hostname, as the plan writes it."""
    return (term.get("topologyKey") == HOSTNAME and set((term.get("labelSelector") or {})) == {"matchLabels"}
            and term["labelSelector"]["matchLabels"] == group.labels and bool(group.labels))


def _spread(group: PodGroup) -> tuple[Spread, int]:
    """The group's spread, read from its pod template (this module's docstring)."""
    constraints = [c for c in group.spread if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]
    rules = [("even", c) for c in constraints] + [("onePerNode", t) for t in group.anti_affinity]
    if not rules:
        return "none", 1
    if len(rules) == 1 and _selects_own(rules[0][1], group):
        kind, rule = rules[0]
        return kind, int(rule.get("maxSkew", 1))
    raise ValueError(f"{group.name}: a spread the plan does not write ({rules}); the placement decision "
                     "knows one rule on the hostname over the group's own pods")


def _asks(group: PodGroup) -> dict[str, Fraction]:
    """The pod's requests in the order NodeResourcesFit checks them."""
    order = [r for r in BASIC if r in group.requests] + sorted(r for r in group.requests if r not in BASIC)
    return {r: group.requests[r] for r in order}


def _decision_pods(groups: list[PodGroup], nodes: list[Node]) -> dict[str, tuple[GroupPod, decide.Pod]]:
    out = {}
    for g in groups:
        spread, skew = _spread(g)
        hosts = frozenset(n.name for n in nodes if affine(GroupPod(g.name, g), n))
        for i in range(g.replicas):
            pod = GroupPod(f"{g.name}-{i}", g)
            out[pod.name] = (pod, decide.Pod(pod.name, g.name, _asks(g), hosts, spread, skew))
    return out


def pods(groups: list[PodGroup]) -> list[GroupPod]:
    """Each group's pods in the order the decision places them (decide.in_order): groups largest
    request first (the plan's order among equals), each group's pods together."""
    made = _decision_pods(groups, [])
    return [made[p.name][0] for p in decide.in_order([m for _, m in made.values()])]


def _host(node: Node, booked: dict[str, Fraction]) -> decide.Host:
    closed = "unschedulable" if node.unschedulable else "tainted" if node.taints else None
    return decide.Host(node.name, node.allocatable, booked, closed, node.labels.get(HOSTNAME))


WORDS = {"closed": {"unschedulable": UNSCHEDULABLE, "tainted": TAINTED}, "not selected": NODE_AFFINITY,
         "no domain": SPREAD_LABEL, "spread": SPREAD, "one per node": ANTI_AFFINITY}


def _words(why: decide.Why) -> str:
    """One reason of the decision in the scheduler's words."""
    if why.check == "short":
        return "Too many pods" if why.detail == decide.POD_COUNT else f"Insufficient {why.detail}"
    words = WORDS[why.check]
    return words[why.detail] if isinstance(words, dict) else words


def pack(nodes: list[Node], groups: list[PodGroup],
         booked: Optional[dict[str, dict[str, Fraction]]] = None) -> Packing:
    """Place every pod of `groups` on `nodes` as the scheduler would (the module's docstring);
    `booked`: requests already on a node (pods bound there before these)."""
    made = _decision_pods(groups, nodes)
    hosts = sorted((_host(n, (booked or {}).get(n.name, {})) for n in nodes), key=lambda h: h.name)
    decision = decide.place(hosts, [m for _, m in made.values()])
    packing = Packing(placed={n.name: [made[p.name][0] for p in decision.placed[n.name]] for n in nodes},
                      order=[made[p.name][0] for p in decision.order])
    for pod, reasons in decision.pending.items():
        counts = Counter(_words(why) for whys in reasons.values() for why in whys)
        packing.pending[pod] = (f"0/{len(nodes)} nodes are available: "
                                + ", ".join(sorted(f"{k} {r}" for r, k in counts.items())) + ".")
    return packing
