"""graph.networkPolicy: every flow the graph makes, and the policy that allows it, checked against the
pods and policies the stacks deploy; and the flows no pod needs, checked refused.

The policies are evaluated here as Kubernetes defines them ("Network Policies", networking.k8s.io/v1):
a pod that a policy of its namespace selects for a direction is isolated in that direction, and a
connection passes when the source's egress and the destination's ingress both allow it (a policy's
rules are ORed; an empty `ports` or `to`/`from` matches everything; a peer's podSelector and
namespaceSelector together mean both). Pods are what the plan deploys, labelled as the Dynamo
operator labels the graph's (component type and graph name) and as the Jobs' templates say.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

from infra.manifests.graph import COMPONENT_TYPE_LABEL, GRAPH_NAME_LABEL, KV_EVENTS_CONFIG
from infra.plan import plan
from tests.helpers import everything_on, loaded, refused


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace, labels) or an address outside the cluster's pods (ip)."""

    what: str
    namespace: Optional[str] = None
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    ip: Optional[str] = None


# What the graph talks to outside its namespace, as a pod sees it (after a Service's address is
# translated to an endpoint's).
DNS = Endpoint("kube-dns", "kube-system", {"k8s-app": "kube-dns"})
API_SERVER = Endpoint("API server", ip="192.168.1.10")  # a control-plane node, port 6443
HUB = Endpoint("the Hugging Face Hub", ip="18.239.50.16")
PYPI = Endpoint("PyPI", ip="151.101.0.223")
PLATFORM = Endpoint("the platform's NATS", "dynamo-system", {"app": "nats"})
STRANGER = Endpoint("a pod of another namespace", "other", {"app": "x"})
NIXL_SIDE_CHANNEL = 5600  # vLLM 0.31.0 envs.py, VLLM_NIXL_SIDE_CHANNEL_PORT's default
KV_EVENTS = int(KV_EVENTS_CONFIG["endpoint"].rsplit(":", 1)[1])
ANY_PORT = 41000  # the request plane, the system port, UCX's listeners: ports Dynamo and UCX pick


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        has, value = e["key"] in labels, labels.get(e["key"])
        if not {"In": has and value in e.get("values", []), "NotIn": not has or value not in e.get("values", []),
                "Exists": has, "DoesNotExist": not has}[e["operator"]]:
            return False
    return True


def _peer_matches(peer: dict[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        if other.ip is None:
            return False
        block = peer["ipBlock"]
        ip = ipaddress.ip_address(other.ip)
        inside = lambda cidr: ip.version == ipaddress.ip_network(cidr).version and ip in ipaddress.ip_network(cidr)  # noqa: E731
        return inside(block["cidr"]) and not any(inside(c) for c in block.get("except", []))
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}):
            return False
    elif other.namespace != policy_ns:
        return False
    return _selects(peer.get("podSelector", {}), other.labels)


