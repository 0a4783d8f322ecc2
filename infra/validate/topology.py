"""Checks across keys of where a stack's workers run and how their KV moves: each group's transport
against its buffers, UCX_TLS and nodes; each prefill/decode pair; tensor parallelism against the
model's heads and the class's GPUs; a spread against the class's nodes. `infra.validate` runs them
with the others, on the resolved stack, and returns (key path, message) pairs. A prefill/decode pair
may run different tensorParallel where vLLM 0.31.0's NixlConnector pairs their ranks
(infra/kv_ranks.py)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Optional

from infra import kv_ranks
from infra.config.fields import GPU_CAPABLE_TLS, NETWORK_TLS, expand_tls
from infra.config.schema import Model, StackConfig, WorkerGroup

if TYPE_CHECKING:
    from infra.resolved import ResolvedStack

Problems = list[tuple[str, str]]

RDMA_TLS = NETWORK_TLS - {"tcp"}


def _transport(g: WorkerGroup, gpu_classes: dict) -> Problems:
    """One group's transport: its buffers, its UCX_TLS and its nodes agree with it."""
    kv, key = g.kv_transfer, f"workers.{g.name}.kvTransfer"
    tls = expand_tls(kv.ucx_tls)
    if kv.transport == "tcp":
        if tls & RDMA_TLS:
            written = (t.strip() for t in kv.ucx_tls.removeprefix("^").split(","))
            named = ", ".join(n for n in written if expand_tls(n) & RDMA_TLS) or "all but those it excludes"
            return [(f"{key}.ucxTls", f"UCX_TLS={kv.ucx_tls} names RDMA transports ({named}) but transport is tcp: "
                     "the pods would request no RDMA device, so they would have no /dev/infiniband device to reach the "
                     "NIC through. Write transport: rdma, or ucxTls: tcp,self")]
        if kv.buffer_device == "cuda":
            return [(f"{key}.bufferDevice", f"cuda buffers over UCX_TLS={kv.ucx_tls} (TCP only) crash UCX copying GPU "
                     "memory over TCP (segfault in uct_tcp_ep_am_bcopy). Write bufferDevice: cpu, or transport: rdma "
                     "where the nodes have RDMA (UCX over RC verbs moves GPU memory)")]
        return []
    found: Problems = []
    if not tls & RDMA_TLS:
        found.append((f"{key}.ucxTls", f"transport rdma but UCX_TLS={kv.ucx_tls} names no RDMA transport (rc, ud, "
                      "dc, ib), so UCX would fall back to whatever else it lists or fail to connect. Remove ucxTls "
                      "(default with rdma: rc,self, or rc,cuda_copy,self with cuda buffers)"))
    elif kv.buffer_device == "cuda" and not tls & GPU_CAPABLE_TLS - RDMA_TLS:
        found.append((f"{key}.ucxTls", f"cuda buffers need a CUDA transport beside RC in UCX_TLS ({kv.ucx_tls}) to "
                      "reach GPU memory. Add cuda_copy: ucxTls: rc,cuda_copy,self"))
    cls = gpu_classes.get(g.gpu_class)
    if cls is not None and cls.rdma_resource is None:
        found.append((f"{key}.transport", f"transport rdma needs an RDMA device in each pod, and GPU class "
                      f"{g.gpu_class!r} names none. Set gpuClasses.{g.gpu_class}.rdmaResource to the resource "
                      "the RDMA device plugin advertises on its nodes (e.g. rdma/rdma_shared_device_a), or write "
                      "transport: tcp"))
    return found


def transfer(r: ResolvedStack) -> Problems:
    """Each group's transport can move its buffers, and each prefill/decode pair can talk."""
    cfg = r.config
    found: Problems = []
    for g in cfg.workers:
        if g.role != "agg":
            found += _transport(g, cfg.gpu_classes)
    rdma = sorted(g.name for g in cfg.workers if g.rdma)
    if cfg.probe.enabled and rdma:
        found.append(("probe.enabled", f"the probe moves KV-sized host buffers over UCX TCP "
                      f"(infra/payloads/kv_probe.py), and {', '.join(rdma)} move their KV over RDMA, a path it "
                      "does not measure (its pods request no RDMA device). Set probe.enabled: false"))
    prefill = [g for g in cfg.workers if g.role == "prefill"]
    decode = [g for g in cfg.workers if g.role == "decode"]
    for p, d in itertools.product(prefill, decode):
        pk, dk = p.kv_transfer, d.kv_transfer
        pair = f"prefill {p.name!r} and decode {d.name!r}"
        if pk.transport != dk.transport:
            found.append((f"workers.{d.name}.kvTransfer.transport",
                          f"{pair} use transports {pk.transport} and {dk.transport}; UCX connects a pair over one "
                          f"transport both sides have. Give both the same transport"))
            continue
        if (why := _rank_pairing(cfg, p, d)) is not None:
            found.append((f"workers.{d.name}.tensorParallel", why))
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


def tensor_parallel_sizes(m: Model, gpus_per_node: int) -> list[int]:
    """The tensorParallel sizes `tensor_parallel` takes on a node of `gpus_per_node` whole GPUs: 1,
    and each above it that divides the model's attention heads and its KV heads, both known (the
    sizes a refusal offers, and advise searches)."""
    if m.attention_heads is None or m.kv_heads is None:
        return [1]
    return [t for t in range(1, gpus_per_node + 1) if m.attention_heads % t == 0 and m.kv_heads % t == 0]


