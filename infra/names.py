"""Every name a stack derives from its own: one function per name, and the length budget each leaves.

A stack names its graph (`graph.name`, default the stack name) and its namespace (`graph.namespace`,
default `dynamo-lab-<stack>`); every other object's name is built from those here and nowhere else
(tests/infra/test_one_definition.py finds a second builder). The schema reads the budgets
(`GRAPH_NAME_MAX`), the resolved stack (infra/resolved.py) the names of what it deploys, the builders
and the checks the same functions.
"""

from __future__ import annotations

# A Kubernetes name that becomes a label value, or a Service's DNS label: at most 63 characters.
LABEL_MAX = 63
# The digest a content-named object carries (manifests.content_hash): 10 hexadecimal characters.
DIGEST_CHARS = 10


def default_graph_namespace(stack: str) -> str:
    """One namespace per stack, so stacks that share a cluster never declare the same object."""
    return f"dynamo-lab-{stack}"


def service(graph: str, component: str) -> str:
    """The Service the Dynamo operator names for a graph component, `<graph>-<component>` (a DNS label)."""
    return f"{graph}-{component}"


def component_name_max(graph: str) -> int:
    """The longest component (worker group) name whose Service still fits LABEL_MAX."""
    return LABEL_MAX - len(graph) - 1


def model_cache_claim(graph: str) -> str:
    """The claim dynamo-lab creates for `modelCache.mode: pvc` when no claimName is given."""
    return f"{graph}-model-cache"


def node_cache_claim(graph: str, gpu_class: str) -> str:
    """nodeVolume: the claim of one GPU class's node, in the graph namespace."""
    return f"{graph}-model-cache-{gpu_class}"


def node_cache_volume(namespace: str, gpu_class: str) -> str:
    """nodeVolume: the (cluster-wide) PersistentVolume of one node, named after the graph namespace."""
    return f"{namespace}-model-cache-{gpu_class}"


def probe_base(graph: str) -> str:
    """The in-cluster probe's objects: `<graph>-kv-probe[-target|-initiator]-<digest>`."""
    return f"{graph}-kv-probe"


PROBE_ROLES = ("target", "initiator")


def model_pull_base(graph: str) -> str:
    """The pre-pull Jobs: `<graph>-model-pull[-<class>]-<digest>`, cut to fit LABEL_MAX."""
    return f"{graph}-model-pull"


def benchmark_base(graph: str) -> str:
    """The benchmark's ConfigMap and Job: `<graph>-bench-<digest>`."""
    return f"{graph}-bench"


def network_policy(graph: str, suffix: str) -> str:
    return f"{graph}-{suffix}"


# The longest name derived from the graph's whole: the probe's initiator Job,
# `<graph>-kv-probe-initiator-<digest>`, a Job's name, which must fit a 63-character label.
# (The pre-pull's names are cut to fit instead.)
GRAPH_NAME_MAX = LABEL_MAX - len(f"{probe_base('')}-{max(PROBE_ROLES, key=len)}-") - DIGEST_CHARS