def _port_matches(rule: dict[str, Any], port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port", port) == port for p in ports)


def _allowing(policies: list[dict[str, Any]], pod: Endpoint, direction: str, other: Endpoint, port: int,
              protocol: str) -> Optional[set[str]]:
    """The policies that let `pod` connect to (Egress) or be reached from (Ingress) `other`; None when
    no policy isolates `pod` in that direction (everything passes)."""
    mine = [p for p in policies if p["metadata"]["namespace"] == pod.namespace
            and _selects(p["spec"]["podSelector"], pod.labels) and direction in p["spec"]["policyTypes"]]
    if not mine:
        return None
    key, peers = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    return {p["metadata"]["name"] for p in mine for rule in p["spec"].get(key, [])
            if ("to" not in rule and "from" not in rule or not rule.get(peers)
                or any(_peer_matches(peer, pod.namespace, other) for peer in rule[peers]))
            and _port_matches(rule, port, protocol)}


def connection(policies, source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP"):
    """(allowed, the policies that let it leave the source, those that let it into the destination)."""
    out = _allowing(policies, source, "Egress", destination, port, protocol) if source.namespace else None
    into = _allowing(policies, destination, "Ingress", source, port, protocol) if destination.namespace else None
    return (out is None or bool(out)) and (into is None or bool(into)), out, into


@dataclass(frozen=True)
class Flow:
    source: Endpoint
    destination: Endpoint
    port: int
    why: str
    allowed: bool = True
    protocol: str = "TCP"
    by: tuple[str, ...] = ()  # the policies (name suffixes) that let it leave the source


def _pods(p) -> list[Endpoint]:
    """Every pod of the plan, labelled as it will be: the graph's components as the operator labels
    them, the Jobs as their templates do."""
    graph, ns = p.stack.config.graph.name, p.stack.config.graph.namespace
    pods = []
    for o in p.kubernetes:
        m = o.manifest
        if m["kind"] == "DynamoGraphDeployment":
            pods += [Endpoint(c["name"], ns, {COMPONENT_TYPE_LABEL: c["type"], GRAPH_NAME_LABEL: graph})
                     for c in m["spec"]["components"]]
        elif m["kind"] == "Job":
            pods.append(Endpoint(o.name, ns, m["spec"]["template"].get("metadata", {}).get("labels", {})))
    return pods


def flows(p) -> list[Flow]:
    """Every flow the graph makes, from the plan's pods and config; and what must stay shut."""
    cfg = p.stack.config
    pods = {e.what: e for e in _pods(p)}
    frontend = pods["frontend"]
    workers = [pods[g.name] for g in cfg.workers]
    downloading = not cfg.model_cache.pre_pull.enabled or cfg.model_cache.mode == "off"
    out = []
    for pod in pods.values():
        out.append(Flow(pod, DNS, 53, "names (Services, the Hub)", protocol="UDP", by=("dns",)))
        out.append(Flow(pod, DNS, 53, "names over TCP (large answers)", by=("dns",)))
        out.append(Flow(pod, STRANGER, ANY_PORT, "nothing outside the graph's flows", allowed=False))
    for pod in [frontend, *workers]:
        out.append(Flow(pod, API_SERVER, 6443, "Dynamo's Kubernetes discovery", by=("api-server",)))
        out.append(Flow(pod, PLATFORM, 4222, "the platform's services", by=("platform",)))
    for w in workers:
        out.append(Flow(frontend, w, ANY_PORT, "requests (Dynamo's TCP request plane) and the model's metadata "
                                               "(the worker's system port)", by=("within-namespace",)))
        out.append(Flow(frontend, w, KV_EVENTS, "KV events for the KV router (ZMQ)", by=("within-namespace",)))
        out.append(Flow(STRANGER, w, KV_EVENTS, "the workers' ports from outside the namespace", allowed=False))
        out.append(Flow(w, HUB, 443, "the model, when no pre-pull fills the cache", allowed=downloading,
                        by=("downloads-1",) if downloading else ()))
    for d in (pods[g.name] for g in cfg.workers if g.role == "decode"):
        for s in (pods[g.name] for g in cfg.workers if g.role == "prefill"):
            out.append(Flow(d, s, NIXL_SIDE_CHANNEL, "NIXL's side channel (the KV's metadata)",
                            by=("within-namespace",)))
            out.append(Flow(d, s, ANY_PORT, "the KV itself (UCX over TCP, the decode side READs)",
                            by=("within-namespace",)))
            out.append(Flow(s, d, ANY_PORT, "UCX's connection back", by=("within-namespace",)))
    out.append(Flow(frontend, HUB, 443, "the frontend reads the model from a worker", allowed=False))
    out.append(Flow(STRANGER, frontend, 8000, "the frontend's port from outside the namespace", allowed=False))
    for name, pod in pods.items():
        if name.startswith("graph-model-cache-pull-"):
            out.append(Flow(pod, HUB, 443, "the model download", by=("downloads",)))
            out.append(Flow(pod, API_SERVER, 6443, "no Job calls the API", allowed=False))
        if name == "bench-job":
            out.append(Flow(pod, frontend, 8000, "the benchmark's requests", by=("within-namespace",)))
            out.append(Flow(pod, PYPI, 443, "AIPerf, hash-pinned, from PyPI", by=("downloads",)))
            out.append(Flow(pod, HUB, 443, "the tokenizer", by=("downloads",)))
        if name == "probe-initiator":
            out.append(Flow(pod, pods["probe-target"], cfg.probe.port, "the probe's control connection and "
                            "transfer", by=("within-namespace",)))
            out.append(Flow(pods["probe-target"], pod, ANY_PORT, "UCX's connection back", by=("within-namespace",)))
        if name.startswith("probe-"):
            out.append(Flow(pod, HUB, 443, "the probe moves bytes, no model", allowed=False))
    return out


CACHES = {"nodeVolume": {}, "hostPath": {"mode": "hostPath"}, "pvc": {"mode": "pvc"},
          "no-pre-pull": {"prePull": {"enabled": False}}, "off": {"mode": "off"}}


def _plan(stack: str, cache: dict[str, Any], **graph: Any):
    def edit(c):
        everything_on(stack)(c)
        c["modelCache"] = cache
        c["graph"] = {"networkPolicy": True, **graph}
    return plan(loaded(stack, edit))


@pytest.mark.parametrize("cache", CACHES, ids=list(CACHES))
def test_every_flow_the_graph_makes_is_allowed_by_its_policy_and_nothing_else(stack, cache):
    p = _plan(stack, CACHES[cache])
    policies = [o.manifest for o in p.of_kind("NetworkPolicy")]
    graph = p.stack.config.graph.name
    table = flows(p)
    # Every pod the stack deploys is in the table, as the source of its flows.
    assert {f.source.what for f in table if f.source.namespace == p.stack.config.graph.namespace} == {
        e.what for e in _pods(p)}
    wrong = []
    for f in table:
        allowed, out, into = connection(policies, f.source, f.destination, f.port, f.protocol)
        by = tuple(sorted(n.removeprefix(f"{graph}-") for n in out or ()))
        if allowed != f.allowed or (f.allowed and f.source.namespace and by != tuple(sorted(f.by))):
            wrong.append(f"{f.source.what} -> {f.destination.what}:{f.port}/{f.protocol} ({f.why}): allowed "
                         f"{allowed}, expected {f.allowed}; leaves by {by}, expected {f.by}; enters by {into}")
    assert wrong == []


def test_every_policy_allows_some_listed_flow(stack):
    p = _plan(stack, {})
    policies = [o.manifest for o in p.of_kind("NetworkPolicy")]
    used = {"default-deny", "frontend-http"}  # frontend-http: the namespace, which within-namespace admits too
    for f in flows(p):
        if f.allowed:
            _, out, into = connection(policies, f.source, f.destination, f.port, f.protocol)
            used |= {n.removeprefix(f"{p.stack.config.graph.name}-") for n in (out or set()) | (into or set())}
    assert {o.manifest["metadata"]["name"].removeprefix(f"{stack}-") for o in p.of_kind("NetworkPolicy")} <= used


def test_the_frontends_port_opens_to_the_sources_the_stack_names():
    p = _plan("cross-server", {}, frontendSources=[{"namespace": "other"}, {"cidr": "192.168.1.0/24"}])
    policies = [o.manifest for o in p.of_kind("NetworkPolicy")]
    frontend = next(e for e in _pods(p) if e.what == "frontend")
    assert connection(policies, STRANGER, frontend, 8000)[0]
    assert not connection(policies, STRANGER, frontend, 9090)[0], "its port only"
    assert connection(policies, Endpoint("a load balancer", ip="192.168.1.50"), frontend, 8000)[0]
    assert not connection(policies, Endpoint("elsewhere", ip="10.1.2.3"), frontend, 8000)[0]
    worker = next(e for e in _pods(p) if e.what == "decode")
    assert not connection(policies, STRANGER, worker, 8000)[0], "the frontend's port, not the workers'"


def test_narrowed_address_ranges_are_the_only_ones_reached():
    p = _plan("cross-server", {}, apiServerCidrs=["192.168.1.10/32"], downloadCidrs=["203.0.113.0/24"])
    policies = [o.manifest for o in p.of_kind("NetworkPolicy")]
    pods = {e.what: e for e in _pods(p)}
    assert connection(policies, pods["decode"], API_SERVER, 6443)[0]
    assert not connection(policies, pods["decode"], Endpoint("another private address", ip="10.0.0.1"), 6443)[0]
    pull = next(e for n, e in pods.items() if n.startswith("graph-model-cache-pull-"))
    assert connection(policies, pull, Endpoint("the mirror", ip="203.0.113.7"), 443)[0]
    assert not connection(policies, pull, HUB, 443)[0]


def test_without_network_policy_there_is_none():
    assert plan(loaded("cross-server")).of_kind("NetworkPolicy") == []


# --- what the policies' keys refuse ------------------------------------------------------------

@pytest.mark.parametrize("graph, key, why", [
    ({"apiServerCidrs": []}, "graph.apiServerCidrs", "an empty list would be a NetworkPolicy rule with no `to`, "
                                                     "which Kubernetes reads as every address"),
    ({"downloadCidrs": []}, "graph.downloadCidrs", "an empty list would be a NetworkPolicy rule with no `to`"),
    ({"apiServerCidrs": ["10.0.0.1/8"]}, "graph.apiServerCidrs[0]", "'10.0.0.1/8' is not a CIDR a NetworkPolicy's "
                                                                    "ipBlock takes (10.0.0.1/8 has host bits set)"),
    ({"downloadCidrs": ["0.0.0.0/0", "huggingface.co"]}, "graph.downloadCidrs[1]", "'huggingface.co' is not a CIDR"),
    ({"apiServerCidrs": ["192.168.1.10/33"]}, "graph.apiServerCidrs[0]", "'192.168.1.10/33' is not a CIDR"),
    ({"frontendSources": [{"namespace": "monitoring", "cidr": "10.0.0.0/8"}]}, "graph.frontendSources[0]",
     "give exactly one of namespace or cidr"),
    ({"frontendSources": [{}]}, "graph.frontendSources[0]", "give exactly one of namespace or cidr"),
    ({"frontendSources": [{"namespace": "Monitoring"}]}, "graph.frontendSources[0].namespace", "is not a DNS label"),
    ({"frontendSources": [{"cidr": "10.0.0.0/33"}]}, "graph.frontendSources[0].cidr", "is not a CIDR"),
])
def test_address_ranges_and_sources_the_policies_cannot_mean_are_refused(graph, key, why):
    msg = str(refused("cross-server", lambda c: c.update(graph={"networkPolicy": True, **graph})))
    assert msg.startswith(f"Pulumi.cross-server.yaml: {key}: "), msg
    assert why in msg
