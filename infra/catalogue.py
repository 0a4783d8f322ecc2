"""The lab's facts, apart from the schema: the Dynamo release it runs, the model it serves, its GPU
classes and the transfer rates measured for it. The stack file's defaults (infra/config/schema.py)
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
# Stack files shipped as examples beyond the lab (docs/beyond-the-lab.md): rendered against their own
# golden files and deployed in the cluster tier onto the saved cluster they are written for, never
# onto the lab's.
EXAMPLE_STACKS = ("two-node-rdma",)

# GPU feature discovery labels every GPU node with its GPU memory in MiB.
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"


def _gfd_memory_rule(operator: str, mib: int) -> list[dict[str, Any]]:
    return [{"key": GPU_MEMORY_LABEL, "operator": operator, "values": [str(mib)]}]


# The lab's cards' sustained prefill rate as a fraction of their dense peak: their `effectiveTflops`
# below, which the sizing's prefill estimate and the predictor's prefill steps both read (the one
# prefill efficiency). FITTED to the write-up's concurrency-4 cells (`dynamo-lab predict
# --calibrate`, docs/predictor.md, "The one prefill efficiency"), within what prefill reaches on a
# GPU: 0.3 to 0.75 of the dense peak.
LAB_PREFILL_EFFICIENCY = 0.75


def lab_effective_tflops(peak_tflops: float, efficiency: float = LAB_PREFILL_EFFICIENCY) -> float:
    """A lab card's effectiveTflops: its peak at the lab's prefill efficiency, to 0.1 TFLOP/s."""
    return round(peak_tflops * efficiency, 1)


DEFAULT_GPU_CLASSES: dict[str, dict[str, Any]] = {
    # The memory a card reports (GPU feature discovery's nvidia.com/gpu.memory, MiB), not its name:
    # a plan that fits this fits the card. 24GB-class cards report 24,564-24,576 MiB (the lower one
    # here); nothing in the lab sits between 12 and 20 GB.
    # Card figures (the predictor's GPU costs) are the lab's own cards', as its nodes report them
    # (nvidia.com/gpu.product, tests/data/preflight/lab.json): LAB_CARDS below.
    "gpu-24gb": {"memory": "24564Mi", "nodeSelector": _gfd_memory_rule("Gt", 20000),
                 "effectiveTflops": lab_effective_tflops(71), "memoryBandwidth": "936G", "peakTflops": 71},
    # The lab's 8GB laptop GPU reports about 8,188 MiB.
    "gpu-8gb": {"memory": "8188Mi", "nodeSelector": _gfd_memory_rule("Lt", 12000),
                "effectiveTflops": lab_effective_tflops(33), "memoryBandwidth": "448G", "peakTflops": 33},
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
# Llama 3.1's config.json has no head_dim: transformers' LlamaConfig then sets it to hidden_size //
# num_attention_heads, 128 for both sizes.
# `parameters` is counted from the geometry and checked against the model card: per layer, the
# attention's q, k, v and o projections (h x heads x headDim, 2 x h x kvHeads x headDim, heads x
# headDim x h; Qwen3 adds q_norm and k_norm, 2 x headDim), the MLP's gate, up and down projections
# (3 x h x intermediate_size) and 2 RMSNorms (2 x h); then the embedding (vocab_size x h), the final
# norm (h) and, unless tie_word_embeddings, an lm_head as large as the embedding. No biases.
# Each entry's figures, the file each was read in and its revision: docs/sources.md, "Built-in models".
BUILTIN_MODELS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": {
        "layers": 28,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 1024,
        "attentionHeads": 16,
        "vocabSize": 151_936,
        "tiedEmbeddings": True,
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
    },
    # config.json in ai-dynamo/aiconfigurator (model_configs/Qwen--Qwen3-1.7B_config.json).
    "Qwen/Qwen3-1.7B": {
        "layers": 28,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 2048,
        "attentionHeads": 16,
        "vocabSize": 151_936,
        "tiedEmbeddings": True,
        "dtype": "bfloat16",
        # Tied embeddings: 28 x 50,336,000 per layer (intermediate_size 6,144) + 151,936 x 2,048
        # embedding + 2,048 norm = 1,720,574,976; the model card: 1.7B (1.4B without embeddings).
        "parameters": 1_720_574_976,
        # Its two shards store the tied embedding twice, as for 0.6B: model.safetensors.index.json's
        # total_size 4,063,479,808 bytes of bf16 = 2 x (1,720,574,976 + 151,936 x 2,048).
        "checkpointParameters": 2_031_739_904,
        "maxPositionEmbeddings": 40_960,
        "revision": "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e",
    },
    # config.json in kohya-ss/musubi-tuner (src/musubi_tuner/zimage/zimage_utils.py).
    "Qwen/Qwen3-4B": {
        "layers": 36,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 2560,
        "attentionHeads": 32,
        "vocabSize": 151_936,
        "tiedEmbeddings": True,
        "dtype": "bfloat16",
        # Tied embeddings: 36 x 100,930,816 per layer (intermediate_size 9,728) + 151,936 x 2,560
        # embedding + 2,560 norm = 4,022,468,096; the model card: 4.0B (3.6B without embeddings).
        # Stored once: the index's total_size is 8,044,936,192 bytes = 2 x 4,022,468,096.
        "parameters": 4_022_468_096,
        "maxPositionEmbeddings": 40_960,
        "revision": "1cfa9a7208912126459214e8b04321603b3df60c",
    },
    # config.json in ai-dynamo/aiconfigurator (model_configs/Qwen--Qwen3-8B_config.json).
    "Qwen/Qwen3-8B": {
        "layers": 36,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 4096,
        "attentionHeads": 32,
        "vocabSize": 151_936,
        "dtype": "bfloat16",
        # 36 x 192,946,432 per layer (intermediate_size 12,288) + 2 x 151,936 x 4,096 (embedding,
        # lm_head) + 4,096 norm = 8,190,735,360; the model card: 8.2B (6.95B without embeddings).
        "parameters": 8_190_735_360,
        "maxPositionEmbeddings": 40_960,
        "revision": "b968826d9c46dd6066d109eabc6255188de91218",
    },
    # config.json in inference-sim/inference-sim (model_configs/qwen3-14b/config.json).
    "Qwen/Qwen3-14B": {
        "layers": 40,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 5120,
        "attentionHeads": 40,
        "vocabSize": 151_936,
        "dtype": "bfloat16",
        # 40 x 330,311,936 per layer (intermediate_size 17,408) + 2 x 151,936 x 5,120 (embedding,
        # lm_head) + 5,120 norm = 14,768,307,200; the model card: 14.8B (13.2B without embeddings).
        "parameters": 14_768_307_200,
        "maxPositionEmbeddings": 40_960,
        "revision": "40c069824f4251a91eefaf281ebe4c544efd3e18",
    },
    # config.json in ai-dynamo/aiconfigurator (model_configs/Qwen--Qwen3-32B_config.json).
    "Qwen/Qwen3-32B": {
        "layers": 64,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 5120,
        "attentionHeads": 64,
        "vocabSize": 151_936,
        "dtype": "bfloat16",
        # 64 x 487,598,336 per layer (intermediate_size 25,600) + 2 x 151,936 x 5,120 (embedding,
        # lm_head) + 5,120 norm = 32,762,123,264; the model card: 32.8B (31.2B without embeddings).
        "parameters": 32_762_123_264,
        "maxPositionEmbeddings": 40_960,
        "revision": "9216db5781bf21249d130ec9da846c4624c16137",
    },
    # config.json in inference-sim/inference-sim (model_configs/llama-3.1-8b-instruct/config.json, as
    # first committed). No head_dim: 4,096 / 32 heads = 128.
    "meta-llama/Llama-3.1-8B-Instruct": {
        "layers": 32,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 4096,
        "attentionHeads": 32,
        "vocabSize": 128_256,
        "dtype": "bfloat16",
        # 32 x 218,112,000 per layer (intermediate_size 14,336) + 2 x 128,256 x 4,096 (embedding,
        # lm_head) + 4,096 norm = 8,030,261,248; the model card: 8B.
        "parameters": 8_030_261_248,
        "maxPositionEmbeddings": 131_072,
        "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
    },
    # config.json in inference-sim/inference-sim (model_configs/llama-3.1-70b-instruct/config.json).
    # No head_dim: 8,192 / 64 heads = 128.
    "meta-llama/Llama-3.1-70B-Instruct": {
        "layers": 80,
        "kvHeads": 8,
        "headDim": 128,
        "hiddenSize": 8192,
        "attentionHeads": 64,
        "vocabSize": 128_256,
        "dtype": "bfloat16",
        # 80 x 855,654,400 per layer (intermediate_size 28,672) + 2 x 128,256 x 8,192 (embedding,
        # lm_head) + 8,192 norm = 70,553,706,496; the model card: 70B.
        "parameters": 70_553_706_496,
        "maxPositionEmbeddings": 131_072,
        "revision": "1605565b47bb9346c5515c34102e054115b4f98b",
    },
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
