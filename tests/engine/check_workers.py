"""Runs in the engine tier's own environment (.venv-engine, tests/engine/requirements.txt), never in
.venv: each rendered worker command through Dynamo 1.6.1's and vLLM 0.31.0's own code, on a CPU.

    .venv-engine/bin/python tests/engine/check_workers.py REQUEST.json REPORT.json

request: {"workers": [{"id": "...", "argv": [...], "parse_only": false, "build_only": false}, ...]},
each argv what a worker container runs after `python3 -m dynamo.vllm`, its --model a local directory
holding the model's config.json; `parse_only` stops after `_parse_cli_args` (the override attempts
only need what the parsers took), `build_only` after `_build_config`, step 1 whole (the generated
extraArgs lists: about 30 ms a worker, where the whole check takes a second or so).
report: {"versions": {...}, "options": {...}, "workers": [{"id", "ok", "stage", "error", "parsed",
"max_model_len", ...}, ...]}: `parsed` holds what the parsers took for every setting dynamo-lab
manages (EFFECTIVE), `options` every option string of the three parsers (Dynamo's, its router's,
vLLM's), and whether vLLM's and the router's take abbreviations.

Whose code runs, step by step (the steps a worker takes before it serves, in its order):
  1. Dynamo: `dynamo.vllm.args.parse_args(argv)`, the worker's own parser (Dynamo's flags, its
     router's, and vLLM's `AsyncEngineArgs`), as its two steps: `_parse_cli_args` (vLLM's namespace:
     what the three parsers read, all `parse_only` needs) and `_build_config` (its `.engine_args`,
     what the engine runs with).
  2. vLLM: `engine_args.create_engine_config(UsageContext.OPENAI_API_SERVER)`, as dynamo/vllm/main.py
     calls it, then Dynamo's `disable_hybrid_kv_cache_manager_for_incompatible_pd_connector`, as
     main.py does next. VLLM_TARGET_DEVICE=cpu: with no GPU, vLLM takes its CPU platform (otherwise
     "Failed to infer device type"). One CPU-platform difference matters: without --block-size the
     CPU platform picks 128 where a GPU's platform asks its attention backend; so for a worker with
     no --block-size, vLLM's `Platform._preferred_block_size_for_backends` is asked instead, as
     `update_block_size_for_backend` does on a GPU, for FlashAttention (ours, see below).
     `block_size_given` says whether the block size is the worker's own flag's.
  3. vLLM: the connector class by name (`KVConnectorFactory.get_connector_class`, a lookup that
     builds nothing); Dynamo: `make_kv_connector_protocol(vllm_config)`, what Dynamo's prefill handler
     calls for each disaggregated request ("Unsupported kv_connector" for a name it has no protocol for).
  4. vLLM: the KV pool's admission. The pool a pinned worker gets is its --kv-cache-memory-bytes
     (`Worker.determine_available_memory` returns it through `reserve_mm_ipc_gpu_memory`, called here
     the same way); then what `EngineCore._initialize_kv_caches` calls: `resolve_kv_cache_layout` and
     `get_kv_cache_configs` (it fits --max-model-len -1 to the pool and refuses a pool that cannot
     hold one max_model_len sequence); then `check_enough_kv_cache_memory`, that admission on its own.
OURS, not theirs: the per-layer KV spec. On a GPU each attention layer builds it
(`Attention.get_kv_cache_spec`, which needs the model built on a device); here it is that method's
full-attention branch with the same inputs, all read from vLLM's parsed config: one
`FullAttentionSpec` per layer (block size, KV heads, head size, KV cache dtype). Right for
Qwen3-0.6B, whose config.json has no sliding window and no hybrid layers. Also ours: the attention
backend, FlashAttention, whose block-size preference and KV cache layouts vLLM's functions are given
(on a GPU the CUDA platform picks the backend on the device); the layout shapes the tensors, not the
pool's capacity. And this script's glue: the steps' order, and what is reported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any

os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # before vLLM is imported: its platform is chosen then
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from a hub: the model is a local directory
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# The engine arguments dynamo-lab writes or its sizing rests on (infra/config/engine_flags.py),
# read back from what Dynamo's parser hands vLLM.
EFFECTIVE = ("model", "revision", "tokenizer_revision", "code_revision", "max_model_len", "block_size",
             "kv_cache_memory_bytes", "gpu_memory_utilization", "num_gpu_blocks_override", "kv_cache_dtype",
             "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "download_dir", "hf_overrides",
             "kv_transfer_config", "kv_events_config",
             # what the weights and the KV take per value, where the weights are, and a second model
             "dtype", "quantization", "quantization_config", "hf_config_path", "cpu_offload_gb",
             "cpu_offload_params", "offload_backend", "offload_group_size", "offload_num_in_group",
             "offload_prefetch_step", "offload_params", "kv_offloading_size", "kv_offloading_backend",
             "speculative_config", "spec_method", "spec_model", "spec_tokens", "enable_lora",
             "enable_prefix_caching", "data_parallel_size_local", "prefill_context_parallel_size",
             "decode_context_parallel_size", "nnodes",
             # the scheduler limits the predictor reads from extraArgs (dynamo_lab/predict/costs.py)
             "max_num_batched_tokens", "max_num_seqs")


def _plain(value: Any) -> Any:
    """A parsed value as JSON: configs (KVTransferConfig, ...) as their fields, the rest as is or text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return sorted(_plain(v) for v in value) if isinstance(value, (set, frozenset)) else [_plain(v) for v in value]
    try:
        import dataclasses
        if dataclasses.is_dataclass(value):
            return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    except Exception:
        pass
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    return str(value)


