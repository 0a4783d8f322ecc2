"""What the cluster already holds that this stack must not fight: its Kubernetes version against
the chart's range, Dynamo operators, webhooks and CRDs installed by someone else, and the
namespaces the stack creates (free, or already this stack's).

A Dynamo installation is recognised as the operator chart labels it (upstream
deploy/helm/charts/platform/components/operator/templates: the operator Deployment carries
`app.kubernetes.io/part-of: dynamo-operator` and `control-plane: controller-manager`, its webhooks
call `<release>-dynamo-operator-webhook-service` in the release's namespace about `nvidia.com`
`dynamo*` resources); Helm records the owning release in the `meta.helm.sh/release-name` and
`-namespace` annotations. A namespace is this stack's when it carries the label the program sets on
the namespaces it creates (infra.manifests.STACK_LABEL).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from dynamo_lab.preflight import versions
from dynamo_lab.preflight.cluster_data import ClusterData
from dynamo_lab.preflight.report import Check, Problem, Report
from infra.config.schema import StackConfig
from infra.manifests import STACK_LABEL, security

GRAPH_CRD = "dynamographdeployments.nvidia.com"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _release(obj: dict[str, Any]) -> Optional[str]:
    meta = _meta(obj)
    return ((meta.get("annotations") or {}).get("meta.helm.sh/release-name")
            or (meta.get("labels") or {}).get("app.kubernetes.io/instance"))


def is_operator(deployment: dict[str, Any]) -> bool:
    labels = _meta(deployment).get("labels") or {}
    return (labels.get("app.kubernetes.io/part-of") == "dynamo-operator"
            and (labels.get("control-plane") == "controller-manager" or labels.get("app.kubernetes.io/component")
                 == "manager"))


def webhook_namespace(config: dict[str, Any]) -> Optional[str]:
    """The namespace of the service a Dynamo webhook configuration calls; None if it is not Dynamo's."""
    for hook in config.get("webhooks") or []:
        about_dynamo = any("nvidia.com" in (rule.get("apiGroups") or [])
                           and any(r.startswith("dynamo") for r in rule.get("resources") or [])
                           for rule in hook.get("rules") or [])
        service = (hook.get("clientConfig") or {}).get("service") or {}
        if about_dynamo and service.get("namespace"):
            return service["namespace"]
    return None


def _is_dynamo_crd(crd: dict[str, Any]) -> bool:
    spec = crd.get("spec") or {}
    return spec.get("group") == "nvidia.com" and str((spec.get("names") or {}).get("kind", "")).startswith("Dynamo")


@dataclass
class Installation:
    """The Dynamo operator objects found in one namespace."""

    namespace: str
    operators: list[str] = field(default_factory=list)  # Deployment names
    releases: set[str] = field(default_factory=set)
    webhooks: list[str] = field(default_factory=list)  # "ValidatingWebhookConfiguration/name"
    crds: list[str] = field(default_factory=list)  # Dynamo CRDs whose conversion webhook it serves

    def describe(self) -> str:
        parts = []
        if self.operators:
            parts.append(f"Deployment {', '.join(f'{self.namespace}/{d}' for d in self.operators)}")
        if self.releases:
            parts.append(f"Helm release {', '.join(sorted(self.releases))} in {self.namespace}")
        if self.webhooks:
            parts.append(f"webhooks {', '.join(self.webhooks)}")
        if self.crds:
            parts.append(f"conversion webhook of {', '.join(sorted(self.crds))}")
        return "; ".join(parts)

    def uninstall(self) -> str:
        if self.releases:
            return " and ".join(f"`helm uninstall {r} -n {self.namespace}`" for r in sorted(self.releases))
        return f"delete what installed it in {self.namespace}"


