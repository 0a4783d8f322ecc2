"""Turn a mock run into what a reviewer reads: a YAML stream of manifests, or the JSON registrations."""

from __future__ import annotations

import json
from typing import Any

import yaml

from dynamo_lab.mockrun import Run

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
REDACTED = "<redacted>"


_FIRST = ("apiVersion", "kind", "metadata", "name", "namespace", "type", "replicas")


def ordered(value: Any) -> Any:
    """Stable, readable key order (the mock monitor's protobuf maps come back unordered): the keys
    a reader looks for first, then the rest alphabetically. Golden files and diffs depend on it."""
    if isinstance(value, dict):
        keys = [k for k in _FIRST if k in value] + sorted(k for k in value if k not in _FIRST)
        return {k: ordered(value[k]) for k in keys}
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


# The key Pulumi marks a secret value with in serialized inputs (its "secret envelope"), as the
# mocks hand it over: {SECRET_SIG: SECRET_SIG_VALUE, "value": <the value>}.
SECRET_SIG = "4dabf18193072939515e22adb298388d"


def _redact(type_token: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A Secret's values as <redacted>, under their own keys (a secret envelope is opened first)."""
    if type_token == "kubernetes:core/v1:Secret":
        inputs = dict(inputs)
        for key in ("data", "stringData"):
            value = inputs.get(key)
            if isinstance(value, dict) and SECRET_SIG in value:
                value = value.get("value") or {}
            if isinstance(value, dict):
                inputs[key] = {k: REDACTED for k in value}
    return inputs


def registrations(run: Run) -> list[dict[str, Any]]:
    """`render --json`: every registration in order, Secret values redacted."""
    return [{"type": r.type, "name": r.name, "inputs": ordered(_redact(r.type, r.inputs))}
            for r in run.resources]


def _release_doc(inputs: dict[str, Any]) -> dict[str, Any]:
    repo = (inputs.get("repositoryOpts") or {}).get("repo")
    return {"helmRelease": {
        "name": inputs.get("name"), "chart": inputs.get("chart"), "repository": repo,
        "version": inputs.get("version"), "namespace": inputs.get("namespace"),
        "values": ordered(inputs.get("values") or {}),
    }}


# Registration order of independent resources varies between runs; YAML output is sorted in the
# order a cluster needs them, so golden files and diffs are stable.
_KIND_RANK = {"Namespace": 0, "HelmRelease": 1, "Secret": 2, "ConfigMap": 3, "DynamoGraphDeployment": 9}


def doc_identity(doc: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of a rendered document; the Helm release counts as kind HelmRelease."""
    if "helmRelease" in doc:
        rel = doc["helmRelease"]
        return ("HelmRelease", rel.get("namespace") or "", rel.get("name") or "")
    meta = doc.get("metadata") or {}
    return (doc.get("kind") or "", meta.get("namespace") or "", meta.get("name") or "")


def _doc_key(doc: dict[str, Any]) -> tuple:
    kind, namespace, name = doc_identity(doc)
    return (_KIND_RANK.get(kind, 5), kind, namespace, name)


def manifests(run: Run) -> list[dict[str, Any]]:
    """Kubernetes objects as manifests, and the Helm release as a labelled pseudo-document."""
    docs = []
    for r in run.resources:
        if not r.custom or not r.type.startswith("kubernetes:"):
            continue
        if r.type == RELEASE_TYPE:
            docs.append(_release_doc(r.inputs))
        else:
            docs.append(ordered(_redact(r.type, r.inputs)))
    return sorted(docs, key=_doc_key)


PROVIDER_TYPE = "pulumi:providers:kubernetes"


def cluster(run: Run) -> str:
    """Which cluster the run's resources go to: the context (and kubeconfig) of its explicit provider."""
    providers = run.of_type(PROVIDER_TYPE)
    if not providers:
        return "no explicit provider (the default provider: kubectl's current context)"
    names = []
    for p in providers:
        kubeconfig = p.inputs.get("kubeconfig") or "the default kubeconfig"
        names.append(f"context {p.inputs.get('context')!r} of {kubeconfig}")
    return "; ".join(names)


def header(run: Run) -> str:
    """The comment lines `render` starts with: the stack and the cluster it deploys to."""
    return (f"# dynamo-lab render of stack {run.stack}: what `pulumi up --stack {run.stack}` declares.\n"
            f"# cluster: {cluster(run)}\n")


def documents(run: Run) -> list[tuple[str, dict[str, Any]]]:
    """Each manifest with the comment line `render` writes above it ("" for none)."""
    return [("# Helm release, installed by Pulumi's helm.v3.Release (not a Kubernetes object)\n"
             if "helmRelease" in doc else "", doc) for doc in manifests(run)]


def to_yaml(run: Run) -> str:
    return header(run) + "".join("---\n" + head + yaml.safe_dump(doc, sort_keys=False, width=200)
                                 for head, doc in documents(run))


def to_json(run: Run) -> str:
    return json.dumps(registrations(run), indent=2)
