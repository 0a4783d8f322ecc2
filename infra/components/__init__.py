"""The plan as Pulumi resources: one ComponentResource per planned component, one resource per
planned object, parented to its component and after what the plan says it waits for.

`deploy` walks the plan (infra/plan.py) in order. A component is registered just before its first
object, after the objects it waits for; each object's resource follows from its manifest's kind,
and a component registers its outputs once its last object exists. Nothing here decides what is
deployed: that is the plan's.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.plan import HELM_RELEASE, HF_TOKEN_KEY, Component, Planned, StackPlan

# Typed resources by (apiVersion, kind); any other kind is a CustomResource.
TYPED = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


class PlanComponent(pulumi.ComponentResource):
    """A component of the plan (DynamoPlatform, ServingGraph, ModelCache, TransferProbe, BenchmarkJob):
    its type token and name come from the plan, its children are the plan's objects in it."""

    def __init__(self, name: str, args: Component, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(args.type, name, None, opts)
        self.children: dict[str, pulumi.Resource] = {}


def manifest_body(doc: dict[str, Any]) -> dict[str, Any]:
    """A manifest's top-level fields as typed-resource arguments (`stringData` -> `string_data`; the
    resource class sets apiVersion/kind). Nested maps pass as they are, in the manifest's own names."""
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in doc.items() if k not in ("apiVersion", "kind")}


def _release(name: str, doc: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """helm.v3.Release (real Helm) rather than helm.v4.Chart: the chart uses hooks and `lookup`,
    which Chart drops or renders empty (docs/sources.md). Helm waits for readiness, so the release
    resolves only once the operator is Ready, has applied the CRDs and serves its webhooks."""
    return k8s.helm.v3.Release(name, k8s.helm.v3.ReleaseArgs(
        name=doc["name"], chart=doc["chart"], version=doc["version"],
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=doc["repository"]), namespace=doc["namespace"],
        values=doc["values"], timeout=doc["timeoutSeconds"], skip_await=False, wait_for_jobs=True,
        cleanup_on_fail=True), opts=opts)


def _resource(o: Planned, parent: PlanComponent, made: dict[str, pulumi.Resource],
              hf_token: Optional[str]) -> pulumi.Resource:
    opts = pulumi.ResourceOptions(parent=parent, depends_on=[made[n] for n in o.after])
    if o.await_seconds is not None:
        wait = f"{o.await_seconds}s"
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait)))
    doc = o.manifest
    if o.kind == HELM_RELEASE:
        return _release(o.name, doc, opts)
    body = manifest_body(doc)
    if o.kind == ("v1", "Secret") and HF_TOKEN_KEY in body.get("string_data", {}):
        if hf_token is None:
            raise ValueError(f"{o.name}: the plan has a token Secret but the stack has no hfToken")
        body["string_data"] = {**body["string_data"], HF_TOKEN_KEY: pulumi.Output.secret(hf_token)}
    if o.kind in TYPED:
        return TYPED[o.kind](o.name, **body, opts=opts)
    return k8s.apiextensions.CustomResource(o.name, api_version=doc["apiVersion"], kind=doc["kind"],
                                            metadata=body["metadata"], spec=body.get("spec"), opts=opts)


def _name_of(resource: pulumi.Resource) -> Any:
    if isinstance(resource, k8s.helm.v3.Release):
        return resource.status
    return resource.metadata["name"]  # type: ignore[attr-defined]


def deploy(plan: StackPlan, provider: pulumi.ProviderResource) -> dict[str, pulumi.Resource]:
    """Register every planned object; returns them by name."""
    cfg = plan.stack.config
    hf_token = cfg.hf_token.get_secret_value() if cfg.hf_token is not None else None
    specs = {c.name: c for c in plan.components}
    last = {o.component: o.name for o in plan.objects}
    components: dict[str, PlanComponent] = {}
    made: dict[str, pulumi.Resource] = {}

    def component(name: str) -> PlanComponent:
        if name not in components:
            spec = specs[name]
            parent = component(spec.parent) if spec.parent else None
            opts = pulumi.ResourceOptions(parent=parent, depends_on=[made[n] for n in spec.after],
                                          providers=None if parent else [provider])
            components[name] = PlanComponent(name, spec, opts)
        return components[name]

    for o in plan.objects:
        owner = component(o.component)
        made[o.name] = owner.children[o.name] = _resource(o, owner, made, hf_token)
        if last[o.component] == o.name:
            owner.register_outputs({n: _name_of(r) for n, r in owner.children.items()})
    return made