def options() -> dict[str, Any]:
    """Every option string of the worker's three parsers, built as `dynamo.vllm.args._parse_cli_args`
    and `parse_worker_router_config` build them (OURS: the construction, copied from those functions;
    the groups are Dynamo's)."""
    import argparse

    from dynamo.common.configuration.groups.router_args import add_worker_router_arguments
    from dynamo.vllm.args import DynamoRuntimeArgGroup, DynamoVllmArgGroup
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    dynamo = argparse.ArgumentParser(allow_abbrev=False)
    DynamoRuntimeArgGroup().add_arguments(dynamo)
    DynamoVllmArgGroup().add_arguments(dynamo)
    # The router's flags, which `parse_worker_router_config` takes from what Dynamo's parser left.
    router = argparse.ArgumentParser(add_help=False)
    add_worker_router_arguments(router)
    vllm = FlexibleArgumentParser(add_help=False)
    AsyncEngineArgs.add_cli_args(vllm, async_args_only=False)
    return {"dynamo": sorted(o for a in dynamo._actions for o in a.option_strings),
            "router": sorted(o for a in router._actions for o in a.option_strings),
            "vllm": sorted(o for a in vllm._actions for o in a.option_strings),
            "vllm_allow_abbrev": vllm.allow_abbrev, "router_allow_abbrev": router.allow_abbrev}