def installations(data: ClusterData) -> dict[str, Installation]:
    found: dict[str, Installation] = {}

    def at(namespace: str) -> Installation:
        return found.setdefault(namespace, Installation(namespace))

    for d in data.deployments:
        if is_operator(d):
            inst = at(_meta(d).get("namespace", "?"))
            inst.operators.append(_meta(d).get("name", "?"))
            release = _release(d)
            if release:
                inst.releases.add(release)
    for w in data.webhooks:
        namespace = webhook_namespace(w)
        if namespace:
            at(namespace).webhooks.append(f"{w.get('kind')}/{_meta(w).get('name')}")
    for crd in data.crds:
        service = ((((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {})
                   .get("clientConfig") or {}).get("service") or {}
        if _is_dynamo_crd(crd) and service.get("namespace") in found:
            found[service["namespace"]].crds.append(_meta(crd).get("name", "?"))
    return found


# --- The checks ---------------------------------------------------------------------------------


def _version(data: ClusterData, report: Report) -> None:
    supported = versions.SUPPORTED_KUBE_VERSION
    try:
        ok = versions.satisfies(data.server_version, supported)
        detail = f"{data.server_version} {'is' if ok else 'is NOT'} within {supported} (dynamo-platform chart)"
    except ValueError:
        ok, detail = False, f"{data.server_version!r} is not a version Helm can compare with {supported}"
    report.checks.append(Check("kubernetes version", ok, detail))
    if not ok:
        report.problems.append(Problem(
            "cluster", "kubernetes version",
            f"the server is {data.server_version}; the dynamo-platform chart declares kubeVersion {supported} "
            "(its CRDs rely on the validation ratcheting Kubernetes 1.30 turned on), so Helm refuses to install it",
            "Upgrade the cluster to a Kubernetes version within that range (the lab runs v1.34)"))


def _operators(cfg: StackConfig, stack: str, data: ClusterData, report: Report) -> None:
    p = cfg.platform
    found = installations(data)
    orphans = [i for i in found.values() if i.webhooks and not i.operators]
    for inst in orphans:
        report.problems.append(Problem(
            "cluster", "dynamo webhooks",
            f"{', '.join(inst.webhooks)} call a Dynamo webhook service in {inst.namespace}, where no Dynamo operator "
            "runs: left over from an uninstalled operator, they reject every DynamoGraphDeployment (failure "
            "policy Fail)",
            "Delete them: " + "; ".join(f"kubectl delete {w.lower().split('/')[0]} {w.split('/')[1]}"
                                         for w in inst.webhooks)))
    running = [i for i in found.values() if i.operators]
    manage_off = f"`pulumi config set --path platform.manage false --stack {stack}`"
    if p.manage:
        foreign = [i for i in running if i.namespace != p.namespace or i.releases - {p.release_name}]
        for inst in foreign:
            report.problems.append(Problem(
                "platform", "dynamo operator",
                f"a Dynamo operator is already installed ({inst.describe()}); this stack would install a second "
                f"cluster-wide one (release {p.release_name} in {p.namespace}), and the two would fight over the same "
                "CRDs and admission webhooks",
                f"Uninstall it ({inst.uninstall()}), or use it from this stack: {manage_off}"))
        ours = [i for i in running if i not in foreign]
        if foreign:
            detail = f"another installation in {', '.join(i.namespace for i in foreign)}"
        elif ours:
            detail = f"this stack's release {p.release_name} is installed in {p.namespace}"
        else:
            detail = f"none installed; this stack installs release {p.release_name} in {p.namespace}"
        ok = not foreign
    else:
        has_crd = any(_meta(c).get("name") == GRAPH_CRD for c in data.crds)
        ok = len(running) == 1 and has_crd
        if not running or not has_crd:
            missing = "no Dynamo operator is installed" if not running else f"the {GRAPH_CRD} CRD is missing"
            report.problems.append(Problem(
                "platform", "dynamo operator",
                f"platform.manage is false, so this stack relies on an installed operator, but {missing}",
                "Deploy the stack that owns the platform first (the one with platform.manage: true), or let this "
                f"one install it: `pulumi config set --path platform.manage true --stack {stack}`"))
        elif len(running) > 1:
            report.problems.append(Problem(
                "platform", "dynamo operator",
                f"{len(running)} Dynamo operators are installed ({'; '.join(i.describe() for i in running)}); "
                "cluster-wide operators fight over the same CRDs and webhooks",
                f"Keep one: uninstall the others ({' / '.join(i.uninstall() for i in running[1:])})"))
        detail = (f"uses the operator in {running[0].namespace} (platform.manage: false)" if ok else
                  "platform.manage: false and no single installed operator to use")
    if orphans:
        detail += f"; leftover Dynamo webhooks in {', '.join(i.namespace for i in orphans)}"
    report.checks.append(Check("dynamo operator", ok and not orphans, detail))
    _crd_owners(cfg, data, report)


def _crd_owners(cfg: StackConfig, data: ClusterData, report: Report) -> None:
    """Dynamo CRDs that another Helm release owns (an older Dynamo's CRD chart, say)."""
    p = cfg.platform
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)
    for crd in data.crds:
        annotations = _meta(crd).get("annotations") or {}
        release = annotations.get("meta.helm.sh/release-name")
        namespace = annotations.get("meta.helm.sh/release-namespace", "?")
        if _is_dynamo_crd(crd) and release and (not p.manage or (namespace, release) != (p.namespace, p.release_name)):
            owners[(namespace, release)].append(_meta(crd).get("name", "?"))
    if not p.manage:
        return  # an installed platform's CRDs are whatever it installed; this stack does not touch them
    for (namespace, release), crds in owners.items():
        report.problems.append(Problem(
            "platform", "dynamo CRDs",
            f"{', '.join(sorted(crds))} belong to Helm release {release} in {namespace}; the operator this stack "
            "installs applies its own CRDs over them, and the two installations would fight over them",
            f"Uninstall that release (`helm uninstall {release} -n {namespace}`; deleting CRDs deletes every "
            f"DynamoGraphDeployment), or use the installed platform: `pulumi config set --path platform.manage "
            f"false --stack {report.stack}`"))


def _namespace(name: str, key: str, stack: str, data: ClusterData, report: Report) -> None:
    ns = data.namespaces.get(name)
    if ns is None:
        report.checks.append(Check(key, True, f"{name} does not exist yet; this stack creates it"))
        return
    owner = (_meta(ns).get("labels") or {}).get(STACK_LABEL)
    phase = (ns.get("status") or {}).get("phase")
    if phase == "Terminating":
        problem, fix = (f"namespace {name} is being deleted",
                        f"Wait until it is gone (`kubectl get namespace {name}` finds nothing), then deploy")
    elif owner == stack:
        report.checks.append(Check(key, True, f"{name} is this stack's ({STACK_LABEL}={stack})"))
        return
    elif owner:
        problem = f"namespace {name} belongs to stack {owner} ({STACK_LABEL}={owner})"
        fix = (f"Remove that stack's deployment first (`pulumi destroy --stack {owner}`), or set {key} to another "
               f"namespace: `pulumi config set --path {key} <name> --stack {stack}`")
        if key == "platform.namespace":
            fix = (f"Let stack {owner} own the platform and use it from this one: `pulumi config set --path "
                   f"platform.manage false --stack {stack}`; or remove it (`pulumi destroy --stack {owner}`)")
    else:
        problem = (f"namespace {name} exists and is not this stack's (no {STACK_LABEL} label): `pulumi up` would "
                   f"take it over, and `pulumi destroy` would delete it with everything in it")
        fix = (f"Set {key} to a free namespace (`pulumi config set --path {key} <name> --stack {stack}`), or delete "
               f"{name}; if this stack created it before dynamo-lab labelled its namespaces: `kubectl label "
               f"namespace {name} {STACK_LABEL}={stack}`")
    report.checks.append(Check(key, False, problem))
    report.problems.append(Problem(key, "namespace", problem, fix))


def _operator_removal(cfg: StackConfig, stack: str, data: ClusterData, report: Report) -> None:
    """platform.manage turned off in the stack that installed the platform: `pulumi up` uninstalls the
    operator, and the graphs of other stacks that rely on it could no longer be deleted (the operator
    removes a DynamoGraphDeployment's finalizer), their namespaces left hanging in Terminating."""
    p = cfg.platform
    ns = data.namespaces.get(p.namespace)
    if p.manage or ns is None or (_meta(ns).get("labels") or {}).get(STACK_LABEL) != stack:
        return
    others = sorted((owner, name) for name, n in data.namespaces.items()
                    if name != p.namespace and (owner := (_meta(n).get("labels") or {}).get(STACK_LABEL))
                    and owner != stack)
    if not others:
        return
    where = ", ".join(f"{name} (stack {owner})" for owner, name in others)
    report.problems.append(Problem(
        "platform", "dynamo operator removal",
        f"this stack installed the platform in {p.namespace} ({STACK_LABEL}={stack}) and platform.manage is now "
        f"false, so `pulumi up` would uninstall the operator while other stacks' graph namespaces remain: {where}. "
        "Their DynamoGraphDeployments could then never be deleted (the operator removes their finalizer) and "
        "the namespaces would hang in Terminating",
        "Destroy those stacks first (" + "; ".join(f"`pulumi destroy --stack {o}`" for o in
                                                   dict.fromkeys(o for o, _ in others))
        + f"), or keep the platform here: `pulumi config set --path platform.manage true --stack {stack}`"))


def _pod_security(cfg: StackConfig, data: ClusterData, report: Report) -> None:
    """The Pod Security level the graph namespace will enforce, against what it enforces now. The
    stack labels the namespace itself, so this informs; a namespace the stack would take over is
    already a problem of its own (graph.namespace)."""
    name, needed = cfg.graph.namespace, security.pod_security_level(cfg)
    why = security.level_reason(cfg)
    ns = data.namespaces.get(name)
    current = (_meta(ns).get("labels") or {}).get(security.ENFORCE_LABEL) if ns is not None else None
    if ns is None:
        now = "it does not exist yet"
    elif current is None:
        now = "it has no Pod Security label now (the cluster's default level applies until then)"
    else:
        now = f"it enforces {current} now"
    report.checks.append(Check("pod security", True, f"{name} will enforce {needed} (`pulumi up` labels it): "
                                                      f"{why}; {now}"))


def cluster_checks(cfg: StackConfig, stack: str, data: ClusterData, report: Report) -> None:
    _version(data, report)
    _operators(cfg, stack, data, report)
    _operator_removal(cfg, stack, data, report)
    _pod_security(cfg, data, report)
    if cfg.platform.manage:
        _namespace(cfg.platform.namespace, "platform.namespace", stack, data, report)
    _namespace(cfg.graph.namespace, "graph.namespace", stack, data, report)
