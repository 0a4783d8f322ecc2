"""Runs in the engine tier's own environment (.venv-engine), never in .venv: what vLLM 0.31.0's own
code says of a prefill worker and a decode worker of given tensor parallel sizes, on a CPU.

    .venv-engine/bin/python tests/engine/check_kv_pairs.py REQUEST.json REPORT.json

request: {"workers": [{"id": "...", "argv": [...]}, ...], "pairs": [{"id": "...", "prefill": ID,
"decode": ID}, ...]}: each worker's argv is what its container runs after `python3 -m dynamo.vllm`
(--model a local directory holding a config.json); each pair names a prefill and a decode worker.
report: {"versions": {...}, "workers": {ID: {"ok", "stage", "error", "tp", "kv_heads", "page_bytes",
"layers", "layout"}}, "pairs": {ID: {"ok", "stage", "error", "tp_ratio", "reads": [{"decode_rank",
"prefill_rank", "bytes_per_block", "offset_bytes"}]}}}.

Whose code runs:
  1. A worker on its own. Dynamo: `_parse_cli_args` and `_build_config` (the worker's parser);
     vLLM: `create_engine_config` (ModelConfig.verify_with_parallel_config refuses attention heads
     that do not divide), then `resolve_kv_cache_layout` with the connector's preference
     (NixlConnector.get_required_kvcache_layout). OURS: the KV heads' rule of
     QKVParallelLinear.__init__ (vllm/model_executor/layers/linear.py), which runs only when a
     model is built on a device: its branch, transcribed, over vLLM's own `divide` (ranks at least
     the KV heads: the heads divide the ranks; fewer: the ranks divide the heads). The per-layer
     KV spec is check_workers.py's (Attention.get_kv_cache_spec's full-attention branch).
  2. A pair, as the decode worker (local) meets the prefill worker (remote), rank by decode rank,
     in the order NixlConnectorWorker runs it (v1/nixl/base_worker.py): `TransferTopology`
     (kv_connector/utils.py) built as register_kv_caches builds it; `handshake_target_ranks` (the
     tp_ratio assertion), for _nixl_handshake; then, per prefill rank it targets, what
     add_remote_agent does: `register_remote_engine`, `compute_tp_mapping` (v1/nixl/tp_mapping.py),
     `_validate_remote_agent_handshake`, and `_build_fa_remote`, whose descriptors are the bytes the
     decode rank reads of each block of that prefill rank and where in it. OURS: the worker object
     those methods run on holds only the attributes they read (a CPU has no NIXL agent and no KV
     tensors), each set as register_kv_caches would set it for these configs: one region per layer
     of the layer's page size (the packed K/V layout), block strides of a page, no MLA, no Mamba,
     no DCP, the host buffer where kv_buffer_device is cpu.
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any

os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # before vLLM is imported: its platform is chosen then
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

BLOCKS = 4  # remote blocks a descriptor list is built for: enough to read one block's bytes off


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def worker(argv: list[str]) -> tuple[dict[str, Any], Any]:
    """One worker's vLLM config and its facts (module docstring, step 1), or where it was refused."""
    from dynamo.vllm.args import _build_config, _parse_cli_args
    from vllm.distributed.utils import divide
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.kv_cache_interface import FullAttentionSpec, get_kv_quant_mode

    out: dict[str, Any] = {"ok": False, "stage": None, "error": None}
    try:
        config = _build_config(*_parse_cli_args(argv))
        vllm_config = config.engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except (Exception, SystemExit) as exc:
        out.update(stage="vllm EngineArgs.create_engine_config", error=_message(exc))
        return out, None
    model, cache, parallel = vllm_config.model_config, vllm_config.cache_config, vllm_config.parallel_config
    tp, heads = parallel.tensor_parallel_size, model.get_total_num_kv_heads()
    out.update(tp=tp, kv_heads=heads)
    try:  # OURS: QKVParallelLinear's branch, over vLLM's divide
        divide(tp, heads) if tp >= heads else divide(heads, tp)
    except AssertionError as exc:
        out.update(stage="vllm QKVParallelLinear (its KV heads' rule, transcribed)", error=_message(exc))
        return out, None
    spec = FullAttentionSpec(block_size=cache.block_size, num_kv_heads=model.get_num_kv_heads(parallel),
                             head_size=model.get_head_size(),
                             dtype=kv_cache_dtype_str_to_dtype(cache.cache_dtype, model),
                             kv_quant_mode=get_kv_quant_mode(cache.cache_dtype))
    layers = model.get_num_layers(parallel)
    specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(layers)}
    supported = [layout.name for layout in get_supported_kv_cache_layouts([FlashAttentionBackend])]
    layout = resolve_kv_cache_layout(vllm_config, [supported], specs.values())
    kv = vllm_config.kv_transfer_config
    out.update(ok=True, page_bytes=spec.page_size_bytes, layers=layers, layout=layout.name,
               block_size=cache.block_size, host_buffer=kv is not None and kv.kv_buffer_device == "cpu")
    return out, vllm_config