def check(argv: list[str], parse_only: bool = False, build_only: bool = False) -> dict[str, Any]:
    from dynamo.vllm.args import _build_config, _parse_cli_args
    from dynamo.vllm.kv_connector_protocols import (
        disable_hybrid_kv_cache_manager_for_incompatible_pd_connector,
        make_kv_connector_protocol,
    )
    from vllm.config.cache import CacheConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.multimodal.gpu_ipc_memory import reserve_mm_ipc_gpu_memory
    from vllm.platforms.interface import Platform
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_utils import check_enough_kv_cache_memory, get_kv_cache_configs
    from vllm.v1.kv_cache_interface import FullAttentionSpec, get_kv_quant_mode

    out: dict[str, Any] = {"ok": False, "stage": None, "error": None}

    def refused(stage: str, exc: BaseException, detail: str = "") -> dict[str, Any]:
        out.update(stage=stage, error=(detail or _message(exc)).strip())
        return out

    # 1. Dynamo's parser: `parse_args` is `_build_config(*_parse_cli_args(argv))`, the two taken
    # apart so that what the parsers read (vLLM's namespace) is reported even where the config's
    # validation would refuse it. argparse reports a bad flag on stderr and exits: keep what it said.
    os.environ.pop("VLLM_NIXL_SIDE_CHANNEL_HOST", None)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            dynamo_config, vllm_args = _parse_cli_args(argv)
    except SystemExit as exc:
        lines = said.getvalue().strip().splitlines()
        return refused("dynamo.vllm.args._parse_cli_args", exc, lines[-1] if lines else f"exit {exc.code}")
    except Exception as exc:
        return refused("dynamo.vllm.args._parse_cli_args", exc)
    out["parsed"] = {name: _plain(getattr(vllm_args, name)) for name in EFFECTIVE}
    out["parsed"]["hf_token_given"] = vllm_args.hf_token is not None
    mode = getattr(dynamo_config, "disaggregation_mode", None)
    out["parsed"]["disaggregation_mode"] = getattr(mode, "value", None if mode is None else str(mode))
    if parse_only:
        out["ok"] = True
        return out
    try:
        config = _build_config(dynamo_config, vllm_args)
    except Exception as exc:
        return refused("dynamo.vllm.args._build_config", exc)
    engine_args = config.engine_args
    # What the engine runs with: the engine arguments after Dynamo's own updates to them.
    out["parsed"].update({name: _plain(getattr(engine_args, name)) for name in EFFECTIVE if hasattr(engine_args, name)})
    out["parsed"]["hf_token_given"] = engine_args.hf_token is not None
    mode = getattr(config, "disaggregation_mode", None)
    out["parsed"]["disaggregation_mode"] = getattr(mode, "value", None if mode is None else str(mode))
    # Dynamo sets the NIXL side-channel host only for the literal NixlConnector (dynamo/vllm/args.py).
    out["nixl_side_channel_host_set"] = "VLLM_NIXL_SIDE_CHANNEL_HOST" in os.environ
    if build_only:
        out["ok"] = True
        return out

    # 2. vLLM's engine config, as Dynamo's worker builds it.
    try:
        vllm_config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        disable_hybrid_kv_cache_manager_for_incompatible_pd_connector(vllm_config)
    except Exception as exc:
        return refused("vllm EngineArgs.create_engine_config", exc)
    model, cache, parallel = vllm_config.model_config, vllm_config.cache_config, vllm_config.parallel_config
    kv = vllm_config.kv_transfer_config
    if not cache.user_specified_block_size:
        # No --block-size: the CPU platform took 128. A GPU's platform takes its attention backend's
        # preference (Platform.update_block_size_for_backend): that step, vLLM's own, for the backend
        # we assume, FlashAttention (OURS: a GPU's is the CUDA platform's pick on the device).
        cache.block_size = Platform._preferred_block_size_for_backends(
            [FlashAttentionBackend], CacheConfig.DEFAULT_BLOCK_SIZE, vllm_config)
    out.update(max_model_len=model.max_model_len, block_size=cache.block_size,
               prefix_caching=cache.enable_prefix_caching,
               block_size_given=bool(cache.user_specified_block_size), pool_bytes=cache.kv_cache_memory_bytes,
               connector=kv.kv_connector if kv else None, kv_role=kv.kv_role if kv else None,
               kv_buffer_device=kv.kv_buffer_device if kv else None)

    # 3. The connector: vLLM has the class, Dynamo has a protocol for it.
    if kv is not None:
        try:
            KVConnectorFactory.get_connector_class(kv)
        except Exception as exc:
            return refused("vllm KVConnectorFactory.get_connector_class", exc)
    try:
        make_kv_connector_protocol(vllm_config)
    except Exception as exc:
        return refused("dynamo.vllm.kv_connector_protocols.make_kv_connector_protocol", exc)

    # 4. The KV pool. Unpinned, it is what profiling a GPU leaves: nothing a CPU can tell (ours).
    if cache.kv_cache_memory_bytes is None:
        out.update(stage="ours: pool", error="no --kv-cache-memory-bytes: the pool is what profiling the GPU "
                                             "leaves, which this check cannot know")
        return out
    # OURS: Attention.get_kv_cache_spec's full-attention branch, its inputs from vLLM's config.
    spec = FullAttentionSpec(
        block_size=cache.block_size,
        num_kv_heads=model.get_num_kv_heads(parallel),
        head_size=model.get_head_size(),
        dtype=kv_cache_dtype_str_to_dtype(cache.cache_dtype, model),
        kv_quant_mode=get_kv_quant_mode(cache.cache_dtype),
    )
    specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(model.get_num_layers(parallel))}
    out.update(layers=len(specs), page_bytes=spec.page_size_bytes)
    available = reserve_mm_ipc_gpu_memory(cache.kv_cache_memory_bytes, model.multimodal_config,
                                          getattr(parallel, "_api_process_count", 1))
    failures = []
    try:
        # As EngineCore._initialize_kv_caches does first: one KV cache layout, from what the workers'
        # attention backends support; then the KV cache configs, the pool's admission among them.
        supported = [layout.name for layout in get_supported_kv_cache_layouts([FlashAttentionBackend])]
        resolve_kv_cache_layout(vllm_config, [supported], specs.values())
        (kv_cache_config,) = get_kv_cache_configs(vllm_config, [specs], [available])
        out.update(num_blocks=kv_cache_config.num_blocks, max_model_len=model.max_model_len,
                   kv_cache_layout=cache.kv_cache_layout)
    except Exception as exc:
        failures.append(("vllm.v1.core.kv_cache_utils.get_kv_cache_configs", exc))
    # The admission on its own, whatever the step above said: its message is reported either way.
    try:
        check_enough_kv_cache_memory(vllm_config, specs, available)
        out["check_enough_kv_cache_memory"] = "passed"
    except Exception as exc:
        out["check_enough_kv_cache_memory"] = _message(exc)
        failures.append(("vllm.v1.core.kv_cache_utils.check_enough_kv_cache_memory", exc))
    if failures:
        return refused(*failures[0])
    out["ok"] = True
    return out


def main(request_path: str, report_path: str) -> int:
    with open(request_path) as f:
        request = json.load(f)
    from importlib.metadata import version

    report: dict[str, Any] = {
        "versions": {name: version(name) for name in ("ai-dynamo", "ai-dynamo-runtime", "vllm", "torch")},
        "options": options(),
        "workers": [],
    }
    for worker in request["workers"]:
        try:
            result = check(list(worker["argv"]), bool(worker.get("parse_only")), bool(worker.get("build_only")))
        except Exception:  # a failure of this script, not a refusal: say where
            result = {"ok": False, "stage": "check_workers.py", "error": traceback.format_exc()}
        report["workers"].append({"id": worker["id"], **result})
    # A file, not stdout: vLLM logs to stdout.
    with open(report_path, "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
