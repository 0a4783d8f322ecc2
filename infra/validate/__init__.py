"""Checks across keys: the graph a stack file describes must be one Dynamo can serve.

Each check reads the resolved stack (infra/resolved.py: defaults filled, names and contexts derived
once) and returns (key path, message) pairs; `infra.load` raises them together as one ConfigError.
Every name that points at something (a worker group, a GPU class) must resolve, with "did you mean".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from infra import names, payloads
from infra.catalogue import DEFAULT_GPU_CLASSES
from infra.config.fields import (
    did_you_mean,
    dns_label,
    node_path,
)
from infra.config.workers import MAX_WORKERS
from infra.resolved import derived_context
from infra.validate.topology import spread, tensor_parallel, transfer

if TYPE_CHECKING:
    from infra.resolved import ResolvedStack

Problems = list[tuple[str, str]]


def _unknown(kind: str, name: str, known: list[str], where: str) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name, known) or '.'} {where}: {', '.join(known) or 'none'}"


def _names(r: ResolvedStack) -> Problems:
    cfg, found = r.config, []
    seen: set[str] = set()
    for g in cfg.workers:
        if g.name in seen or g.name == "frontend":
            found.append((f"workers.{g.name}.name", f"{g.name!r} is used twice (the frontend is named 'frontend'); "
                          "give each worker group its own name"))
        seen.add(g.name)
        service = r.service(g)
        if len(service) > names.LABEL_MAX:
            found.append((f"workers.{g.name}.name", f"the operator names this group's Service {service!r}, "
                          f"{len(service)} characters, more than the {names.LABEL_MAX} Kubernetes allows; "
                          f"shorten the group name to at most {names.component_name_max(r.graph)} "
                          "characters, or graph.name"))
    # graph.name's own check covers a name written; one taken from the stack is judged here, where
    # what derives from it is known (the stack name may be longer than a graph's).
    unset = f"unset, the graph is named after the stack: {r.graph!r}, {len(r.graph)} characters"
    set_it = f"pulumi config set --path graph.name <name> --stack {r.name}"
    frontend = names.service(r.graph, "frontend")
    if len(frontend) > names.LABEL_MAX:
        found.append(("graph.name", f"{unset}; the operator would name the frontend's Service {frontend!r}, "
                      f"more than the {names.LABEL_MAX} characters Kubernetes allows. Give the graph a name of at "
                      f"most {names.GRAPH_NAME_MAX} characters: {set_it}"))
    elif cfg.probe.enabled and len(r.graph) > names.GRAPH_NAME_MAX:
        job = len(r.graph) + len(f"{names.probe_base('')}-initiator-") + names.DIGEST_CHARS
        found.append(("graph.name", f"{unset}; the probe's Job `<graph>-kv-probe-initiator-<digest>` would be "
                      f"{job} characters, more than the {names.LABEL_MAX} Kubernetes allows. Give the graph a name of "
                      f"at most {names.GRAPH_NAME_MAX} characters: {set_it}"))
    return found


def _gpu_classes(r: ResolvedStack) -> Problems:
    cfg = r.config
    classes = sorted(cfg.gpu_classes)
    # A stack file's gpuClasses replaces the defaults whole: a default class it leaves out is gone.
    replaced = ("; gpuClasses in this stack file replaces the default classes, so copy each one you still use "
                "from docs/configuration.md (\"GPU classes and node placement\")")
    return [(f"workers.{g.name}.gpuClass", _unknown("GPU class", g.gpu_class, classes,
                                                     "Defined classes (add one under gpuClasses)")
             + (replaced if g.gpu_class in DEFAULT_GPU_CLASSES else ""))
            for g in cfg.workers if g.gpu_class not in cfg.gpu_classes]


def _shape(r: ResolvedStack) -> Problems:
    """Aggregated or disaggregated, and something serves each side."""
    cfg = r.config
    roles = {g.role for g in cfg.workers}
    if "agg" in roles and roles & {"prefill", "decode"}:
        agg = [g.name for g in cfg.workers if g.role == "agg"]
        return [("workers", f"agg groups ({', '.join(agg)}) are mixed with prefill/decode groups in one graph; "
                 "a graph is either aggregated or disaggregated. Deploy them as separate stacks, or give every "
                 "group role prefill or decode")]
    if roles & {"prefill", "decode"} and roles != {"prefill", "decode"}:
        has, lacks = ("prefill", "decode") if "prefill" in roles else ("decode", "prefill")
        return [("workers", f"a disaggregated graph needs both prefill and decode groups; this one has {has} "
                 f"but no {lacks}. Add a group with role: {lacks}")]
    found: Problems = []
    for side in sorted(roles):
        groups = [g for g in cfg.workers if g.role == side]
        if sum(g.replicas for g in groups) == 0:
            names = ", ".join(g.name for g in groups)
            what = "no worker would serve a request" if side == "agg" else \
                f"every request would wait forever for a {side} worker"
            found.append((f"workers.{groups[0].name}.replicas",
                          f"the {side} side ({names}) has 0 replicas in all, so {what}. Give it at least 1"))
    return found


def _workers(r: ResolvedStack) -> Problems:
    """No more workers in all than one group may run (MAX_WORKERS): each group within its bound, many
    groups could still ask the sizing to place hundreds of thousands."""
    groups = r.active
    total = sum(g.replicas for g in groups)
    if total <= MAX_WORKERS:
        return []
    more = len(groups) - 3
    each = ", ".join(f"{g.name} {g.replicas:,}" for g in groups[:3]) + (
        f" and {more} more group{'s' * (more > 1)}" if more > 0 else "")
    return [("workers", f"the groups run {total:,} workers in all ({each}), more than the {MAX_WORKERS:,} a stack "
             "may run (as one group may): the sizing and preflight place each worker on its class's nodes one by "
             f"one, and {MAX_WORKERS:,} is far beyond the clusters dynamo-lab sizes. Lower replicas to "
             f"{MAX_WORKERS:,} in all, or deploy the groups as several stacks")]


def _context(r: ResolvedStack) -> Problems:
    """Every worker's context length (vLLM --max-model-len) holds the requests the stack is sized for
    and fits the model; the benchmark's requests fit it too."""
    cfg = r.config
    w, m = cfg.workload, cfg.model
    needed = w.input_tokens + w.output_tokens
    sized_for = (f"the requests this stack is sized for: {w.input_tokens:,} input tokens (workload.inputTokens) + "
                 f"{w.output_tokens} output tokens (workload.outputTokens) = {needed:,}")
    most = m.max_position_embeddings
    found: Problems = []

    def check(key: str, text: str, tokens: int, smaller: str) -> None:
        if tokens < needed:
            found.append((key, f"{text} ({tokens:,} tokens) is shorter than {sized_for}; vLLM would reject every "
                          f"one. Raise it to at least {needed}, or {smaller}"))
        elif most is not None and tokens > most:
            found.append((key, f"{text} ({tokens:,} tokens) is longer than {m.name}'s context "
                          f"(max_position_embeddings {most:,} in its config.json); vLLM refuses to start with "
                          f"a longer one. Lower it to at most {most}, or {smaller}"))

    if w.max_model_len is not None:
        check("workload.maxModelLen", f"maxModelLen {w.max_model_len}", w.max_model_len,
              "remove it (default: inputTokens + outputTokens, rounded up to a 16-token block)")
    for g in cfg.workers:
        value = g.extra_arg("--max-model-len")
        if value is None:
            continue
        if r.context(g) is None:  # resolve() found no token count in it
            found.append((f"workers.{g.name}.extraArgs", f"--max-model-len {value!r} is not a token count; "
                          "dynamo-lab checks the KV pool against a fixed length (and vLLM's -1/auto would "
                          "change with the pool). Write e.g. --max-model-len 8192, or remove it to use "
                          "workload.maxModelLen"))
        else:
            check(f"workers.{g.name}.extraArgs", f"--max-model-len {value}", r.context(g).tokens, "remove it")
    if w.max_model_len is None and most is not None:
        derived = derived_context(w)
        if needed > most:
            found.append(("workload.inputTokens", f"{sized_for}, longer than {m.name}'s context "
                          f"(max_position_embeddings {most:,}); vLLM would reject every request. Lower "
                          "workload.inputTokens or workload.outputTokens"))
        elif derived > most:  # rounding up to a block must not pass the model's context
            found.append(("workload.maxModelLen", f"the default context, {needed:,} tokens rounded up to "
                          f"{derived:,}, is longer than {m.name}'s {most:,}. Write workload.maxModelLen: {most}"))
    b = cfg.benchmark
    if b.enabled and not found:
        bench = b.prefix_tokens + b.unique_tokens + b.output_tokens
        shortest = min(r.context(g).tokens for g in cfg.workers)
        if bench > shortest:
            found.append(("benchmark", f"the benchmark's requests take {bench:,} tokens (prefixTokens "
                          f"{b.prefix_tokens} + uniqueTokens {b.unique_tokens} + outputTokens {b.output_tokens}), "
                          f"more than the {shortest:,}-token context of the workers (vLLM --max-model-len); "
                          "vLLM would reject every one. Shorten the benchmark's requests, or raise "
                          "workload.maxModelLen"))
    return found