def pair(prefill: dict[str, Any], decode: dict[str, Any]) -> dict[str, Any]:
    """What the decode worker's ranks make of the prefill worker (module docstring, step 2)."""
    from vllm.distributed.kv_transfer.kv_connector.utils import EngineTransferInfo, TransferTopology
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_worker import NixlBaseConnectorWorker as W
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import NixlAgentMetadata
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.tp_mapping import compute_tp_mapping
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    p_tp, d_tp, layers = prefill["tp"], decode["tp"], decode["layers"]
    out: dict[str, Any] = {"ok": False, "stage": None, "error": None, "reads": []}
    stage = ""
    try:
        for rank in range(d_tp):
            stage = "vllm TransferTopology (kv_connector/utils.py)"
            topo = TransferTopology(tp_rank=rank, tp_size=d_tp, block_size=decode["block_size"], engine_id="decode",
                                    is_mla=False, is_mamba=False, total_num_kv_heads=decode["kv_heads"],
                                    attn_backends=[FlashAttentionBackend])
            stage = "vllm TransferTopology.handshake_target_ranks (kv_connector/utils.py, tp_ratio)"
            targets = topo.handshake_target_ranks(p_tp)
            out["tp_ratio"] = topo.tp_ratio(p_tp)
            # OURS: the attributes the NixlConnectorWorker methods below read (module docstring).
            me = types.SimpleNamespace(
                transfer_topo=topo, tp_rank=rank, dcp_size=1, use_mla=False, _has_mamba=False,
                region_group_ids=[], dst_region_group_ids={}, _physical_blocks_per_logical_kv_block=1,
                use_host_buffer=decode["host_buffer"], kv_cache_layout=decode["layout"],
                host_buffer_kv_cache_layout=decode["layout"], enable_permute_local_kv=False,
                backend_name=FlashAttentionBackend.get_name(), _is_hma_required=False,
                _transfer_layer_region_indices=[], _transfer_layer_names=[], region_names=[],
                block_len_per_layer=[decode["page_bytes"]] * layers, _region_is_mla=[],
                _group_spec_types=(FullAttentionSpec,), dst_num_blocks={"prefill": BLOCKS})
            me._is_region_replicated = types.MethodType(W._is_region_replicated, me)
            me._stack_descs = W._stack_descs
            for remote in targets:
                stride = prefill["page_bytes"]
                bases = [(1 + remote) << 40 | layer << 32 for layer in range(prefill["layers"])]
                meta = NixlAgentMetadata(
                    engine_id="prefill", agent_metadata=b"", kv_caches_base_addr=bases, device_id=remote,
                    num_blocks=BLOCKS, block_lens=[prefill["page_bytes"]] * prefill["layers"],
                    block_strides=[stride] * prefill["layers"], kv_cache_layout=prefill["layout"],
                    block_size=prefill["block_size"], ssm_sizes=(0, 0),
                    attn_backend_name=FlashAttentionBackend.get_name(), physical_blocks_per_logical_kv_block=1)
                stage = "vllm add_remote_agent: register_remote_engine, compute_tp_mapping"
                topo.register_remote_engine("prefill", EngineTransferInfo(
                    remote_tp_size=p_tp, remote_block_len=prefill["page_bytes"],
                    remote_block_size=prefill["block_size"], remote_physical_blocks_per_logical=1))
                plan = compute_tp_mapping(topo, p_tp, (FullAttentionSpec,))
                stage = "vllm NixlConnectorWorker._validate_remote_agent_handshake (v1/nixl/base_worker.py)"
                W._validate_remote_agent_handshake(me, meta, p_tp)
                if remote not in plan.all_source_ranks:
                    continue  # handshaken, not read (not for dense models: reported if it were)
                stage = "vllm NixlConnectorWorker._build_fa_remote (v1/nixl/base_worker.py)"
                descs = W._build_fa_remote(me, plan, meta, topo.block_size_ratio(prefill["block_size"]))
                first = [descs[i * BLOCKS] for i in range(layers)]  # block 0 of each layer's region
                offsets = {int(d[0]) - base for d, base in zip(first, bases, strict=True)}
                out["reads"].append({"decode_rank": rank, "prefill_rank": remote,
                                     "bytes_per_block": int(sum(int(d[1]) for d in first)),
                                     "offset_bytes": sorted(offsets)})
    except Exception as exc:
        out.update(stage=stage, error=_message(exc))
        return out
    out["ok"] = True
    return out


def main(request_path: str, report_path: str) -> int:
    with open(request_path) as f:
        request = json.load(f)
    from importlib.metadata import version

    workers: dict[str, dict[str, Any]] = {}
    for w in request["workers"]:
        workers[w["id"]], _ = worker(list(w["argv"]))
    pairs = {}
    for p in request["pairs"]:
        sides = workers[p["prefill"]], workers[p["decode"]]
        refused = [s for s in sides if not s["ok"]]
        pairs[p["id"]] = ({"ok": False, "stage": "a worker on its own", "error": refused[0]["error"], "reads": []}
                          if refused else pair(*sides))
    report = {"versions": {name: version(name) for name in ("ai-dynamo", "vllm")}, "workers": workers,
              "pairs": pairs}
    with open(report_path, "w") as f:  # a file, not stdout: vLLM logs to stdout
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
