"""The plan as Pulumi resources: one ComponentResource per planned component, one resource per
planned object, parented to its component and after what the plan says it waits for.

`deploy` walks the plan (infra/plan.py) in order. A component is registered just before its first
object, after the objects it waits for; each object's resource follows from its manifest's kind,
and a component registers its outputs once its last object exists. Nothing here decides what is
deployed: that is the plan's.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import types
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.plan import HF_TOKEN_KEY, HelmRelease, Planned, PlannedComponent, StackPlan


class _OnFirstUse(types.ModuleType):
    """Stands in for a module in sys.modules until one of its attributes is read; the first read
    imports the real module, which then replaces it there, and every later read is a plain one."""

    def __getattr__(self, attr: str) -> Any:  # only for attributes the stand-in does not have
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)


def _import_on_first_use(name: str) -> None:
    """pulumi_kubernetes.helm.v3 imports pulumi_kubernetes.yaml, which imports `requests` at its top
    for the one function that fetches a manifest URL (yaml.ConfigFile, helm.v3.Chart). This program
    registers neither, and `requests`, with urllib3, charset_normalizer and idna, is about 0.09 s of
    every `pulumi preview`, `pulumi up` and `dynamo-lab render`; whatever does use it gets the real one.
    (importlib's LazyLoader cannot do this on Python 3.11: `import requests` reads `__spec__`,
    which loads it.)"""
    if name not in sys.modules:
        sys.modules[name] = _OnFirstUse(name)


# Before any helm.v3 is read (pulumi_kubernetes imports its API groups on first attribute access).
_import_on_first_use("requests")


# Typed resources by (apiVersion, kind), as their path in pulumi_kubernetes; any other kind is a
# CustomResource. Named, not imported: each API group's module is imported when a plan first holds
# one of its kinds (pulumi_kubernetes loads its groups lazily; networking.v1, for NetworkPolicies
# only a stack with graph.networkPolicy has, costs a twentieth of a second to import).
TYPED = {
    ("v1", "Namespace"): "core.v1.Namespace",
    ("v1", "Secret"): "core.v1.Secret",
    ("v1", "ConfigMap"): "core.v1.ConfigMap",
    ("v1", "Service"): "core.v1.Service",
    ("v1", "PersistentVolumeClaim"): "core.v1.PersistentVolumeClaim",
    ("v1", "PersistentVolume"): "core.v1.PersistentVolume",
    ("batch/v1", "Job"): "batch.v1.Job",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networking.v1.NetworkPolicy",
}


def _typed(kind: tuple[str, str]) -> type:
    return functools.reduce(getattr, TYPED[kind].split("."), k8s)


class PlanComponent(pulumi.ComponentResource):
    """A component of the plan (DynamoPlatform, ServingGraph, ModelCache, TransferProbe, BenchmarkJob):
    its type token and name come from the plan, its children are the plan's objects in it."""

    def __init__(self, name: str, args: PlannedComponent, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(args.type, name, None, opts)
        self.children: dict[str, pulumi.Resource] = {}


def manifest_body(doc: dict[str, Any]) -> dict[str, Any]:
    """A manifest's top-level fields as typed-resource arguments (`stringData` -> `string_data`; the
    resource class sets apiVersion/kind). Nested maps pass as they are, in the manifest's own names."""
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in doc.items() if k not in ("apiVersion", "kind")}


def _release(name: str, release: HelmRelease, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """helm.v3.Release (real Helm) rather than helm.v4.Chart: the chart uses hooks and `lookup`,
    which Chart drops or renders empty (docs/sources.md). Helm waits for readiness, so the release
    resolves only once the operator is Ready, has applied the CRDs and serves its webhooks."""
    return k8s.helm.v3.Release(name, k8s.helm.v3.ReleaseArgs(
        name=release.name, chart=release.chart, version=release.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=release.repository), namespace=release.namespace,
        values=release.values, timeout=release.timeout_seconds, skip_await=False, wait_for_jobs=True,
        cleanup_on_fail=True), opts=opts)


def _resource(o: Planned, parent: PlanComponent, made: dict[str, pulumi.Resource],
              hf_token: Optional[str]) -> tuple[pulumi.Resource, Any]:
    """The planned object as a resource, and the output its component reports for it (its name, or
    the release's status)."""
    opts = pulumi.ResourceOptions(parent=parent, depends_on=[made[n] for n in o.after])
    if o.await_seconds is not None:
        wait = f"{o.await_seconds}s"
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait)))
    doc = o.manifest
    if isinstance(doc, HelmRelease):
        release = _release(o.name, doc, opts)
        return release, release.status
    body = manifest_body(doc)
    if o.kind == ("v1", "Secret") and HF_TOKEN_KEY in body.get("string_data", {}):
        if hf_token is None:
            raise ValueError(f"{o.name}: the plan has a token Secret but the stack has no hfToken")
        body["string_data"] = {**body["string_data"], HF_TOKEN_KEY: pulumi.Output.secret(hf_token)}
    if o.kind in TYPED:
        made = _typed(o.kind)(o.name, **body, opts=opts)
    else:
        made = k8s.apiextensions.CustomResource(o.name, api_version=doc["apiVersion"], kind=doc["kind"],
                                                metadata=body["metadata"], spec=body.get("spec"), opts=opts)
    return made, made.metadata["name"]  # type: ignore[attr-defined]


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

    reported: dict[str, Any] = {}
    for o in plan.objects:
        owner = component(o.component)
        made[o.name], reported[o.name] = _resource(o, owner, made, hf_token)
        owner.children[o.name] = made[o.name]
        if last[o.component] == o.name:
            owner.register_outputs({n: reported[n] for n in owner.children})
    return made