def _group_refs(r: ResolvedStack) -> Problems:
    """Keys that name a worker group: the probe's and each measured throughput's."""
    cfg = r.config
    by_name = {g.name: g for g in cfg.workers}
    found: Problems = []

    def check(key: str, name: str, role: str, why: str) -> None:
        groups = sorted(g.name for g in cfg.workers if g.role == role)
        if name not in by_name:
            found.append((key, _unknown(f"{role} group", name, groups, f"{why}. {role.capitalize()} groups")))
        elif by_name[name].role != role:
            found.append((key, f"{name!r} is a {by_name[name].role} group, not a {role} group; {why}. "
                          f"{role.capitalize()} groups: {', '.join(groups) or 'none'}"))

    probe = "the probe measures the prefill -> decode KV path"
    if cfg.probe.from_group is not None:
        check("probe.fromGroup", cfg.probe.from_group, "prefill", probe)
    if cfg.probe.to_group is not None:
        check("probe.toGroup", cfg.probe.to_group, "decode", probe)
    if cfg.probe.enabled and not any(g.role == "prefill" for g in cfg.workers):
        found.append(("probe.enabled", "this graph is aggregated: there is no prefill -> decode KV transfer to "
                      "measure. Set probe.enabled: false"))
    seen = set()
    for i, m in enumerate(cfg.sizing.measured):
        why = "a measured throughput belongs to a prefill -> decode path"
        check(f"sizing.measured[{i}].fromGroup", m.from_group, "prefill", why)
        check(f"sizing.measured[{i}].toGroup", m.to_group, "decode", why)
        if (m.from_group, m.to_group) in seen:
            found.append((f"sizing.measured[{i}]", f"{m.from_group} -> {m.to_group} is measured twice; keep one"))
        seen.add((m.from_group, m.to_group))
    return found


