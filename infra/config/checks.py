"""Checks across keys: the graph a stack file describes must be one Dynamo can serve.

Each check returns (key path, message) pairs; `config.load` raises them together as one ConfigError.
Every name that points at something (a worker group, a GPU class) must resolve, with "did you mean".
"""

from __future__ import annotations

import itertools
import re

from infra.config.fields import GPU_CAPABLE_TLS, NETWORK_TLS, did_you_mean, expand_tls
from infra.config.models import StackConfig, WorkerGroup

Problems = list[tuple[str, str]]
# Longest Dynamo-derived name per component: the operator names a component's Service
# `<graph>-<component>`, a DNS label of at most 63 characters.
SERVICE_NAME_MAX = 63


def _unknown(kind: str, name: str, known: list[str], where: str) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name, known) or '.'} {where}: {', '.join(known) or 'none'}"


def _names(cfg: StackConfig) -> Problems:
    found: Problems = []
    seen: set[str] = set()
    for g in cfg.workers:
        if g.name in seen or g.name == "frontend":
            found.append((f"workers.{g.name}.name", f"{g.name!r} is used twice (the frontend is named 'frontend'); "
                          "give each worker group its own name"))
        seen.add(g.name)
        service = f"{cfg.graph.name}-{g.name}"
        if len(service) > SERVICE_NAME_MAX:
            found.append((f"workers.{g.name}.name", f"the operator names this group's Service {service!r}, "
                          f"{len(service)} characters, more than the {SERVICE_NAME_MAX} Kubernetes allows; "
                          f"shorten the group name to at most {SERVICE_NAME_MAX - len(cfg.graph.name) - 1} "
                          "characters, or graph.name"))
    return found


def _gpu_classes(cfg: StackConfig) -> Problems:
    classes = sorted(cfg.gpu_classes)
    return [(f"workers.{g.name}.gpuClass", _unknown("GPU class", g.gpu_class, classes,
                                                     "Defined classes (add one under gpuClasses)"))
            for g in cfg.workers if g.gpu_class not in cfg.gpu_classes]


def _shape(cfg: StackConfig) -> Problems:
    """Aggregated or disaggregated, and something serves each side."""
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


def _cuda_over_tcp(g: WorkerGroup) -> bool:
    return g.kv_transfer.buffer_device == "cuda" and not expand_tls(g.kv_transfer.ucx_tls) & GPU_CAPABLE_TLS


def _transfer(cfg: StackConfig) -> Problems:
    """Each group's transport can move its buffers, and each prefill/decode pair can talk."""
    found: Problems = []
    for g in cfg.workers:
        if g.role != "agg" and _cuda_over_tcp(g):
            found.append((f"workers.{g.name}.kvTransfer.bufferDevice",
                          f"cuda buffers over UCX_TLS={g.kv_transfer.ucx_tls} (TCP only) crash UCX copying GPU memory "
                          "over TCP (segfault in uct_tcp_ep_am_bcopy). Write bufferDevice: cpu, or use a transport "
                          "that moves GPU memory (e.g. ucxTls: rc,cuda_copy on RDMA)"))
    prefill = [g for g in cfg.workers if g.role == "prefill"]
    decode = [g for g in cfg.workers if g.role == "decode"]
    for p, d in itertools.product(prefill, decode):
        pk, dk = p.kv_transfer, d.kv_transfer
        pair = f"prefill {p.name!r} and decode {d.name!r}"
        if pk.op != dk.op:
            found.append((f"workers.{d.name}.kvTransfer.connector",
                          f"{pair} use {pk.connector} and {dk.connector}: one side waits for the other to pull "
                          "and the other waits to push, so no KV ever moves. Give both the same connector"))
        if pk.buffer_device != dk.buffer_device:
            found.append((f"workers.{d.name}.kvTransfer.bufferDevice",
                          f"{pair} keep their KV transfer buffers in {pk.buffer_device} and {dk.buffer_device} "
                          "memory; both sides of a pair must describe the same kind of memory to NIXL. Give "
                          "both the same bufferDevice (cpu over TCP)"))
        shared = expand_tls(pk.ucx_tls) & expand_tls(dk.ucx_tls) & NETWORK_TLS
        if not shared:
            found.append((f"workers.{d.name}.kvTransfer.ucxTls",
                          f"{pair} share no transport that reaches from one pod to another (UCX_TLS "
                          f"{pk.ucx_tls} and {dk.ucx_tls}; self and shared memory never leave a pod), so UCX "
                          "cannot connect them. Give both the same ucxTls, e.g. tcp,self"))
    return found


