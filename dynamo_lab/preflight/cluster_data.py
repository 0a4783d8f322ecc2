"""What preflight reads from a cluster, and the two ways it reads it.

Live: the official Kubernetes client with the stack's own `kubernetes:context` (and
`kubernetes:kubeconfig`), the cluster `pulumi up` deploys to; read-only, eight GETs: the server
version, nodes, namespaces, deployments, CRDs, both kinds of admission webhook configuration and
StorageClasses. Saved: the same objects as kubectl writes them, `save_command()`: the JSON of
`kubectl version -o json` followed by the JSON List of `kubectl get <RESOURCES> -A -o json`, in one
file. Both end in the same `ClusterData`; anything unreadable is a ClusterUnreadable (exit 2). A
file saved before StorageClasses were part of it is still read: its `storage_classes` is None
(unknown), and the checks that need them say they could not check.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from dynamo_lab import bounded_read, stack_files
from infra import manifests
from infra.config.schema import ClusterTarget
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
    "storageclasses": "StorageClass",
}
READ_TIMEOUT_S = 20
# --from reads at most this much: saved data of a lab cluster is a few MB (CRDs are most of it);
# more is not kubectl's output of one (or it is /dev/zero), and is refused instead of read whole.
MAX_SAVED_BYTES = 128 * 1024 * 1024
# How to make a file --from reads: the fix of every "this is not saved cluster data" error.
RESAVE = ("save it again, unedited, with `kubectl version -o json` followed by `kubectl get "
          f"{','.join(RESOURCES)} -A -o json` (docs/preflight.md)")


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
    # storage.k8s.io/v1 StorageClasses; None: not known (a file saved without them, or whose cluster
    # has none: kubectl's output cannot tell the two apart).
    storage_classes: Optional[list[dict[str, Any]]] = None


def save_command(cluster: ClusterTarget, path: str = "cluster.json") -> str:
    """The one shell command that saves what `--from` reads, for this stack's cluster."""
    kubectl = manifests.kubectl(cluster)
    return (f"{{ {kubectl} version -o json; {kubectl} get {','.join(RESOURCES)} -A -o json; }}"
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


# The shape of every field the checks read, per kind ("*": every object): a dotted path ("[]" is
# each element of a list, "{}" each value of a map) and the JSON type it must have where present
# (null counts as absent, as the checks read it). Kubernetes and kubectl always write these so.
_STR, _OBJ, _LIST = (str,), (dict,), (list,)
SHAPES: dict[str, list[tuple[str, tuple[type, ...]]]] = {
    "*": [("metadata", _OBJ), ("metadata.name", _STR), ("metadata.namespace", _STR),
          ("metadata.labels", _OBJ), ("metadata.labels.{}", _STR),
          ("metadata.annotations", _OBJ), ("metadata.annotations.{}", _STR)],
    "Node": [("spec", _OBJ), ("spec.taints", _LIST), ("spec.taints[]", _OBJ), ("spec.taints[].key", _STR),
             ("spec.taints[].value", _STR), ("spec.taints[].effect", _STR), ("status", _OBJ),
             ("status.allocatable", _OBJ), ("status.allocatable.{}", (str, int, float))],
    "Namespace": [("status", _OBJ), ("status.phase", _STR)],
    "Deployment": [],
    "StorageClass": [("provisioner", _STR), ("volumeBindingMode", _STR)],
    "CustomResourceDefinition": [
        ("spec", _OBJ), ("spec.group", _STR), ("spec.names", _OBJ), ("spec.names.kind", _STR),
        ("spec.conversion", _OBJ), ("spec.conversion.webhook", _OBJ), ("spec.conversion.webhook.clientConfig", _OBJ),
        ("spec.conversion.webhook.clientConfig.service", _OBJ),
        ("spec.conversion.webhook.clientConfig.service.namespace", _STR)],
    **{kind: [("webhooks", _LIST), ("webhooks[]", _OBJ), ("webhooks[].rules", _LIST), ("webhooks[].rules[]", _OBJ),
              ("webhooks[].rules[].apiGroups", _LIST), ("webhooks[].rules[].apiGroups[]", _STR),
              ("webhooks[].rules[].resources", _LIST), ("webhooks[].rules[].resources[]", _STR),
              ("webhooks[].clientConfig", _OBJ), ("webhooks[].clientConfig.service", _OBJ),
              ("webhooks[].clientConfig.service.namespace", _STR)]
       for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")},
}
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
              bool: "true or false", type(None): "null"}


def _values(value: Any, path: str) -> list[tuple[str, Any]]:
    """(path, value) of everything at the dotted `path` under `value` (absent or null: nothing)."""
    found = [("", value)]
    for part in re.findall(r"\[\]|\{\}|[^.\[\]{}]+", path):
        step = []
        for at, v in found:
            if part == "[]":  # a list's elements (its own type was checked before)
                step += [(f"{at}[{i}]", e) for i, e in enumerate(v)] if isinstance(v, list) else []
            elif part == "{}":
                step += [(f"{at}.{k}", e) for k, e in v.items()] if isinstance(v, dict) else []
            elif isinstance(v, dict) and v.get(part) is not None:
                step.append((f"{at}.{part}" if at else part, v[part]))
        found = step
    return found


def shape_problem(obj: dict[str, Any]) -> Optional[str]:
    """What is wrong with the shape of an object the checks read ("metadata.labels.app is a list, not
    a string"), or None."""
    if not isinstance(obj.get("metadata"), dict) or not isinstance(obj["metadata"].get("name"), str):
        return "has no metadata.name"
    for path, types in SHAPES["*"] + SHAPES.get(obj.get("kind"), []):
        for at, value in _values(obj, path):
            if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
                want = " or ".join(dict.fromkeys(_JSON_TYPE[t] for t in types))
                return f"{at} is {_JSON_TYPE.get(type(value), type(value).__name__)}, not {want}"
    return None


def from_objects(version: dict[str, Any], items: list[dict[str, Any]], source: str,
                 storage_classes_listed: bool = True) -> ClusterData:
    """ClusterData from a /version object and a list of objects of the RESOURCES kinds (others ignored).
    storage_classes_listed: False when none in `items` may only mean they were not saved."""
    git_version = version.get("gitVersion") if isinstance(version, dict) else None
    if not isinstance(git_version, str):
        raise ClusterUnreadable(f"{source}: no server version (gitVersion) in it")
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RESOURCES.values()}
    for number, obj in enumerate(items, 1):
        if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and obj["kind"] in by_kind:
            problem = shape_problem(obj)
            if problem:
                name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
                what = (f"{obj['kind']} {name}" if isinstance(name, str)
                        else f"the {obj['kind']} that is object {number}")
                raise ClusterUnreadable(f"{source}: {what}: {problem}; this is not what kubectl saves: {RESAVE}")
            by_kind[obj["kind"]].append(obj)
    for kind in ("Node", "Namespace"):  # every cluster has some: none means they were not saved
        if not by_kind[kind]:
            raise ClusterUnreadable(f"{source}: no {kind} objects in it")
    return ClusterData(
        source=source, server_version=git_version,
        nodes=[_node(n, source) for n in by_kind["Node"]],
        namespaces={n["metadata"]["name"]: n for n in by_kind["Namespace"]},
        deployments=by_kind["Deployment"], crds=by_kind["CustomResourceDefinition"],
        webhooks=by_kind["ValidatingWebhookConfiguration"] + by_kind["MutatingWebhookConfiguration"],
        storage_classes=by_kind["StorageClass"] if storage_classes_listed or by_kind["StorageClass"] else None)


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
        except RecursionError:
            raise ClusterUnreadable(f"{source}: JSON nested deeper than Python reads; {RESAVE}") from None
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
            server = doc.get("serverVersion")
            if server is not None and not isinstance(server, dict):
                raise ClusterUnreadable(f"{source}: serverVersion is {_JSON_TYPE.get(type(server), 'a value')}, "
                                        f"not an object; {RESAVE}")
            version = server or version
        elif "gitVersion" in doc:
            version = doc
        elif "items" in doc:
            if not isinstance(doc["items"], list):
                raise ClusterUnreadable(f"{source}: a List whose items are not a list; {RESAVE}")
            items += doc["items"]
        else:
            items.append(doc)
    if version is None:
        raise ClusterUnreadable(f"{source}: no server version in it (kubectl version -o json could not "
                                "reach the cluster, or its output is missing)")
    # kubectl writes one List for all the kinds it was asked for: a file without a StorageClass was
    # saved without them (the command before they were added) or from a cluster that has none.
    return from_objects(version, items, source, storage_classes_listed=False)