def _benchmark(r: ResolvedStack) -> Problems:
    """The benchmark installs AIPerf from hash-pinned requirements, which hold one version."""
    cfg = r.config
    locked = payloads.locked_aiperf()
    if cfg.benchmark.aiperf_version != locked:
        return [("benchmark.aiperfVersion", f"{cfg.benchmark.aiperf_version} is not the AIPerf the benchmark Job "
                 f"installs: it installs {locked} and each of its dependencies from hash-pinned requirements "
                 f"(infra/payloads/{payloads.AIPERF_REQUIREMENTS}), so a package that changed cannot run. Remove "
                 f"aiperfVersion (or write {locked}); for another version, change its default and run "
                 "python3 dev.py lock-bench")]
    return []


def _namespaces(r: ResolvedStack) -> Problems:
    cfg = r.config
    if cfg.platform.manage and cfg.graph.namespace == cfg.platform.namespace:
        return [("graph.namespace", f"{cfg.graph.namespace!r} is also platform.namespace; the graph gets its own "
                 "namespace so it can be removed without touching the operator. Remove graph.namespace (default: "
                 "dynamo-lab-<stack>) or pick another")]
    return []


# Directories of a node that a model cache may not be in: each with whose it is. The system's own
# (its scheduled jobs and privilege state included: cron and at read /var/spool, sudo keeps its
# timestamps in /var/lib/sudo); the kubelet's; the container runtimes' (containerd, CRI-O, Docker);
# the network plugins' (CNI configuration, binaries and state, Calico, Cilium); the Kubernetes
# distributions' (kubeadm under /etc/kubernetes, k3s and RKE2 under /var/lib/rancher and
# /etc/rancher, k0s, etcd). Their default locations, from each project's docs. The cache's own last
# component, dynamo-lab-cache.<namespace> (models.NODE_CACHE_PREFIX), is never one of them nor holds
# one, so only what lies above it can be: each of its prefixes is judged.
PROTECTED = {
    **dict.fromkeys(("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
                     "/sbin", "/sys", "/usr", "/var/log", "/var/lib/dpkg", "/var/lib/rpm", "/var/lib/apt",
                     "/var/lib/systemd", "/var/lib/private", "/var/lib/sudo", "/var/lib/polkit-1", "/var/backups",
                     "/var/spool", "/var/mail"), "the node's system"),
    **dict.fromkeys(("/run", "/var/run"), "the node's runtime state (container runtime and kubelet sockets)"),
    "/var/lib/kubelet": "the kubelet (every pod's volumes and Secrets)",
    **dict.fromkeys(("/var/lib/containerd", "/opt/containerd"), "containerd"),
    **dict.fromkeys(("/var/lib/containers", "/var/lib/crio"), "CRI-O and Podman (image and container storage)"),
    **dict.fromkeys(("/var/lib/docker", "/var/lib/dockershim", "/var/lib/cri-dockerd"), "Docker"),
    **dict.fromkeys(("/opt/cni", "/var/lib/cni", "/var/lib/calico", "/var/lib/cilium"),
                    "the network plugin (CNI binaries and state)"),
    **dict.fromkeys(("/var/lib/rancher", "/var/lib/k0s", "/var/lib/etcd", "/var/lib/kube-proxy",
                     "/var/lib/minikube"), "the Kubernetes distribution (k3s, RKE2, k0s, etcd)"),
}


