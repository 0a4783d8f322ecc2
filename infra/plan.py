"""One plan of what a stack deploys: every object, the component it belongs to, what it waits for.

Pure: a loaded `Stack` (the resolved stack and its sizing) in, a `StackPlan` out; no Pulumi.
The program (infra/program.py) turns the plan into resources one object at a time; render, golden,
diff and the tests read the program's registrations, and preflight and the property tests read the
plan itself. Nothing outside this module decides what a stack deploys: the builders in
infra/manifests/ make the objects' bodies, and only this module calls them for a stack
(tests/infra/test_plan.py holds that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Optional, Union

from infra.config import StackConfig
from infra.load import load
from infra.manifests import (
    benchmark,
    graph,
    model_cache,
    model_pull,
    owner_labels,
    platform,
    security,
    transfer_probe,
)
from infra.manifests.platform import HELM_RELEASE, HelmRelease
from infra.resolved import ResolvedStack
from infra.sizing import StackSizing, size

__all__ = ["HELM_RELEASE", "PlannedComponent", "HelmRelease", "Planned", "Stack", "StackPlan", "load_stack", "plan"]

# Beyond a Job's activeDeadlineSeconds, for Pulumi to see the Job's final status.
AWAIT_MARGIN_SECONDS = 120
HF_TOKEN_KEY = "HF_TOKEN"


@dataclass(frozen=True)
class Stack:
    """A stack file, loaded: the stack resolved (infra/resolved.py) and what it costs."""

    resolved: ResolvedStack
    sizing: StackSizing

    @property
    def name(self) -> str:
        return self.resolved.name

    @property
    def config(self) -> StackConfig:
        return self.resolved.config


def load_stack(name: str, raw_config: dict[str, str], secret_keys: Collection[str] = ()) -> Stack:
    """Validate, resolve and size a stack's config as Pulumi hands it over. Raises ConfigError."""
    resolved = load(raw_config, name, secret_keys=secret_keys)
    return Stack(resolved=resolved, sizing=size(resolved))


@dataclass(frozen=True)
class PlannedComponent:
    """A ComponentResource of the plan: its Pulumi name, type token, parent component, and the
    objects it waits for (every object in it waits for them too)."""

    name: str
    type: str
    parent: Optional[str] = None
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Planned:
    """One object the stack deploys."""

    name: str  # its Pulumi resource name, unique in the stack ("graph-dgd")
    component: str  # the PlannedComponent it belongs to ("graph", "graph-model-cache", ...)
    manifest: Union[dict[str, Any], HelmRelease]  # the Kubernetes object, or the Helm release
    after: tuple[str, ...] = ()  # the objects it waits for, by name
    # How long Pulumi waits for it to become ready (a Job's deadline and a margin); None: the default.
    await_seconds: Optional[int] = None
    # What preflight calls its pods ("probe target Job"); None: not counted on its own.
    title: Optional[str] = None

    @property
    def kind(self) -> tuple[str, str]:
        """(apiVersion, kind); for the Helm release, the type pulumi-kubernetes installs it as."""
        if isinstance(self.manifest, HelmRelease):
            return HELM_RELEASE
        return self.manifest["apiVersion"], self.manifest["kind"]


@dataclass(frozen=True)
class StackPlan:
    stack: Stack
    components: tuple[PlannedComponent, ...]
    objects: tuple[Planned, ...]  # in an order where each comes after what it waits for
    outputs: dict[str, Any]

    @property
    def kubernetes(self) -> tuple[Planned, ...]:
        """The planned Kubernetes objects, in order: every object but the Helm release."""
        return tuple(o for o in self.objects if not isinstance(o.manifest, HelmRelease))

    def of_kind(self, kind: str) -> list[Planned]:
        return [o for o in self.objects if o.kind[1] == kind]

    def named(self, name: str) -> Planned:
        return next(o for o in self.objects if o.name == name)


class _Builder:
    """Collects the plan's components and objects in creation order."""

    def __init__(self) -> None:
        self.components: list[PlannedComponent] = []
        self.objects: list[Planned] = []

    def component(self, name: str, kind: str, parent: Optional[str] = None, after: Collection[str] = ()) -> str:
        self.components.append(PlannedComponent(name, f"dynamo-lab:index:{kind}", parent, tuple(dict.fromkeys(after))))
        return name

    def add(self, component: str, name: str, manifest: dict[str, Any], after: Collection[str] = (),
            **more: Any) -> str:
        self.objects.append(Planned(name, component, manifest, tuple(dict.fromkeys(after)), **more))
        return name


