"""What preflight reads from a cluster, and the two ways it reads it.

Live: the official Kubernetes client with the stack's own `kubernetes:context` (and
`kubernetes:kubeconfig`), the cluster `pulumi up` deploys to; read-only, seven GETs: the server
version, nodes, namespaces, deployments, CRDs and both kinds of admission webhook configuration.
Saved: the same objects as kubectl writes them, `save_command()`: the JSON of `kubectl version -o
json` followed by the JSON List of `kubectl get <RESOURCES> -A -o json`, in one file. Both end in
the same `ClusterData`; anything unreadable is a ClusterUnreadable (exit 2).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

import yaml

from infra.config.models import ClusterTarget
from infra.errors import UserError
from infra.units import parse_quantity

# What `kubectl get` saves, and the kind of each resource's objects.
RESOURCES = {
    "nodes": "Node",
    "namespaces": "Namespace",
    "deployments": "Deployment",
    "customresourcedefinitions": "CustomResourceDefinition",
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
}
READ_TIMEOUT_S = 20


class ClusterUnreadable(UserError):
    """The cluster (or the saved file) could not be read: preflight cannot answer (exit 2)."""


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, Fraction]
    unschedulable: bool = False
    # NoSchedule / NoExecute taints; the stack's pods tolerate none (dynamo-lab sets no tolerations).
    taints: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterData:
    source: str  # where it came from, for the report's first line
    server_version: str  # gitVersion, e.g. v1.34.1
    nodes: list[Node]
    namespaces: dict[str, dict[str, Any]]  # name -> the Namespace object
    deployments: list[dict[str, Any]]
    crds: list[dict[str, Any]]
    webhooks: list[dict[str, Any]]  # validating and mutating configurations (each keeps its kind)


def save_command(cluster: ClusterTarget, path: str = "cluster.json") -> str:
    """The one shell command that saves what `--from` reads, for this stack's cluster."""
    where = f"--context {shlex.quote(cluster.context)}"
    if cluster.kubeconfig:
        kubeconfig = cluster.kubeconfig
        quoted = "~/" + shlex.quote(kubeconfig[2:]) if kubeconfig.startswith("~/") else shlex.quote(kubeconfig)
        where = f"--kubeconfig {quoted} {where}"  # a leading ~/ stays unquoted so the shell expands it
    return (f"{{ kubectl {where} version -o json; kubectl {where} get {','.join(RESOURCES)} -A -o json; }}"
            f" > {shlex.quote(path)}")


def _node(obj: dict[str, Any], source: str) -> Node:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = meta.get("name", "?")
    try:
        allocatable = {k: parse_quantity(v) for k, v in ((obj.get("status") or {}).get("allocatable") or {}).items()}
    except ValueError as exc:
        raise ClusterUnreadable(f"{source}: node {name}: status.allocatable: {exc}") from None
    taints = [f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
              for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return Node(name=name, labels=dict(meta.get("labels") or {}), allocatable=allocatable,
                unschedulable=bool(spec.get("unschedulable")), taints=taints)


def from_objects(version: dict[str, Any], items: list[dict[str, Any]], source: str) -> ClusterData:
    """ClusterData from a /version object and a list of objects of the RESOURCES kinds (others ignored)."""
    git_version = version.get("gitVersion")
    if not isinstance(git_version, str):
        raise ClusterUnreadable(f"{source}: no server version (gitVersion) in it")
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RESOURCES.values()}
    for obj in items:
        if isinstance(obj, dict) and obj.get("kind") in by_kind:
            by_kind[obj["kind"]].append(obj)
    for kind in ("Node", "Namespace"):  # every cluster has some: none means they were not saved
        if not by_kind[kind]:
            raise ClusterUnreadable(f"{source}: no {kind} objects in it")
    return ClusterData(
        source=source, server_version=git_version,
        nodes=[_node(n, source) for n in by_kind["Node"]],
        namespaces={n["metadata"]["name"]: n for n in by_kind["Namespace"]},
        deployments=by_kind["Deployment"], crds=by_kind["CustomResourceDefinition"],
        webhooks=by_kind["ValidatingWebhookConfiguration"] + by_kind["MutatingWebhookConfiguration"])