def _within(path: str, tree: str) -> bool:
    return tree == "/" or path == tree or path.startswith(tree + "/")


def _protected(path: str) -> str | None:
    """Why the node directory `path` (normalized) is no place for a model cache, or None: each of its
    prefixes from the root down against PROTECTED, so a directory of the node's refuses it wherever it
    appears in the joined path, in hostPath or formed with the namespace."""
    parts = path.strip("/").split("/")
    for prefix in ("/" + "/".join(parts[:n]) for n in range(1, len(parts) + 1)):
        if (whose := PROTECTED.get(prefix)) is not None:
            return f"is {'' if prefix == path else 'inside '}{prefix}, which belongs to {whose}"
    return None


def _absolute(path: str) -> str | None:
    if not path.startswith("/"):
        return (f"{path!r} is not an absolute path; the cache is the same directory on every GPU node, named "
                "from the node's root. Write an absolute path, e.g. /var/lib/dynamo-lab/hf-cache")
    if ".." in path.split("/"):
        return (f"{path!r} contains '..', and the API server rejects a hostPath that does. Write the directory "
                "without it, e.g. /var/lib/dynamo-lab/hf-cache")
    return None


def _node_directory(r: ResolvedStack) -> Problems:
    """The node cache's directory, judged as the node sees it: `<hostPath>/dynamo-lab-cache.<graph
    namespace>` joined and normalized (ResolvedStack.node_cache_directory), not modelCache.hostPath
    alone. The pre-pull's root step makes it group-writable and every worker mounts it, so it must be
    the stack's own."""
    cfg = r.config
    mc = cfg.model_cache
    found: Problems = [(f"modelCache.allowedRoots[{i}]", why) for i, root in enumerate(mc.allowed_roots)
                       if (why := _absolute(root)) is not None]
    if (why := _absolute(mc.host_path)) is not None:
        return [("modelCache.hostPath", why), *found]
    if found:
        return found
    final = r.node_cache_directory
    formed = (f"the node cache directory would be {final!r}, formed from modelCache.hostPath {mc.host_path!r} and "
              f"graph.namespace {cfg.graph.namespace!r} (default: dynamo-lab-<stack>)")
    harm = ("the pre-pull's root step makes it group-writable (chgrp 0, chmod g+rwxs) and every worker's pod "
            "mounts it")
    if (why := _protected(final)) is not None:
        return [("modelCache.hostPath", f"{formed}. It {why}: {harm}, which would hand that part of the node to "
                 "the stack's pods, and modelCache.allowedRoots cannot allow it. Give the cache a directory of its "
                 "own, e.g. hostPath: /var/lib/dynamo-lab/hf-cache")]
    roots = [node_path(root) for root in mc.allowed_roots]
    if not any(_within(final, root) and final != root for root in roots):
        return [("modelCache.hostPath", f"{formed}. It is under none of the data roots a cache may use "
                 f"({', '.join(roots) or 'none'}; modelCache.allowedRoots): {harm}, so it must be a directory that "
                 "holds nothing else of the node's. Write a hostPath under one of them, e.g. "
                 "/var/lib/dynamo-lab/hf-cache, or add this disk's root to modelCache.allowedRoots")]
    return []