def _namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _token_secret(cfg: StackConfig) -> dict[str, Any]:
    """The token Secret, without its value: the program fills HF_TOKEN from the stack's secret."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": graph.HF_TOKEN_SECRET, "namespace": cfg.graph.namespace},
            "stringData": {HF_TOKEN_KEY: None}}


def stack_outputs(stack: Stack) -> dict[str, Any]:
    cfg = stack.config
    return {
        "graphNamespace": cfg.graph.namespace,
        "graphName": cfg.graph.name,
        "cluster": cfg.target.context,
        "frontendUrl": graph.frontend_url(cfg),
        "portForward": graph.port_forward_command(cfg),
        "placement": graph.placement(cfg),
        "sizing": stack.sizing.as_dict(),
    }


def plan(stack: Stack) -> StackPlan:
    """Everything `stack` deploys, in order."""
    r, cfg, sizing = stack.resolved, stack.config, stack.sizing
    b = _Builder()
    first: list[str] = []  # what the graph's objects wait for: the operator, when this stack installs it
    if cfg.platform.manage:
        labels = {**owner_labels(stack.name), **security.namespace_labels("baseline")}
        b.component("platform", "DynamoPlatform")
        b.add("platform", "platform-ns", _namespace(cfg.platform.namespace, labels))
        # The operator's pods are the chart's; baseline is enforced there (restricted only warned):
        # the chart's pods have not been checked against restricted.
        first.append(b.add("platform", "platform-release", platform.release(cfg.platform), ["platform-ns"]))

    g = b.component("graph", "ServingGraph", after=first)
    labels = {**owner_labels(stack.name), **security.namespace_labels(security.pod_security_level(cfg))}
    ns = b.add(g, "graph-ns", _namespace(cfg.graph.namespace, labels), first)
    needs = [*first, ns]
    if cfg.hf_token is not None:
        needs.append(b.add(g, "graph-hf-token", _token_secret(cfg), needs))
    for doc in graph.network_policies(cfg):
        b.add(g, f"graph-{doc['metadata']['name']}", doc, [*first, ns])
    claim, pulls = model_cache.claim(r), model_pull.jobs(r)
    volumes = model_cache.node_volumes(r, sizing.model_cache.bytes_per_cache)
    outputs = stack_outputs(stack)
    if claim or pulls or volumes:
        cache = b.component("graph-model-cache", "ModelCache", parent=g, after=needs)
        cache_needs = list(needs)
        if claim is not None:
            cache_needs.append(b.add(cache, "graph-model-cache-claim", claim, needs))
        for cls, (pv, pvc) in volumes.items():
            volume = b.add(cache, f"graph-model-cache-volume-{cls}", pv, first)
            cache_needs.append(b.add(cache, f"graph-model-cache-claim-{cls}", pvc, [*needs, volume]))
        pulled = [b.add(cache, f"graph-model-cache-pull-{key}", job, cache_needs,
                        await_seconds=job["spec"]["activeDeadlineSeconds"] + AWAIT_MARGIN_SECONDS)
                  for key, job in pulls.items()]
        needs = cache_needs + pulled
        if pulls:
            outputs["modelPullJobs"] = [j["metadata"]["name"] for j in pulls.values()]
    dgd = b.add(g, "graph-dgd", graph.deployment(r, sizing), needs)

    if cfg.probe.enabled:
        m = transfer_probe.manifests(cfg, sizing)
        p = b.component("probe", "TransferProbe", after=[ns])
        code = b.add(p, "probe-code", m.configmap, [ns])
        svc = b.add(p, "probe-target-svc", m.service, [ns])
        b.add(p, "probe-target", m.target, [ns, code], title="probe target Job")
        b.add(p, "probe-initiator", m.initiator, [ns, code, svc], title="probe initiator Job")
        outputs["probeLogs"] = transfer_probe.logs_command(cfg, m.initiator["metadata"]["name"])
    if cfg.benchmark.enabled:
        bm = benchmark.manifests(cfg, stack.name)
        bench = b.component("bench", "BenchmarkJob", after=[dgd])
        plan_cm = b.add(bench, "bench-plan", bm.configmap, [dgd])
        b.add(bench, "bench-job", bm.job, [dgd, plan_cm], title="benchmark Job")
        outputs["benchJob"] = bm.job["metadata"]["name"]
        outputs["benchLogs"] = benchmark.logs_command(cfg, outputs["benchJob"])
    return StackPlan(stack=stack, components=tuple(b.components), objects=tuple(b.objects), outputs=outputs)
