"""Where pods land: the one placement decision, for the stack's nominal nodes and for a cluster's.

Pure: the hosts and the pods come in as data, and the decision is kube-scheduler 1.34's default
profile (k8s.io/kubernetes v1.34.4, pkg/scheduler) as far as dynamo-lab's pods exercise it. Two
callers feed it: `Placement` (this package's __init__) with the nodes a stack plans for each GPU
class (identical, named by the class), which the sizing, predict and advise read; and preflight
(dynamo_lab/preflight/packing.py) with a cluster's real nodes, read from Kubernetes objects (label
selectors, taints, cordons, allocatable) and worded back in the scheduler's own messages. The
cluster tier holds preflight's decisions to the real scheduler (tests/lab/cluster/test_packing_agrees.py).

Order: the scheduler takes pods as they are created (its queue is FIFO at one priority). The model
takes them largest ask first (the devices: every resource but cpu, memory and ephemeral storage;
then memory, then cpu; the given order among equals, so a group's pods stay together), and the
cluster tier creates them so. A nominal pod asks only what the stack states of a node (its GPUs),
so nominal pods of equal GPUs keep the stack's order.

Filters, for each pod against each host, in the default profile's order
(apis/config/v1/default_plugins.go); the first that fails is the host's reason (`Why`):
- closed: the host takes no pod at all (NodeUnschedulable, TaintToleration: a cordon or a NoSchedule
  or NoExecute taint; dynamo-lab sets no tolerations), in the caller's word (`Host.closed`);
- not selected: not among the pod's hosts (NodeAffinity: its GPU class's node selector);
- short: the host's pod count, then each resource the pod asks, in the order it asks them, against
  what the host offers less what is booked and placed there (NodeResourcesFit); a resource the host
  does not offer, it has none of; one reason per short resource;
- spread `even` (PodTopologySpread, maxSkew, DoNotSchedule): a host without a domain is out; else
  the pod's peers in the host's domain + 1 - the fewest in any domain of the pod's hosts (closed ones
  included: nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore, the defaults; filtering.go) must not
  exceed maxSkew;
- spread `onePerNode` (InterPodAffinity, required anti-affinity against its own group): no peer in
  the host's domain.

Score, among the hosts that pass (the scheduler takes the best, ties at random; the model's stand-in
for the scores that differ between dynamo-lab's hosts): fewest peers on the host for a spread `even`
pod (PodTopologySpread's score, weight 2), then least allocated (NodeResourcesFit's LeastAllocated:
the mean share of cpu and memory in use once the pod is there; a host that states neither, as a
nominal node does, by its pods, which is the same choice among identical pods), then the hosts'
order. Where a spread fixes the count per host the scheduler's choice agrees with this one; without
one it may differ, and only what must hold is certain.

What this answers, and what a new fact extends (say so in its docstring): where each pod lands and
why a pod lands nowhere. Per-role placement is pods with their own `hosts`; a same-node path is a
question about `Decision.host_of` two pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal, Optional

Spread = Literal["none", "even", "onePerNode"]

# The resources NodeResourcesFit checks first, and the ones it does not count as devices.
BASIC = ("cpu", "memory", "ephemeral-storage")
# What LeastAllocated weighs, each weight 1 (apis/config/v1/defaults.go, the default scoring strategy).
WEIGHED = ("cpu", "memory")
POD_COUNT = "pods"  # a host's allocatable count of pods; each pod takes one


@dataclass(frozen=True)
class Host:
    """A node the model places on."""

    name: str
    # What it offers. A resource it does not state it has none of; POD_COUNT absent: no limit.
    allocatable: Mapping[str, Fraction]
    booked: Mapping[str, Fraction] = field(default_factory=dict)  # asks of pods bound there before
    closed: Optional[str] = None  # why it takes no pod at all (cordoned, tainted): the caller's word
    domain: Optional[str] = None  # its spread domain (a node's hostname); None: it has none


@dataclass(frozen=True)
class Pod:
    """A pod to place."""

    name: str
    group: str  # its peers, for its spread: the pods of one group
    asks: Mapping[str, Fraction]  # what it requests of its host, in the order they are checked
    hosts: frozenset[str]  # the hosts it may land on (its node selector), closed ones too
    spread: Spread = "none"
    max_skew: int = 1


Check = Literal["closed", "not selected", "short", "no domain", "spread", "one per node"]


@dataclass(frozen=True)
class Why:
    """Why a host cannot take a pod now: the check that failed, and its detail (the short resource,
    or the caller's word for a closed host)."""

    check: Check
    detail: str = ""


@dataclass
class Decision:
    """Where each pod landed, and why the others landed nowhere."""

    placed: dict[str, list[Pod]]  # host -> its pods, in the order they landed
    pending: dict[str, dict[str, tuple[Why, ...]]]  # pod -> each host's reasons
    order: list[Pod]  # every pod, in the order it was placed (or not)

    def host_of(self, pod: str) -> Optional[str]:
        return next((h for h, pods in self.placed.items() if any(p.name == pod for p in pods)), None)


def _devices(asks: Mapping[str, Fraction]) -> Fraction:
    return sum((q for r, q in asks.items() if r not in BASIC), Fraction(0))


def in_order(pods: list[Pod]) -> list[Pod]:
    """The pods in the order the model places them: largest ask first (this module's docstring)."""
    return sorted(pods, key=lambda p: (-_devices(p.asks), -p.asks.get("memory", 0), -p.asks.get("cpu", 0)))


class _Cluster:
    def __init__(self, hosts: list[Host]):
        self.hosts = hosts
        self.decision = Decision(placed={h.name: [] for h in hosts}, pending={}, order=[])
        self.used = {h.name: dict(h.booked) for h in hosts}

    def _peers(self, pod: Pod, hosts: list[Host]) -> int:
        return sum(p.group == pod.group for h in hosts for p in self.decision.placed[h.name])

    def _short(self, pod: Pod, host: Host) -> list[Why]:
        short = []
        allowed = host.allocatable.get(POD_COUNT)
        if allowed is not None and len(self.decision.placed[host.name]) + 1 > allowed:
            short.append(Why("short", POD_COUNT))
        used = self.used[host.name]
        for r, want in pod.asks.items():
            if want > 0 and want > host.allocatable.get(r, Fraction(0)) - used.get(r, Fraction(0)):
                short.append(Why("short", r))
        return short

    def _spread(self, pod: Pod, host: Host) -> Optional[Why]:
        if pod.spread == "none":
            return None
        if host.domain is None:
            return Why("no domain") if pod.spread == "even" else None
        same = [h for h in self.hosts if h.domain == host.domain]
        if pod.spread == "onePerNode":
            return Why("one per node") if self._peers(pod, same) else None
        domains: dict[str, int] = {}
        for h in self.hosts:
            if h.name in pod.hosts and h.domain is not None:
                domains[h.domain] = domains.get(h.domain, 0) + self._peers(pod, [h])
        fewest = min(domains.values()) if domains else 0
        return Why("spread") if domains.get(host.domain, 0) + 1 - fewest > pod.max_skew else None

    def reasons(self, pod: Pod, host: Host) -> tuple[Why, ...]:
        """Why `host` cannot take `pod` now (the first failing filter's reasons); () where it can."""
        if host.closed is not None:
            return (Why("closed", host.closed),)
        if host.name not in pod.hosts:
            return (Why("not selected"),)
        short = self._short(pod, host)
        if short:
            return tuple(short)
        why = self._spread(pod, host)
        return (why,) if why else ()

    def _score(self, pod: Pod, host: Host) -> tuple:
        peers = self._peers(pod, [host]) if pod.spread == "even" else 0
        used = self.used[host.name]
        shares = [(used.get(r, Fraction(0)) + pod.asks.get(r, 0)) / host.allocatable[r]
                  for r in WEIGHED if host.allocatable.get(r)]
        load = sum(shares) / len(shares) if shares else len(self.decision.placed[host.name])
        return (peers, load)

    def place(self, pod: Pod) -> None:
        self.decision.order.append(pod)
        why = {h.name: self.reasons(pod, h) for h in self.hosts}
        feasible = [h for h in self.hosts if not why[h.name]]
        if not feasible:
            self.decision.pending[pod.name] = why
            return
        best = min(feasible, key=lambda h: self._score(pod, h))  # min keeps the first of equals
        self.decision.placed[best.name].append(pod)
        used = self.used[best.name]
        for r, q in pod.asks.items():
            used[r] = used.get(r, Fraction(0)) + q


def place(hosts: list[Host], pods: list[Pod]) -> Decision:
    """Place every pod on `hosts`, one at a time in the model's order (`in_order`), each against the
    pods placed before it (this module's docstring)."""
    cluster = _Cluster(hosts)
    for pod in in_order(pods):
        cluster.place(pod)
    return cluster.decision
