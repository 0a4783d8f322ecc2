"""The lab's facts, apart from the schema: the Dynamo release it runs, the model it serves, its GPU
classes and the transfer rates measured for it. The stack file's defaults (infra/config/models.py)
come from here; each fact says where it was read or measured (docs/sources.md, docs/measurements.md).
"""

from __future__ import annotations

from typing import Any

from infra import units

# The Dynamo release the lab measured: the platform chart's version and the serving image's tag.
# Dynamo 1.6.2 runs vLLM 0.31.0 and NIXL over UCX (docs/lab.md).
DYNAMO_RELEASE = "1.6.2"
SERVING_IMAGE_REPOSITORY = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
SERVING_IMAGE = f"{SERVING_IMAGE_REPOSITORY}:{DYNAMO_RELEASE}"

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"

# The stack files this project ships, one per variant the lab measured (docs/lab.md): what the
# tests, the golden renders and `diff` cover unless told otherwise. A user's own stack file (one
# `advise --write` made, say) is covered where it is named: `dynamo-lab diff NAME`, `golden NAME`.
SHIPPED_STACKS = ("cross-server", "kv-routing", "same-server")

# GPU feature discovery labels every GPU node with its GPU memory in MiB.
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"


def _gfd_memory_rule(operator: str, mib: int) -> list[dict[str, Any]]:
    return [{"key": GPU_MEMORY_LABEL, "operator": operator, "values": [str(mib)]}]


DEFAULT_GPU_CLASSES: dict[str, dict[str, Any]] = {
    # The memory a card reports (GPU feature discovery's nvidia.com/gpu.memory, MiB), not its name:
    # a plan that fits this fits the card. 24GB-class cards report 24,564-24,576 MiB (the lower one
    # here); nothing in the lab sits between 12 and 20 GB.
    # Card figures (the predictor's GPU costs) are the lab's own cards', as its nodes report them
    # (nvidia.com/gpu.product, tests/data/preflight/lab.json): LAB_CARDS below.
    "gpu-24gb": {"memory": "24564Mi", "nodeSelector": _gfd_memory_rule("Gt", 20000), "effectiveTflops": 40,
                 "memoryBandwidth": "936G", "peakTflops": 71},
    # The lab's 8GB laptop GPU reports about 8,188 MiB.
    "gpu-8gb": {"memory": "8188Mi", "nodeSelector": _gfd_memory_rule("Lt", 12000), "effectiveTflops": 15,
                "memoryBandwidth": "448G", "peakTflops": 33},
}

# The lab's cards behind the default classes' `memoryBandwidth` and `peakTflops` (bytes/s of DRAM;
# dense BF16 tensor TFLOP/s with FP32 accumulate, the math vLLM's bfloat16 kernels use):
# - GeForce RTX 3090 (GA102): 936 GB/s (384-bit GDDR6X at 19.5 Gbit/s); 71 TFLOP/s dense (328
#   tensor cores x 1.695 GHz boost x 128 FLOPs/clock), NVIDIA Ampere GA102 whitepaper, table 9.
# - GeForce RTX 3070 Laptop GPU (GA104): 448 GB/s (256-bit GDDR6 at 14 Gbit/s); 33 TFLOP/s dense at
#   its highest boost, 1.62 GHz (160 tensor cores x 128 FLOPs/clock); laptops run it at 1.29-1.62 GHz
#   by their power limit, so 26-33 TFLOP/s: an ESTIMATE within that range.
LAB_CARDS = {"gpu-24gb": "NVIDIA GeForce RTX 3090", "gpu-8gb": "NVIDIA GeForce RTX 3070 Laptop GPU"}


# Built-in model geometry (its config.json). head_dim is explicit: Qwen3 sets it to 128, NOT
# hidden_size / num_attention_heads = 64, the mistake several tools make (docs/sources.md).
BUILTIN_MODELS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": {
        "layers": 28,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 1024,
        "attentionHeads": 16,
        "dtype": "bfloat16",
        # Tied embeddings: 28 x 15,730,944 per layer + 151,936 x 1,024 embedding + 1,024 norm.
        "parameters": 596_049_920,
        # Its model.safetensors stores the tied embedding twice (embed_tokens and lm_head): 311
        # tensors, 1,503,264,768 bytes of bf16 = 2 x (596,049,920 + 151,936 x 1,024) (docs/sources.md).
        "checkpointParameters": 751_632_384,
        # config.json, generation_config.json, tokenizer.json, tokenizer_config.json, vocab.json and
        # merges.txt as the Hub lists them at revision c1899de (docs/sources.md).
        "tokenizerBytes": 15_882_037,
        # config.json's max_position_embeddings: vLLM's max_model_len when none is given, and the
        # most it accepts.
        "maxPositionEmbeddings": 40_960,
        # The Hub commit every figure above was read from (docs/sources.md). Pinned, so the cache
        # and the workers load exactly these files even after the model's `main` moves.
        "revision": "c1899de289a04d12100db370d81485cdf75e47ca",
    }
}


# Same-node KV transfer throughput by NIXL operation, for the workers' pattern: one 64 KiB descriptor
# per layer per block, scattered in pools like the workers'. Measured 2026-11-30 with `dynamo-lab
# probe local --link loopback --stack same-server` (NIXL 1.5.1, UCX 1.23.0 tcp,self, RNDV inf; the
# two endpoints on two cores) on a quiet 2-core machine, 15 runs each of one request's 4,172
# descriptors (273 MB), each the median of 5 after a warm-up: READ 0.80-1.08 GB/s (median 0.94),
# WRITE 1.67-2.08 GB/s (median 1.92); each default is its median to two figures
# (docs/measurements.md, "KV transfers as the workers make them"). With one core busy elsewhere a
# READ fell to 0.68-0.74 GB/s.
SAME_NODE_BYTES_PER_SECOND = {"READ": units.parse_throughput("940M"), "WRITE": units.parse_throughput("1900M")}
