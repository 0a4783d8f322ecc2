"""Candidates as stack files: the base stack file's `config:` map, with a layout's workers and a
given traffic's keys, spelled as a stack file spells them (the one place advise writes those
spellings; the written file is this map, dumped as it is: write.py)."""

from __future__ import annotations

import copy
from typing import Any, Optional

from dynamo_lab.advise.candidates import ClassNode, Layout
from dynamo_lab.advise.traffic import Traffic
from infra.catalogue import DEFAULT_GPU_CLASSES
from infra.config import PROJECT
from infra.config.schema import StackConfig

# A stack file's `config:` map, as written: keys namespaced (`dynamo-lab:workers`) or not.
StackDoc = dict[str, Any]


def _key(config: StackDoc, key: str) -> str:
    """The spelling of a dynamo-lab key in this config map (namespaced or not), or the namespaced one."""
    return next((k for k in (f"{PROJECT}:{key}", key) if k in config), f"{PROJECT}:{key}")


def secret_keys(base: StackDoc) -> list[str]:
    return [k for k, v in base.items() if isinstance(v, dict) and set(v) == {"secure"}]


def traffic_keys(traffic: Traffic) -> dict[str, dict]:
    """The stack-file keys a given traffic sets: the workload the sizing sizes for (its largest
    point), and the benchmark matrix, whose request shape then follows the workload."""
    prefix_types = traffic.simulated_prefix_types
    return {"workload": {"inputTokens": traffic.input_tokens, "prefixTokens": traffic.prefix_tokens,
                         "outputTokens": traffic.output_tokens, "prefixTypes": max(prefix_types),
                         "concurrency": max(traffic.concurrency)},
            "benchmark": {"prefixTypes": list(prefix_types), "concurrency": list(traffic.concurrency)}}


def gpu_classes(base: StackDoc, cfg: StackConfig, nodes: list[ClassNode]) -> Optional[dict]:
    """The base's `gpuClasses` with each searched class's nodes, GPUs per node and sharing as the
    cluster has them (candidates.ClassNode.settings), so the sizing and preflight judge what would
    be deployed; None where every class already says so (the lab's stacks on the lab's cluster: their
    candidates are the base file with other workers, nothing more). The map is written whole: a
    stack's `gpuClasses` replaces the defaults (config/stack.py)."""
    current = {"nodes": "nodes", "gpusPerNode": "gpus_per_node", "sharing": "sharing", "slicesPerGpu": "slices_per_gpu"}
    changed = {n.gpu_class: n.settings() for n in nodes
               if any(getattr(cfg.gpu_classes[n.gpu_class], current[k]) != v for k, v in n.settings().items())}
    if not changed:
        return None
    raw = base.get(_key(base, "gpuClasses")) or DEFAULT_GPU_CLASSES
    out = copy.deepcopy(raw)
    for name, settings in changed.items():
        out[name] = {**out[name], **settings}
        if settings["sharing"] == "whole":
            out[name].pop("slicesPerGpu", None)
    return out


def candidate_config(base: StackDoc, layout: Layout, traffic: Traffic, classes: Optional[dict] = None) -> StackDoc:
    """The base stack file's `config:` map with this layout's workers (and a given traffic, and
    `classes` as its gpuClasses: gpu_classes). Its secrets are left out: they are encrypted for
    the base stack alone (write.py says so)."""
    config = {k: copy.deepcopy(v) for k, v in base.items() if k not in secret_keys(base)}
    workers = layout.workers()
    # The base's KV transport (its first prefill or decode group's kvTransfer: RDMA and GPU buffers,
    # say) is what a separated candidate moves its KV by; a class without the RDMA device refuses it.
    transfer = next((w["kvTransfer"] for w in base.get(_key(base, "workers")) or []
                     if isinstance(w, dict) and w.get("role") in ("prefill", "decode") and w.get("kvTransfer")), None)
    if transfer is not None:
        for w in workers:
            if w["role"] != "agg":
                w["kvTransfer"] = copy.deepcopy(transfer)
    config[_key(config, "workers")] = workers
    if classes is not None:
        config[_key(config, "gpuClasses")] = copy.deepcopy(classes)
    return with_traffic(config, traffic)


def with_traffic(config: StackDoc, traffic: Traffic) -> StackDoc:
    """`config` with a given traffic's keys (a default traffic is the config's own already)."""
    config = dict(config)
    if traffic.given:
        for section, values in traffic_keys(traffic).items():
            key = _key(config, section)
            merged = dict(config.get(key) or {})
            if section == "benchmark":  # its request shape follows the workload now
                for k in ("prefixTokens", "uniqueTokens", "outputTokens"):
                    merged.pop(k, None)
            config[key] = {**merged, **values}
    return config
