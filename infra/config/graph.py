"""`frontend` and `graph`: the frontend pods and the DynamoGraphDeployment (its names, readiness wait
and NetworkPolicies)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from infra import units
from infra.config.base import Section
from infra.config.fields import Bytes, Cidr, Cpu, OptionalDnsLabel
from infra.names import GRAPH_NAME_MAX


class Frontend(Section):
    router_mode: Literal["kv", "round-robin", "random"] = Field("kv", description="`DYN_ROUTER_MODE`: how the "
                                                                "frontend picks a worker")
    replicas: int = Field(1, ge=1, description="frontend pods")
    cpu: Cpu = Field("1", description="each frontend pod's CPU")
    memory: Bytes = Field(units.parse_memory("2Gi"), description="each frontend pod's memory")


PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")


class FrontendSource(Section):
    """Where requests to the frontend's port may come from, besides the graph namespace: one
    namespace (all its pods) or one address range."""

    namespace: OptionalDnsLabel = Field(None, description="a namespace whose pods may reach the frontend")
    cidr: Optional[Cidr] = Field(None, description="an address range that may reach the frontend (a load "
                                 "balancer's, a node's)", json_schema_extra={"accepts": "a CIDR"})

    @model_validator(mode="after")
    def _one_of(self) -> "FrontendSource":
        if (self.namespace is None) == (self.cidr is None):
            raise ValueError("give exactly one of namespace or cidr, e.g. {namespace: monitoring} or "
                             "{cidr: 192.168.1.0/24}")
        return self


class Graph(Section):
    # None: the stack name, so each variant's graph is recognisable in `kubectl get dgd`.
    name: OptionalDnsLabel = Field(None, description="the DynamoGraphDeployment's name", json_schema_extra={
        "accepts": f"a DNS label starting with a letter, at most {GRAPH_NAME_MAX} characters (names derived from "
                   "it must fit 63)", "default_text": "the stack name"})
    namespace: OptionalDnsLabel = Field(None, description="its namespace (one per stack, so stacks sharing a "
                                        "cluster never declare the same object)", json_schema_extra={
                                            "accepts": "a DNS label, not `platform.namespace`",
                                            "default_text": "`dynamo-lab-<stack>`"})
    # How long `pulumi up` waits for the graph's Ready condition (every component ready) before it
    # fails. A first deploy pulls the serving image and loads the model on every worker.
    ready_timeout_seconds: int = Field(1800, gt=0, description="how long `pulumi up` waits for the graph's Ready "
                                       "condition before it fails (`pulumi.com/timeoutSeconds`)")
    # NetworkPolicies in the graph namespace: deny ingress by default, allow it from the namespace's
    # own pods and to the frontend's HTTP port. Off by default: they take effect only where the
    # cluster's network plugin enforces NetworkPolicy, and the lab's has not been checked.
    network_policy: bool = Field(False, description="NetworkPolicies for ingress and egress: every flow the graph "
                                 "makes and nothing else (docs/security.md)")
    frontend_sources: list[FrontendSource] = Field([], description="`networkPolicy`: who may reach the "
                                                   "frontend's port 8000 besides the graph namespace (its "
                                                   "workers and the benchmark)", json_schema_extra={
                                                       "accepts": "`[{namespace: NAME}]` or `[{cidr: CIDR}]` "
                                                                  "entries"})
    # The API server's endpoints, as pods reach them after the Service's address is translated; a
    # stack file cannot know them, so by default the private ranges a lab's control plane lives in
    # (RFC 1918, shared address space, IPv6 unique local): never the Internet.
    api_server_cidrs: list[Cidr] = Field(list(PRIVATE_RANGES), description="`networkPolicy`: the API server's "
                                         "addresses (`kubectl get endpointslices -n default -l "
                                         "kubernetes.io/service-name=kubernetes`), which the frontend and workers "
                                         "reach on 443 and 6443 for Dynamo's discovery; write yours to narrow them",
                                         json_schema_extra={"accepts": "CIDRs"})
    # NetworkPolicy names no host: the Hub (and PyPI, for the benchmark's AIPerf) are address ranges.
    download_cidrs: list[Cidr] = Field(["0.0.0.0/0", "::/0"], description="`networkPolicy`: the addresses the "
                                       "pods that download (pre-pull Jobs, the benchmark; workers without a "
                                       "pre-pull) reach on 443: the Hub, PyPI, or your mirror's range",
                                       json_schema_extra={"accepts": "CIDRs"})

    @field_validator("api_server_cidrs", "download_cidrs")
    @classmethod
    def _some_range(cls, cidrs: list[str]) -> list[str]:
        # A NetworkPolicy rule whose `to` is empty matches every destination.
        if not cidrs:
            raise ValueError("an empty list would be a NetworkPolicy rule with no `to`, which Kubernetes reads as "
                             "every address. Write at least one CIDR, e.g. 192.168.1.10/32, or remove the key")
        return cidrs

    @field_validator("name")
    @classmethod
    def _starts_with_a_letter(cls, name: Optional[str]) -> Optional[str]:
        # The operator names the frontend's Service `<graph>-frontend`; Service names start with a letter.
        if name is not None and not name[0].isalpha():
            raise ValueError(f"{name!r} starts with a digit; the graph's Services are named after it and a "
                             "Service name must start with a letter")
        if name is not None and len(name) > GRAPH_NAME_MAX:
            raise ValueError(f"{name!r} is {len(name)} characters; names derived from it (the probe's Job "
                             f"`<graph>-kv-probe-initiator-<digest>`) must fit 63, so it can have at most "
                             f"{GRAPH_NAME_MAX}. Write a shorter name")
        return name