def _int_flag(value: str) -> int | None:
    """vLLM's integer flags take 2048, and human forms like 2k (1000s) or 2K (1024s)."""
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", value.strip())
    if not match:
        return None
    number, suffix = match.groups()
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    return int(number) * scale


def _extra_args(cfg: StackConfig) -> Problems:
    """Settings in extraArgs that contradict the requests the stack is sized for."""
    found: Problems = []
    needed = cfg.workload.input_tokens + cfg.workload.output_tokens
    for g in cfg.workers:
        value = g.extra_arg("--max-model-len")
        if value is None:
            continue
        tokens = _int_flag(value)
        if tokens is None:
            found.append((f"workers.{g.name}.extraArgs", f"--max-model-len {value!r} is not a token count; vLLM "
                          "would refuse to start. Write e.g. --max-model-len 8192"))
        elif tokens < needed:
            found.append((f"workers.{g.name}.extraArgs",
                          f"--max-model-len {value} ({tokens:,} tokens) is shorter than the requests this stack "
                          f"is sized for: {cfg.workload.input_tokens:,} input tokens (workload.inputTokens) + "
                          f"{cfg.workload.output_tokens} output tokens (workload.outputTokens) = {needed:,}; vLLM "
                          f"would reject every one. Raise it to at least {needed}, or remove it"))
    return found


def _group_refs(cfg: StackConfig) -> Problems:
    """Keys that name a worker group: the probe's and each measured throughput's."""
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


def _namespaces(cfg: StackConfig) -> Problems:
    if cfg.platform.manage and cfg.graph.namespace == cfg.platform.namespace:
        return [("graph.namespace", f"{cfg.graph.namespace!r} is also platform.namespace; the graph gets its own "
                 "namespace so it can be removed without touching the operator. Remove graph.namespace (default: "
                 "dynamo-lab-<stack>) or pick another")]
    return []


def _model_cache(cfg: StackConfig) -> Problems:
    mc, problems = cfg.model_cache, []
    if mc.mode == "hostPath":
        path = mc.host_path
        if not path.startswith("/"):
            problems.append(("modelCache.hostPath", f"{path!r} is not an absolute path; the cache is the "
                             "same directory on every GPU node, named from the node's root. Write an "
                             "absolute path, e.g. /var/lib/dynamo-lab/hf-cache"))
        elif ".." in path.split("/"):
            problems.append(("modelCache.hostPath", f"{path!r} contains '..', and the API server rejects "
                             "a hostPath that does. Write the directory without it, e.g. "
                             "/var/lib/dynamo-lab/hf-cache"))
    nodes = cfg.worker_nodes
    if mc.mode == "pvc" and mc.pvc.access_mode == "ReadWriteOnce" and len(nodes) > 1:
        where = "; ".join(f"{n}: {', '.join(g.name for g in cfg.workers if g.gpu_class == n and g.replicas)}"
                          for n in nodes)
        problems.append(("modelCache.pvc.accessMode", f"ReadWriteOnce lets one node mount the claim, but the "
                         f"workers run on {len(nodes)} nodes ({where}); the pods on the other node would "
                         "never start. Write accessMode: ReadWriteMany (a storage class that supports it, "
                         "e.g. NFS), or use mode: hostPath (a directory on each node)"))
    return problems


def problems(cfg: StackConfig) -> Problems:
    """Every cross-key problem of `cfg`; empty when the graph is one Dynamo can serve."""
    return (_names(cfg) + _gpu_classes(cfg) + _shape(cfg) + _transfer(cfg) + _extra_args(cfg)
            + _group_refs(cfg) + _namespaces(cfg) + _model_cache(cfg))
