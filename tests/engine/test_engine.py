"""The engine tier: every worker command dynamo-lab renders, through Dynamo 1.6.1's and vLLM 0.31.0's
own code (python3 dev.py test-engine).

The tests run here, in .venv, and build each worker's command from the project's own builders: the
stack's config and sizing (`helpers.sized`), the DynamoGraphDeployment (`graph.deployment`), its
worker containers' `python3 -m dynamo.vllm ARGS`. The ARGS, --model pointed at a local directory
holding Qwen3-0.6B's config.json (tests/engine/model.py), go to tests/engine/check_workers.py, which
runs in the tier's own environment (.venv-engine, the real ai-dynamo, ai-dynamo-runtime and vllm
wheels as tests/engine/requirements.txt pins them): Dynamo's parser, vLLM's engine config, vLLM's
connector lookup and Dynamo's connector protocol, and vLLM's KV pool admission. Its docstring says
step by step which code is Dynamo's or vLLM's and which is ours (the per-layer KV spec, the
attention backend). One checker process for the whole tier: importing vLLM takes most of a minute.

Checked here, on a CPU, with no GPU and no hub: that a worker's flags parse, that its KV transfer
config builds and names a connector Dynamo 1.6 takes, and that vLLM admits its pinned KV pool for
its max_model_len (vLLM exits at start when the pool cannot hold one such sequence). Not checked:
anything a GPU decides (free memory, the attention backend's own pick, CUDA graphs), loading weights.
"""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from tests.engine import model
from tests.engine.checked import (
    BITE_GROUP,
    BITE_STACK,
    CASES,
    EXAMPLE_STACK,
    assumed,
    context_of,
    describe,
    effective,
    usable_tokens,
)
from tests.helpers import sized

pytestmark = pytest.mark.engine



def test_the_engine_environment_is_the_pinned_one(engine):
    assert engine.versions == {"ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "vllm": "0.31.0", "torch": "2.13.0"}


@pytest.mark.parametrize("stack,variant", CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_every_worker_passes_dynamo_s_parser_and_vllm_s_kv_check(engine, stack, variant):
    assert (stack, variant) not in engine.render_errors, engine.render_errors.get((stack, variant))
    mine = {k: r for k, r in engine.results.items() if k.startswith(f"{stack}/{variant}/")}
    assert mine, "no workers rendered"
    refused = [describe(k, r) for k, r in mine.items() if not r["ok"]]
    assert refused == [], "\n".join(refused)
    # The sizing's warm transfers rest on the prefix cache: vLLM's own config has it on.
    assert {k: r["prefix_caching"] for k, r in mine.items()} == {k: True for k in mine}
    # The sizing rests on 16-token blocks: the render must say so, not leave it to the GPU's backend.
    assert {k: (r["block_size"], r["block_size_given"]) for k, r in mine.items()} == {k: (16, True) for k in mine}


def test_a_pool_that_cannot_hold_max_model_len_is_refused_by_vllm(engine):
    fits, over, unset = (engine.results[f"bite/{k}"] for k in ("fits", "one-token-over", "no-max-model-len"))
    tokens = usable_tokens(fits["pool_bytes"])
    assert fits["ok"], describe("bite/fits", fits)
    assert fits["max_model_len"] == tokens and fits["num_blocks"] == tokens // model.BLOCK_TOKENS + 1
    for r, length in ((over, tokens + 1), (unset, model.CONFIG["max_position_embeddings"])):
        assert not r["ok"] and r["max_model_len"] == length
        message = f"To serve at least one request with the model's max seq len ({length})"
        assert message in r["error"], describe("bite", r)
        assert message in r["check_enough_kv_cache_memory"], "vLLM's check on its own refuses it too"


def test_the_sizing_refuses_a_context_exactly_where_vllm_does(engine):
    """The project's own check (infra.validate, the sizing) and vLLM's draw the same line: the longest
    context a pool holds renders and starts; one token more is refused by both."""
    assert (BITE_STACK, "bite/fits") not in engine.render_errors, engine.render_errors.get((BITE_STACK, "bite/fits"))
    fits, over = engine.results["bite/fits"], engine.results["bite/one-token-over"]
    assert fits["ok"] and not over["ok"], (describe("bite/fits", fits), describe("bite/one-token-over", over))
    with pytest.raises(ConfigError, match=f"max_model_len {over['max_model_len']:,}"):
        sized(BITE_STACK, context_of(BITE_GROUP, over["max_model_len"]))


def test_a_connector_dynamo_does_not_support_is_refused_by_dynamo(engine):
    push = engine.results["bite/push-connector"]
    assert push["connector"] == "NixlPushConnector"  # vLLM built it and has the class (an earlier stage)
    assert push["stage"] == "dynamo.vllm.kv_connector_protocols.make_kv_connector_protocol", describe("push", push)
    assert push["error"].startswith("ValueError: Unsupported kv_connector='NixlPushConnector' for PD.")
    assert not push["nixl_side_channel_host_set"], "Dynamo sets the NIXL side channel only for NixlConnector"


def test_dynamo_sets_the_nixl_side_channel_host_for_every_disaggregated_worker(engine):
    disaggregated = {k: r for k, r in engine.results.items() if not k.startswith("bite/") and r.get("connector")}
    assert disaggregated
    assert {k: (r["connector"], r["nixl_side_channel_host_set"]) for k, r in disaggregated.items()} == {
        k: ("NixlConnector", True) for k in disaggregated}


def test_every_worker_runs_with_the_values_the_sizing_assumed(engine):
    """For every checked worker, shipped and varied, Dynamo's and vLLM's parsers take exactly the
    context, block size, pool, GPU share, revision, KV transfer and events the sizing assumed."""
    assert engine.sized
    wrong = {}
    for key, (cfg, group, sizing) in engine.sized.items():
        if key.startswith("drawn/"):
            continue  # the property test's, some of which the parsers exit on
        r = engine.results[key]
        got, want = effective(r.get("parsed") or {}), assumed(cfg, group, sizing, engine.model_of(key))
        if got != want:
            wrong[key] = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    assert wrong == {}


def test_the_example_tp2_workers_start_with_a_ranks_pool_and_heads(engine):
    """Each two-node-rdma worker: Dynamo's parser takes --tensor-parallel-size 2, vLLM's engine config
    builds, and vLLM's per-rank admission counts the blocks the sizing counts: a rank's pool over a
    rank's share of a block (4 of Qwen3-32B's 8 KV heads)."""
    cfg, _ = sized(EXAMPLE_STACK)
    for group in cfg.workers:
        key = f"{EXAMPLE_STACK}/shipped/{group.name}"
        r = engine.results[key]
        assert r["ok"], f"{key}: {r['stage']}: {r['error']}"
        assert r["parsed"]["tensor_parallel_size"] == group.tensor_parallel == 2
        _, g, s = engine.sized[key]
        c = model.EXAMPLE_CONFIG
        heads = c["num_key_value_heads"] // 2
        rank_block = 2 * c["num_hidden_layers"] * heads * c["head_dim"] * 2 * model.BLOCK_TOKENS
        assert r["page_bytes"] * r["layers"] == rank_block
        assert r["num_blocks"] == s.pool_blocks == s.kv_cache_bytes // rank_block
        assert r["check_enough_kv_cache_memory"] == "passed"
