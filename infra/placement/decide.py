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
so nominal pods of equal GPUs keep the stack's order. A deploy does not fix the order: the Dynamo
operator creates each group's pods (a Deployment each) in no fixed order, so where pods of several
sizes share a class, the sizing asks also what the smallest first leaves Pending (`smaller_first`):
the scheduler spreads them (least allocated) and may leave no node a larger pod's GPUs.

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
ZERO = Fraction(0)


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


NOT_SELECTED, NO_DOMAIN = Why("not selected"), Why("no domain")
SPREAD, ONE_PER_NODE = Why("spread"), Why("one per node")


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


def in_order(pods: list[Pod], smaller_first: bool = False) -> list[Pod]:
    """The pods in the order the model places them: largest ask first (this module's docstring), or
    with `smaller_first` the smallest first (the given order among equals either way)."""
    sign = 1 if smaller_first else -1
    return sorted(pods, key=lambda p: (sign * _devices(p.asks), sign * p.asks.get("memory", 0),
                                       sign * p.asks.get("cpu", 0)))


def _exact(q: Fraction | int) -> Fraction | int:
    """A whole amount as an int (compared ten times faster than a Fraction), any other as it is."""
    return q.numerator if isinstance(q, Fraction) and q.denominator == 1 else q


class _Placing:
    """A placement under way, one pod at a time: the hosts as the pods placed so far leave them
    (what each has booked, and each group's pods per host and per domain, kept as they land, so a
    pod is placed in time linear in the hosts) and the decision so far."""

    def __init__(self, hosts: list[Host]):
        self.hosts = hosts
        self.decision = Decision(placed={h.name: [] for h in hosts}, pending={}, order=[])
        self.used = {h.name: dict(h.booked) for h in hosts}
        # What each host has left of each resource it states or has booked (any other: none).
        self.free = {h.name: {r: _exact(h.allocatable.get(r, ZERO) - h.booked.get(r, ZERO))
                              for r in {*h.allocatable, *h.booked}} for h in hosts}
        self.on_host: dict[tuple[str, str], int] = {}  # (group, host) -> its pods there
        self.in_domain: dict[tuple[str, str], int] = {}  # (group, domain) -> its pods there
        self._domains: dict[frozenset[str], list[str]] = {}  # a pod's hosts -> their domains
        self._selected: dict[frozenset[str], list[Host]] = {}  # a pod's hosts, as Hosts in the given order
        self._index = {h.name: i for i, h in enumerate(hosts)}
        # Per host, for the last pod like it tried there: whether it has room, and its score (`_kept`).
        self._room: dict[str, tuple[tuple, bool]] = {}
        self._load: dict[str, tuple[tuple, tuple]] = {}
        # The last pod that landed nowhere, as what its reasons depend on, and its reasons: the same
        # pod after it (its group's next) lands nowhere for the same reasons until a pod lands.
        self._nowhere: Optional[tuple[tuple, dict[str, tuple[Why, ...]]]] = None

    def _short(self, pod: Pod, host: Host) -> list[Why]:
        short = []
        allowed = host.allocatable.get(POD_COUNT)
        if allowed is not None and len(self.decision.placed[host.name]) + 1 > allowed:
            short.append(Why("short", POD_COUNT))
        free = self.free[host.name]
        for r, want in pod.asks.items():
            if want > free.get(r, 0) and want > 0:
                short.append(Why("short", r))
        return short

    def _fits(self, pod: Pod, host: Host, asks: tuple[tuple[str, Fraction | int], ...], fewest: int) -> bool:
        """Whether `host`, one of the pod's hosts (`_mine`), takes `pod` now: `reasons` is empty,
        checked cheapest first (the order of the checks changes only which reason is the first)."""
        if host.closed is not None or self._spread(pod, host, fewest):
            return False
        return self._kept(self._room, host, asks, lambda: self._has_room(host, asks))

    def _has_room(self, host: Host, asks: tuple[tuple[str, Fraction | int], ...]) -> bool:
        """Whether `host` has a pod's count and each resource it asks left (NodeResourcesFit)."""
        allowed = host.allocatable.get(POD_COUNT)
        if allowed is not None and len(self.decision.placed[host.name]) + 1 > allowed:
            return False
        free = self.free[host.name]
        return not any(want > free.get(r, 0) and want > 0 for r, want in asks)

    @staticmethod
    def _kept(kept: dict, host: Host, key: tuple, work):
        """What `work` says of `host` for a pod like `key`, kept until a pod lands on the host: what a
        host has left (and its group's pods there, and its load) changes only then, and pods come
        in runs of a group's alike, so each host is worked out once a run, not once a pod."""
        got = kept.get(host.name)
        if got is None or got[0] != key:
            got = kept[host.name] = (key, work())
        return got[1]

    def _fewest(self, pod: Pod) -> int:
        """The fewest of the pod's peers in any domain of its hosts (0 where none has a domain)."""
        domains = self._domains.get(pod.hosts)
        if domains is None:
            domains = self._domains[pod.hosts] = list(dict.fromkeys(
                h.domain for h in self._mine(pod) if h.domain is not None))
        return min((self.in_domain.get((pod.group, d), 0) for d in domains), default=0)

    def _spread(self, pod: Pod, host: Host, fewest: int) -> Optional[Why]:
        if pod.spread == "none":
            return None
        if host.domain is None:
            return NO_DOMAIN if pod.spread == "even" else None
        here = self.in_domain.get((pod.group, host.domain), 0)
        if pod.spread == "onePerNode":
            return ONE_PER_NODE if here else None
        return SPREAD if here + 1 - fewest > pod.max_skew else None

    def reasons(self, pod: Pod, host: Host, fewest: int) -> tuple[Why, ...]:
        """Why `host` cannot take `pod` now (the first failing filter's reasons); () where it can.
        `fewest`: the fewest of its peers in a domain of its hosts (`_fewest`)."""
        if host.closed is not None:
            return (Why("closed", host.closed),)
        if host.name not in pod.hosts:
            return (NOT_SELECTED,)
        short = self._short(pod, host)
        if short:
            return tuple(short)
        why = self._spread(pod, host, fewest)
        return (why,) if why else ()

    def _score(self, pod: Pod, host: Host) -> tuple:
        peers = self.on_host.get((pod.group, host.name), 0) if pod.spread == "even" else 0
        used = self.used[host.name]
        shares = [(used.get(r, ZERO) + pod.asks.get(r, 0)) / host.allocatable[r]
                  for r in WEIGHED if host.allocatable.get(r)]
        load = sum(shares) / len(shares) if shares else len(self.decision.placed[host.name])
        return (peers, load)

    def _mine(self, pod: Pod) -> list[Host]:
        """The hosts the pod may land on (its selector's), in the hosts' order: the only ones it is
        tried on, as a stack's classes are disjoint sets of nodes (the others are "not selected")."""
        mine = self._selected.get(pod.hosts)
        if mine is None:
            mine = self._selected[pod.hosts] = [self.hosts[i] for i in sorted(
                self._index[n] for n in pod.hosts if n in self._index)]
        return mine

    def place(self, pod: Pod) -> None:
        self.decision.order.append(pod)
        asks = [(r, _exact(q)) for r, q in pod.asks.items()]
        shape = tuple(asks)  # as whole ints where whole: compared fast (`_exact`)
        alike = (pod.group, shape, pod.hosts, pod.spread, pod.max_skew)
        if self._nowhere is not None and self._nowhere[0] == alike:  # nothing landed since its like
            self.decision.pending[pod.name] = self._nowhere[1]
            return
        fewest = self._fewest(pod) if pod.spread == "even" else 0
        feasible = [h for h in self._mine(pod) if self._fits(pod, h, shape, fewest)]
        if not feasible:
            reasons = {h.name: self.reasons(pod, h, fewest) for h in self.hosts}
            self.decision.pending[pod.name] = reasons
            self._nowhere = (alike, reasons)
            return
        self._nowhere = None
        key = (pod.group, pod.spread, shape)
        # min keeps the first of equals
        best = min(feasible, key=lambda h: self._kept(self._load, h, key, lambda: self._score(pod, h)))
        self._room.pop(best.name, None)
        self._load.pop(best.name, None)
        self.decision.placed[best.name].append(pod)
        used, free = self.used[best.name], self.free[best.name]
        for r, q in asks:
            used[r] = used.get(r, ZERO) + q
            free[r] = free.get(r, 0) - q
        self.on_host[(pod.group, best.name)] = self.on_host.get((pod.group, best.name), 0) + 1
        if best.domain is not None:
            self.in_domain[(pod.group, best.domain)] = self.in_domain.get((pod.group, best.domain), 0) + 1


def place(hosts: list[Host], pods: list[Pod], smaller_first: bool = False) -> Decision:
    """Place every pod on `hosts`, one at a time in the model's order (`in_order`), each against the
    pods placed before it (this module's docstring); `smaller_first`: the smallest asks first, the
    order that leaves the larger pods the fewest whole nodes' worth (the scheduler's spreading)."""
    placing = _Placing(hosts)
    for pod in in_order(pods, smaller_first):
        placing.place(pod)
    return placing.decision
