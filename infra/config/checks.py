"""Checks across keys: the graph a stack file describes must be one Dynamo can serve.

Each check returns (key path, message) pairs; `config.load` raises them together as one ConfigError.
"""

from __future__ import annotations

import difflib

from infra.config.models import GPU_CAPABLE_UCX_TLS, StackConfig


def problems(cfg: StackConfig) -> list[tuple[str, str]]:
    """Every cross-key problem of `cfg`; empty when the graph is one Dynamo can serve."""
    found: list[tuple[str, str]] = []
    classes = sorted(cfg.gpu_classes)
    names: set[str] = set()
    for g in cfg.workers:
        path = f"workers.{g.name}"
        if g.name in names or g.name == "frontend":
            found.append((f"{path}.name", f"{g.name!r} is used twice (the frontend is "
                             "named 'frontend'); give each worker group its own name"))
        names.add(g.name)
        if g.gpu_class not in cfg.gpu_classes:
            close = difflib.get_close_matches(g.gpu_class, classes, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            found.append((f"{path}.gpuClass", f"unknown GPU class {g.gpu_class!r}{hint} "
                             f"Defined classes: {', '.join(classes)} (add one under gpuClasses)"))
        if g.role != "agg" and g.kv_transfer.buffer_device == "cuda":
            tls = {t.strip() for t in g.kv_transfer.ucx_tls.split(",")}
            if not tls & GPU_CAPABLE_UCX_TLS:
                found.append((f"{path}.kvTransfer.bufferDevice",
                                 f"cuda buffers over UCX_TLS={g.kv_transfer.ucx_tls} (TCP only) crash "
                                 "UCX copying GPU memory over TCP (segfault in uct_tcp_ep_am_bcopy). "
                                 "Write bufferDevice: cpu, or use a transport that moves GPU memory "
                                 "(e.g. ucxTls: rc,cuda_copy on RDMA)"))
    roles = {g.role for g in cfg.workers}
    if "agg" in roles and roles & {"prefill", "decode"}:
        agg = [g.name for g in cfg.workers if g.role == "agg"]
        found.append(("workers", f"agg groups ({', '.join(agg)}) are mixed with prefill/decode "
                         "groups in one graph; a graph is either aggregated or disaggregated. Deploy "
                         "them as separate stacks, or give every group role prefill or decode"))
    elif roles & {"prefill", "decode"} and roles != {"prefill", "decode"}:
        has, lacks = ("prefill", "decode") if "prefill" in roles else ("decode", "prefill")
        found.append(("workers", f"a disaggregated graph needs both prefill and decode groups; "
                         f"this one has {has} but no {lacks}. Add a group with role: {lacks}"))
    found += _probe_problems(cfg)
    found += _model_cache_problems(cfg)
    if cfg.platform.manage and cfg.graph.namespace == cfg.platform.namespace:
        found.append(("graph.namespace", f"{cfg.graph.namespace!r} is also platform.namespace; "
                         "the graph gets its own namespace so it can be removed without touching "
                         "the operator. Remove graph.namespace (default: dynamo-lab-<stack>) or pick another"))
    return found


def _probe_problems(cfg: StackConfig) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    by_name = {g.name: g for g in cfg.workers}
    for key, name, role in (("fromGroup", cfg.probe.from_group, "prefill"),
                            ("toGroup", cfg.probe.to_group, "decode")):
        if name is not None and (name not in by_name or by_name[name].role != role):
            groups = ", ".join(g.name for g in cfg.workers if g.role == role) or "none"
            problems.append((f"probe.{key}", f"{name!r} is not a {role} group of this stack; the probe "
                             f"measures the prefill -> decode KV path. {role} groups: {groups}"))
    if cfg.probe.enabled and not any(g.role == "prefill" for g in cfg.workers):
        problems.append(("probe.enabled", "this graph is aggregated: there is no prefill -> decode KV "
                         "transfer to measure. Set probe.enabled: false"))
    return problems


def _model_cache_problems(cfg: StackConfig) -> list[tuple[str, str]]:
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