def _sizes(cfg: StackConfig, g: WorkerGroup) -> list[int]:
    """The tensorParallel sizes a group may run on its class (tensor_parallel_sizes; 1 where its
    GPUs are time-sliced)."""
    cls = cfg.gpu_classes[g.gpu_class]
    return tensor_parallel_sizes(cfg.model, cls.gpus_per_node) if cls.sharing == "whole" else [1]


def _rank_pairing(cfg: StackConfig, p: WorkerGroup, d: WorkerGroup) -> Optional[str]:
    """Why vLLM 0.31.0's NixlConnector would refuse to pair this prefill group's ranks with this
    decode group's (infra/kv_ranks.py), with the decode sizes it would take; None where it pairs
    them, and where either size is refused on its own (tensor_parallel says so, once)."""
    m = cfg.model
    own = [g.tensor_parallel for g in (p, d)]
    if m.kv_heads is None or d.gpu_class not in cfg.gpu_classes \
            or any(m.kv_heads % t or (m.attention_heads or t) % t for t in own):
        return None
    why = kv_ranks.refusal(p.tensor_parallel, d.tensor_parallel, m.kv_heads)
    if why is None:
        return None
    fits = [t for t in _sizes(cfg, d) if kv_ranks.refusal(p.tensor_parallel, t, m.kv_heads) is None]
    return (f"prefill {p.name!r} and decode {d.name!r} run tensorParallel {p.tensor_parallel} and "
            f"{d.tensor_parallel}: {why}. The workers would start and report Ready, and every request sent "
            f"from one to the other would fail at the decode worker's handshake. Write a decode tensorParallel "
            f"of {fits} (those that pair with {p.tensor_parallel} and fit {m.name}'s heads and a "
            f"{d.gpu_class} node), or give the prefill group a size that pairs with {d.tensor_parallel}")


def tensor_parallel(r: ResolvedStack) -> Problems:
    """tensorParallel N splits the attention heads and the KV heads over N GPUs of one node, whole."""
    cfg, m = r.config, r.config.model
    found: Problems = []
    for g in cfg.workers:
        n, key = g.tensor_parallel, f"workers.{g.name}.tensorParallel"
        cls = cfg.gpu_classes.get(g.gpu_class)
        if n == 1 or cls is None:
            continue
        # vLLM shards each attention layer's heads over the ranks (ModelConfig.verify_with_parallel_config
        # refuses heads that do not divide); a rank with a fraction of a KV head would have to hold a
        # replica of it, which the sizing does not model.
        heads = {"attention heads (model.attentionHeads)": m.attention_heads, "KV heads (model.kvHeads)": m.kv_heads}
        for what, count in heads.items():
            if count is None:
                found.append((key, f"tensorParallel {n} splits the model's attention heads over {n} GPUs, and "
                              f"{m.name}'s count is not known. Write model.attentionHeads (config.json "
                              "num_attention_heads)"))
            elif count % n:
                fits = tensor_parallel_sizes(m, cls.gpus_per_node)
                if count == m.kv_heads and n % count == 0:
                    # vLLM 0.31.0 takes it: QKVParallelLinear gives each rank one KV head, each head
                    # num_kv_head_replicas = tp / kv heads ranks (model_executor/layers/linear.py).
                    found.append((key, f"tensorParallel {n} is above {m.name}'s {count} {what}: vLLM would hold "
                                  f"each KV head on {n // count} ranks, which the sizing does not model (it splits "
                                  f"a token's KV over the ranks, and would count each rank's KV and the transfers "
                                  f"short). Write one of {fits}"))
                else:
                    found.append((key, f"tensorParallel {n} does not divide {m.name}'s {count} {what}: each GPU "
                                  f"must hold whole heads (vLLM refuses the split). Write one of {fits}"))
        if n > cls.gpus_per_node:
            found.append((key, f"tensorParallel {n} needs {n} GPUs on one node, and a {g.gpu_class} node has "
                          f"{cls.gpus_per_node} (gpuClasses.{g.gpu_class}.gpusPerNode); the pod would stay Pending. "
                          f"Write at most {cls.gpus_per_node}, or use a class with more GPUs per node"))
        if cls.sharing != "whole":
            found.append((key, f"tensorParallel {n} on GPU class {g.gpu_class!r}, whose GPUs are time-sliced: two "
                          "of a pod's slices may be the same card, and the ranks would share its memory and compute. "
                          f"Give the class whole GPUs (gpuClasses.{g.gpu_class}.sharing: whole, the device plugin "
                          "without time-slicing), or write tensorParallel: 1"))
    return found


def spread(r: ResolvedStack) -> Problems:
    """A group spread one per node needs as many nodes as replicas."""
    cfg = r.config
    found: Problems = []
    for g in cfg.workers:
        cls = cfg.gpu_classes.get(g.gpu_class)
        if cls is not None and g.spread == "onePerNode" and g.replicas > cls.nodes:
            found.append((f"workers.{g.name}.spread", f"onePerNode puts at most one of the {g.replicas} replicas on "
                          f"each node, and {g.gpu_class} has {cls.nodes} (gpuClasses.{g.gpu_class}.nodes): "
                          f"{g.replicas - cls.nodes} would stay Pending. Write spread: even, lower replicas to "
                          f"{cls.nodes}, or set the class's nodes to how many it really has"))
    return found
