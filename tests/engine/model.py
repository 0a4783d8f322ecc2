"""The models the engine tier hands Dynamo and vLLM: Qwen3-0.6B's own config.json (the lab's stacks)
and Qwen3-32B's (the two-node-rdma example), as test data, in a local directory (nothing is loaded
from a hub; no weights, no tokenizer: building the engine config and checking the KV pool read only
config.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

NAME = "Qwen/Qwen3-0.6B"
# Every field of config.json as the Hugging Face Hub serves it for Qwen/Qwen3-0.6B at revision
# c1899de289a04d12100db370d81485cdf75e47ca (the revision the project's sizing cites).
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# Qwen/Qwen3-32B's config.json: the geometry docs/sources.md ("Built-in models") cites, with the
# fields every Qwen3 config.json shares (architecture, token ids, norms, rope) as 0.6B's has them.
EXAMPLE_NAME = "Qwen/Qwen3-32B"
EXAMPLE_CONFIG = {**CONFIG, "hidden_size": 5120, "intermediate_size": 25600, "max_window_layers": 64,
                  "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8,
                  "tie_word_embeddings": False}
CONFIGS = {NAME: CONFIG, EXAMPLE_NAME: EXAMPLE_CONFIG}

# KV bytes of one 16-token block across all layers (K and V, bfloat16): 1,835,008.
BLOCK_TOKENS = 16
BLOCK_BYTES = 2 * CONFIG["num_hidden_layers"] * CONFIG["num_key_value_heads"] * CONFIG["head_dim"] * 2 * BLOCK_TOKENS


def write(directory: Path, name: str = NAME, config: Optional[dict] = None) -> Path:
    """A model directory holding `name`'s config.json (or `config`), what vLLM's and Dynamo's parsers
    read for a local model."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config or CONFIGS[name], indent=2) + "\n")
    return directory


def shaped(layers: int, kv_heads: int, head_dim: int, attention_heads: int, hidden_size: int) -> dict:
    """A Qwen3 config.json with another model's counts: what vLLM's tensor-parallel checks and its
    NIXL pairing read of a model is these counts (heads, KV heads, head size, layers) and the dtype,
    not the architecture, so each built-in model (Llama's too) is checked with its own counts in
    Qwen3's shape."""
    return {**CONFIG, "num_hidden_layers": layers, "max_window_layers": layers, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "num_attention_heads": attention_heads, "hidden_size": hidden_size}
