"""Stack-file mistakes in numbers for the role: host memory floors, a pool against one max-length
sequence, a context against the model and the requests, each refused with the file, the key and the
fix, and nothing registered."""

from __future__ import annotations

import pytest

from tests.infra.config.refusing import F, decode, prefill, refused_text

# --- numbers right for the role -------------------------------------------------------------------

def test_an_aggregated_worker_below_its_floor_hears_about_its_base_not_a_mirror():
    msg = refused_text(lambda c: c["workers"][0].update(memoryLimit="2Gi"), stack="kv-routing")
    assert msg == (
        "Pulumi.kv-routing.yaml: workers.worker-24gb.memoryLimit: 2048Mi is below the 3.5Gi (3584Mi) this worker "
        "needs: its vLLM base resident memory (sizing.vllmBaseMemory; an aggregated worker keeps no KV host "
        "mirror), and the pod would be OOMKilled loading the model. Raise memoryLimit to at least 3584Mi, or "
        "lower sizing.vllmBaseMemory if you measured less")
    assert "mirror of" not in msg and "headroom" not in msg


def test_a_kv_pool_that_cannot_hold_one_max_length_sequence_is_refused():
    # 200Mi = 114 blocks of 16 tokens x 28 layers x 64 KiB; the default context is 2,371 + 64 tokens
    # rounded up to 2,448, 153 blocks, plus the null block vLLM keeps back.
    assert refused_text(decode(kvCacheBytes="200Mi")) == (
        f"{F}: workers.decode.kvCacheBytes: the 200.0Mi KV pool holds 114 blocks of 16 tokens (1,835,008 bytes "
        "each across 28 layers), but one sequence of max_model_len 2,448 (derived) needs 154: its 153 blocks and "
        "vLLM's null block. vLLM refuses to start (\"To serve at least one request with the model's max seq len "
        "...\") and the pod crash-loops. Fix: raise workers.decode.kvCacheBytes to at least 270Mi (a shorter "
        "context does not help: this pool cannot hold even the sized requests, 2,435 tokens)")


def test_a_max_model_len_in_extra_args_above_the_pool_is_refused_with_both_fixes():
    # The lab's 2Gi prefill pool holds 1,170 blocks: 18,704 tokens after the null block.
    msg = refused_text(prefill(extraArgs=["--max-model-len", "32768"]))
    assert msg.startswith(f"{F}: workers.prefill.kvCacheBytes: the 2.0Gi KV pool holds 1,170 blocks")
    assert "one sequence of max_model_len 32,768 (extraArgs) needs 2,049" in msg
    assert ("Fix: raise workers.prefill.kvCacheBytes to at least 3586Mi, or shorten the context with "
            "workers.prefill.extraArgs --max-model-len: at most 18,704 tokens fit") in msg


def test_the_models_whole_context_does_not_fit_the_shipped_pools():
    # What a worker without --max-model-len would ask for: Qwen3-0.6B's 40,960 tokens, 4.375 GiB of KV.
    msg = refused_text(lambda c: c.setdefault("workload", {}).update(maxModelLen=40960))
    assert "workers.prefill.kvCacheBytes: the 2.0Gi KV pool" in msg
    assert "workers.decode.kvCacheBytes: the 4.0Gi KV pool" in msg
    assert "needs 2,561" in msg and "at least 4482Mi" in msg  # 2,561 x 1.75Mi


@pytest.mark.parametrize("value, meant", [
    (50000, "maxModelLen 50000 (50,000 tokens) is longer than Qwen/Qwen3-0.6B's context "
            "(max_position_embeddings 40,960 in its config.json)"),
    (2000, "maxModelLen 2000 (2,000 tokens) is shorter than the requests this stack is sized for: 2,371 input "
           "tokens (workload.inputTokens) + 64 output tokens (workload.outputTokens) = 2,435"),
])
def test_a_context_length_outside_the_model_or_the_requests_is_refused(value, meant):
    msg = refused_text(lambda c: c.setdefault("workload", {}).update(maxModelLen=value))
    assert msg.startswith(f"{F}: workload.maxModelLen: {meant}")


@pytest.mark.parametrize("value", ["-1", "auto", "lots"])
def test_a_max_model_len_that_is_not_a_token_count_is_refused(value):
    msg = refused_text(decode(extraArgs=["--max-model-len", value]))
    assert msg.startswith(f"{F}: workers.decode.extraArgs: --max-model-len {value!r} is not a token count")


def test_a_benchmark_longer_than_the_workers_context_is_refused():
    def edit(c):
        c.setdefault("workload", {}).update(maxModelLen=2448)
        c["benchmark"] = {"enabled": True, "uniqueTokens": 600}
    msg = refused_text(edit)
    assert msg.startswith(f"{F}: benchmark: the benchmark's requests take 2,664 tokens (prefixTokens 2000 + "
                          "uniqueTokens 600 + outputTokens 64), more than the 2,448-token context")


def test_a_request_above_the_floor_without_a_limit_is_refused():
    assert refused_text(prefill(memoryRequest="20Gi")).startswith(
        f"{F}: workers.prefill.memoryRequest: 20480Mi is above the host memory floor (the limit while memoryLimit "
        "is unset), 5837Mi; Kubernetes rejects a request above its limit.")