def documents(text: str, source: str) -> list[Any]:
    """The JSON documents of a file, one after another (what `{ cmd1; cmd2; } > file` writes)."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return docs
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise ClusterUnreadable(f"{source}: not JSON at line {exc.lineno} ({exc.msg}); save it with "
                                    "kubectl's `-o json`") from None
        docs.append(doc)


def from_saved(text: str, source: str) -> ClusterData:
    """ClusterData from saved kubectl output: `kubectl version -o json` (or a /version object) and
    `kubectl get ... -o json` Lists (or single objects), in any order."""
    version: Optional[dict[str, Any]] = None
    items: list[dict[str, Any]] = []
    for doc in documents(text, source):
        if not isinstance(doc, dict):
            continue
        if "serverVersion" in doc or "clientVersion" in doc:
            version = doc.get("serverVersion") or version
        elif "gitVersion" in doc:
            version = doc
        elif isinstance(doc.get("items"), list):
            items += doc["items"]
        else:
            items.append(doc)
    if version is None:
        raise ClusterUnreadable(f"{source}: no server version in it (kubectl version -o json could not "
                                "reach the cluster, or its output is missing)")
    return from_objects(version, items, source)


def read_file(path: str) -> ClusterData:
    try:
        text = Path(path).read_text() if path != "-" else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterUnreadable(f"cannot read {path}: {exc}") from None
    return from_saved(text, "stdin" if path == "-" else path)


def kubeconfig_path(cluster: ClusterTarget) -> str:
    """The kubeconfig the stack's provider reads: kubernetes:kubeconfig, else KUBECONFIG, else ~/.kube/config."""
    if cluster.kubeconfig:
        return os.path.expanduser(cluster.kubeconfig)
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _reason(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        hint = (" (the context's user needs get/list on nodes, namespaces, deployments, CRDs and webhook "
                "configurations)") if status in (401, 403) else ""
        return f"HTTP {status} {getattr(exc, 'reason', '') or ''}".rstrip() + hint
    reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps the connection error
    text = str(reason if isinstance(reason, BaseException) else exc) or type(exc).__name__
    return " ".join(text.split())


def _contexts_hint(path: str, context: str) -> str:
    """When the context is not in the kubeconfig: the ones that are (what `pulumi config set` could name)."""
    names: list[str] = []
    for part in path.split(os.pathsep):
        try:
            doc = yaml.safe_load(Path(part).read_text()) or {}
            names += [c["name"] for c in doc.get("contexts") or [] if isinstance(c, dict) and "name" in c]
        except (OSError, yaml.YAMLError, AttributeError):
            continue  # the kubeconfig's own problem is reported already
    if context in names:
        return ""
    return (f"; its contexts: {', '.join(names) or 'none'} (pulumi config set kubernetes:context <context> "
            "--stack <stack>)")


def read_live(cluster: ClusterTarget) -> ClusterData:
    """Read the stack's cluster with its own context: GET requests only."""
    try:
        import kubernetes.client as k8s
        from kubernetes.config import new_client_from_config
    except ImportError:
        raise ClusterUnreadable("reading a live cluster needs the Kubernetes client, the `preflight` extra: "
                                "run `python3 dev.py preflight ...` (it installs it) or "
                                "`pip install 'dynamo-lab[preflight]'`; or pass --from FILE") from None
    path = kubeconfig_path(cluster)
    where = f"context {cluster.context!r} of {path}"
    if not any(os.path.isfile(p) for p in path.split(os.pathsep)):
        raise ClusterUnreadable(f"no kubeconfig at {path}: set kubernetes:kubeconfig in the stack file (or "
                                "KUBECONFIG) to the file holding its context, or pass --from FILE")
    configuration = k8s.Configuration()
    configuration.retries = False  # one attempt: an unreachable cluster is reported at once
    try:
        # persist_config=False: a refreshed token is never written back into the kubeconfig.
        api = new_client_from_config(config_file=path, context=cluster.context, persist_config=False,
                                     client_configuration=configuration)
    except Exception as exc:  # any kubeconfig problem (missing context, bad auth) is one line
        raise ClusterUnreadable(f"cannot use {where}: {_reason(exc)}{_contexts_hint(path, cluster.context)}") from None
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    ext, admission = k8s.ApiextensionsV1Api(api), k8s.AdmissionregistrationV1Api(api)
    lists = {
        "Node": core.list_node, "Namespace": core.list_namespace,
        "Deployment": apps.list_deployment_for_all_namespaces,
        "CustomResourceDefinition": ext.list_custom_resource_definition,
        "ValidatingWebhookConfiguration": admission.list_validating_webhook_configuration,
        "MutatingWebhookConfiguration": admission.list_mutating_webhook_configuration,
    }

    def raw(call) -> Any:
        response = call(_preload_content=False, _request_timeout=READ_TIMEOUT_S)
        return json.loads(response.data)

    try:
        with api:
            version = raw(k8s.VersionApi(api).get_code)
            # List items come without kind/apiVersion from the API server; kubectl adds them, so do we.
            items = [{**obj, "kind": kind} for kind, call in lists.items() for obj in raw(call).get("items") or []]
    except Exception as exc:  # connection, TLS, auth and HTTP errors alike: exit 2, one line
        raise ClusterUnreadable(f"could not read the cluster ({where}): {_reason(exc)}") from None
    return from_objects(version, items, f"cluster {where}")
