"""Pure builders: stack config and sizing in, Kubernetes manifests and Helm values out (no Pulumi)."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from infra.config.schema import ClusterTarget, NodeRequirement

from infra.names import DIGEST_CHARS

T = TypeVar("T")

# Marks each namespace a stack creates as that stack's own. `dynamo-lab preflight` reads it to tell
# a namespace this stack may reuse (its own, from an earlier `pulumi up`) from one it would take over.
STACK_LABEL = "dynamo-lab/stack"


# Marks the pods of each Job kind a stack runs, so the graph's NetworkPolicies can tell them apart
# (a Job's own `job-name` label carries its digest).
JOB_LABEL = "dynamo-lab/job"
MODEL_PULL_JOB, BENCHMARK_JOB, KV_PROBE_JOB = "model-pull", "benchmark", "kv-probe"


def kubectl(cluster: "ClusterTarget") -> str:
    """`kubectl` with the flags that name the stack's cluster, for every command the project prints:
    like the stack, the command reaches `kubernetes:context` (of `kubernetes:kubeconfig`), never
    the current context. A leading `~/` stays unquoted, so the shell that runs it expands it."""
    import shlex

    where = f"--context {shlex.quote(cluster.context)}"
    if cluster.kubeconfig:
        path = cluster.kubeconfig
        quoted = "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)
        where = f"--kubeconfig {quoted} {where}"
    return f"kubectl {where}"


def owner_labels(stack: str) -> dict[str, str]:
    """The labels of a namespace that `stack` creates and owns."""
    return {STACK_LABEL: stack}


def content_hash(value: Any, length: int = DIGEST_CHARS) -> str:
    """A short, stable digest of JSON-able content, for names that change when the content does.

    A Job's pod template cannot be changed in place; naming a run's ConfigMap and Jobs from the
    digest of everything they run makes a changed script or argument a new Job, which Pulumi
    creates while it deletes the old one.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def digest_named(build: Callable[[str], T]) -> T:
    """`build(digest)`, named from content_hash of `build("")`: the same objects without their names,
    since a name cannot hold the digest of itself."""
    return build(content_hash(build("")))


def digest_suffix(digest: str) -> str:
    """A name's `-<digest>` tail; none in the unnamed build that the digest is taken from."""
    return f"-{digest}" if digest else ""


def match_expressions(rules: list[NodeRequirement]) -> list[dict[str, Any]]:
    """Node selector requirements as `matchExpressions`, the API server's form (ANDed): a pod's node
    affinity and a PersistentVolume's node affinity alike."""
    expressions = []
    for req in rules:
        expr: dict[str, Any] = {"key": req.key, "operator": req.operator}
        if req.values:
            expr["values"] = list(req.values)
        expressions.append(expr)
    return expressions