def read_file(path: str, limit: int = MAX_SAVED_BYTES) -> ClusterData:
    """Saved cluster data from a file ('-': stdin), at most `limit` bytes of UTF-8 JSON."""
    source = "stdin" if path == "-" else path
    try:  # the lab's one bounded reader (bounded_read.py), as for stack files and kubeconfigs
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            data = bounded_read.bounded_bytes(stdin or io.BytesIO(sys.stdin.read(limit + 1).encode()), limit)
        else:
            data = bounded_read.bounded_bytes(path, limit)
    except OSError as exc:
        raise ClusterUnreadable(f"cannot read {path}: {exc}") from None
    except bounded_read.TooLarge:
        raise ClusterUnreadable(f"{source}: more than {limit // 2**20} MiB, more than saved cluster data "
                                f"is; is it the right file? {RESAVE[0].upper()}{RESAVE[1:]}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClusterUnreadable(f"{source}: not UTF-8 text (byte {exc.start}); {RESAVE}") from None
    return from_saved(text, source)


def kubeconfig_path(cluster: ClusterTarget) -> str:
    """The kubeconfig the stack's provider reads: kubernetes:kubeconfig, else KUBECONFIG, else ~/.kube/config."""
    if cluster.kubeconfig:
        return os.path.expanduser(cluster.kubeconfig)
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _reason(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        hint = (" (the context's user needs get/list on nodes, namespaces, deployments, CRDs, webhook "
                "configurations and storage classes)") if status in (401, 403) else ""
        return f"HTTP {status} {getattr(exc, 'reason', '') or ''}".rstrip() + hint
    reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps the connection error
    text = str(reason if isinstance(reason, BaseException) else exc) or type(exc).__name__
    return " ".join(text.split())


def _contexts_hint(path: str, context: str) -> str:
    """When the context is not in the kubeconfig: the ones that are (what `pulumi config set` could name)."""
    names: list[str] = []
    for part in path.split(os.pathsep):
        try:
            doc = stack_files.read_yaml(Path(part), part) or {}
            names += [c["name"] for c in doc.get("contexts") or [] if isinstance(c, dict) and "name" in c]
        except (UserError, AttributeError):
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
                                "`pip install '.[preflight]'` in the checkout; or pass --from FILE") from None
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
    storage = k8s.StorageV1Api(api)
    lists = {
        "Node": core.list_node, "Namespace": core.list_namespace,
        "Deployment": apps.list_deployment_for_all_namespaces,
        "CustomResourceDefinition": ext.list_custom_resource_definition,
        "ValidatingWebhookConfiguration": admission.list_validating_webhook_configuration,
        "MutatingWebhookConfiguration": admission.list_mutating_webhook_configuration,
        "StorageClass": storage.list_storage_class,
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
