"""The built-in models (infra/catalogue.py, BUILTIN_MODELS): a stack file that names one gets its
geometry, the KV bytes per token that geometry implies are the ones worked out by hand, the parameter
count is the one the geometry gives, and every pinned revision is a commit that cannot move.

The config.json facts the catalogue does not keep (intermediate_size, vocab_size, tie_word_embeddings)
are written out below as docs/sources.md records them, so the parameter count is checked against
figures the catalogue did not produce."""

from __future__ import annotations

import re

import pytest

from infra.catalogue import BUILTIN_MODELS, DEFAULT_MODEL
from infra.config.model import DTYPE_BYTES, Model
from infra.load import load
from infra.resolved import kv_bytes_per_token
from tests.helpers import raw_config

MODELS = list(BUILTIN_MODELS)

# From each model's config.json (docs/sources.md, "Built-in models"): intermediate_size, vocab_size,
# tie_word_embeddings, and whether its attention has q_norm/k_norm (Qwen3) or not (Llama).
CONFIG_JSON = {
    "Qwen/Qwen3-0.6B": (3072, 151936, True, True),
    "Qwen/Qwen3-1.7B": (6144, 151936, True, True),
    "Qwen/Qwen3-4B": (9728, 151936, True, True),
    "Qwen/Qwen3-8B": (12288, 151936, False, True),
    "Qwen/Qwen3-14B": (17408, 151936, False, True),
    "Qwen/Qwen3-32B": (25600, 151936, False, True),
    "meta-llama/Llama-3.1-8B-Instruct": (14336, 128256, False, False),
    "meta-llama/Llama-3.1-70B-Instruct": (28672, 128256, False, False),
}

# The sizes the Qwen3 model cards publish ("Number of Parameters"), in billions, to one decimal.
MODEL_CARD_BILLIONS = {"Qwen/Qwen3-0.6B": 0.6, "Qwen/Qwen3-1.7B": 1.7, "Qwen/Qwen3-4B": 4.0, "Qwen/Qwen3-8B": 8.2,
                       "Qwen/Qwen3-14B": 14.8, "Qwen/Qwen3-32B": 32.8}


def _geometry_parameters(name: str) -> int:
    """Embedding, per layer q/k/v/o (+ Qwen3's q_norm and k_norm), gate/up/down and two RMSNorms, the
    final norm, and an lm_head unless the embeddings are tied."""
    facts = BUILTIN_MODELS[name]
    h, heads, kv, hd, layers = (facts["hiddenSize"], facts["attentionHeads"], facts["kvHeads"], facts["headDim"],
                                facts["layers"])
    intermediate, vocab, tied, qk_norm = CONFIG_JSON[name]
    attention = h * heads * hd + 2 * h * kv * hd + heads * hd * h + (2 * hd if qk_norm else 0)
    layer = attention + 3 * h * intermediate + 2 * h
    embedding = vocab * h
    return layers * layer + embedding + h + (0 if tied else embedding)


def test_every_built_in_model_has_its_config_json_facts_here():
    assert set(CONFIG_JSON) == set(BUILTIN_MODELS)
    assert DEFAULT_MODEL in BUILTIN_MODELS


@pytest.mark.parametrize("name", MODELS)
def test_kv_bytes_per_token_is_k_and_v_for_every_layer_and_kv_head(name):
    facts = BUILTIN_MODELS[name]
    per_token = kv_bytes_per_token(facts["layers"], facts["kvHeads"], facts["headDim"], DTYPE_BYTES[facts["dtype"]])
    assert per_token == 2 * facts["layers"] * facts["kvHeads"] * facts["headDim"] * DTYPE_BYTES[facts["dtype"]]


@pytest.mark.parametrize("name, by_hand", [
    # K and V x 32 layers x 8 KV heads x head_dim 128 (4,096 / 32; its config.json has no head_dim) x 2 B.
    ("meta-llama/Llama-3.1-8B-Instruct", 131_072),
    # K and V x 64 layers x 8 KV heads x head_dim 128 (set explicitly; 5,120 / 64 would be 80) x 2 B.
    ("Qwen/Qwen3-32B", 262_144),
])
def test_kv_bytes_per_token_matches_the_figure_worked_out_by_hand(name, by_hand):
    facts = BUILTIN_MODELS[name]
    assert kv_bytes_per_token(facts["layers"], facts["kvHeads"], facts["headDim"], DTYPE_BYTES[facts["dtype"]]) \
        == by_hand


@pytest.mark.parametrize("name", MODELS)
def test_a_stack_file_naming_a_built_in_model_gets_its_geometry(name):
    stack = load(raw_config("cross-server", lambda c: c.update(model={"name": name})), "cross-server")
    m, facts = stack.config.model, BUILTIN_MODELS[name]
    assert m.name == name
    assert (m.layers, m.kv_heads, m.head_dim, m.hidden_size, m.attention_heads) == (
        facts["layers"], facts["kvHeads"], facts["headDim"], facts["hiddenSize"], facts["attentionHeads"])
    assert (m.dtype, m.parameters, m.max_position_embeddings, m.revision) == (
        facts["dtype"], facts["parameters"], facts["maxPositionEmbeddings"], facts.get("revision"))
    assert m.stored_parameters == facts.get("checkpointParameters", facts["parameters"])


def test_a_key_the_stack_file_sets_wins_over_the_built_in_one():
    stack = load(raw_config("cross-server", lambda c: c.update(model={"name": "Qwen/Qwen3-8B", "layers": 2})),
                 "cross-server")
    assert (stack.config.model.layers, stack.config.model.kv_heads) == (2, 8)


@pytest.mark.parametrize("name", MODELS)
def test_the_parameter_count_is_the_one_its_geometry_gives(name):
    counted = _geometry_parameters(name)
    assert abs(BUILTIN_MODELS[name]["parameters"] - counted) <= 0.01 * counted


@pytest.mark.parametrize("name", list(MODEL_CARD_BILLIONS))
def test_the_parameter_count_rounds_to_the_model_cards_size(name):
    assert round(BUILTIN_MODELS[name]["parameters"] / 1e9, 1) == MODEL_CARD_BILLIONS[name]


@pytest.mark.parametrize("name", [n for n, f in BUILTIN_MODELS.items() if "checkpointParameters" in f])
def test_a_checkpoint_that_stores_the_tied_embedding_twice_counts_it_twice(name):
    facts = BUILTIN_MODELS[name]
    _, vocab, tied, _ = CONFIG_JSON[name]
    assert tied
    assert facts["checkpointParameters"] == facts["parameters"] + vocab * facts["hiddenSize"]


@pytest.mark.parametrize("name", MODELS)
def test_each_pinned_revision_is_a_full_commit_hash(name):
    revision = BUILTIN_MODELS[name].get("revision")
    if revision is None:
        pytest.skip(f"{name} pins no revision: it loads the Hub's main branch")
    assert re.fullmatch(r"[0-9a-f]{40}", revision)
    assert Model.model_validate({"name": name}).revision == revision