def _model_cache(r: ResolvedStack) -> Problems:
    cfg = r.config
    mc, problems = cfg.model_cache, []
    if mc.mode in ("hostPath", "nodeVolume"):
        problems += _node_directory(r)
    nodes = r.worker_classes
    if mc.mode == "nodeVolume":
        # Each GPU class with workers names a claim, <graph>-model-cache-<class>, and its volume. A
        # worker's class that is not defined is _group_refs' one error (did you mean), not a second here.
        for cls in (n for n in nodes if n in cfg.gpu_classes):
            claim = r.node_cache_claim(cls)
            try:
                dns_label(claim)
            except ValueError:
                problems.append((f"gpuClasses.{cls}", f"the node cache's claim for this class would be named "
                                 f"{claim!r}, which is not a DNS label (lowercase letters, digits and '-', at most "
                                 "63 characters), so the API server would refuse it. Rename the class, e.g. "
                                 f"{re.sub(r'[^a-z0-9-]+', '-', cls.lower()).strip('-')[:20] or 'gpu'!r}, or "
                                 "shorten graph.name"))
    count = sum(cfg.gpu_classes[n].nodes for n in nodes if n in cfg.gpu_classes)
    if mc.mode == "pvc" and mc.pvc.access_mode == "ReadWriteOnce" and count > 1:
        several = {n: f" ({cfg.gpu_classes[n].nodes} nodes)" if cfg.gpu_classes[n].nodes > 1 else ""
                   for n in nodes if n in cfg.gpu_classes}
        where = "; ".join(f"{n}{several[n]}: {', '.join(g.name for g in r.placement.active_on(n))}" for n in several)
        problems.append(("modelCache.pvc.accessMode", f"ReadWriteOnce lets one node mount the claim, but the "
                         f"workers run on {count} nodes ({where}); the pods on the other "
                         f"node{'s' * (count > 2)} would never start. Write accessMode: ReadWriteMany (a storage "
                         "class that supports it, e.g. NFS), or use mode: hostPath (a directory on each node)"))
    return problems


def problems(r: ResolvedStack) -> Problems:
    """Every cross-key problem of the resolved stack; empty when the graph is one Dynamo can serve."""
    return (_names(r) + _gpu_classes(r) + _shape(r) + _workers(r) + transfer(r) + tensor_parallel(r) + spread(r)
            + _context(r) + _group_refs(r) + _namespaces(r) + _model_cache(r) + _benchmark(r))
