"""The engine settings a worker runs with (ResolvedStack.engine, infra/resolved.py), which the
predictor's scheduler reads: from its extraArgs through the one reader of engine flags
(infra/config/engine_flags.py) with vLLM's own types (any spelling argparse takes, `8k`,
abbreviations, the last given; what the check refuses is tested beside it), else vLLM 0.31.0's
defaults by the card's memory."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import loaded


def _extra(args: list[str]):
    def edit(c: dict[str, Any]) -> None:
        c["workers"][0]["extraArgs"] = args
    return edit


@pytest.mark.parametrize("args, tokens, seqs", [
    ([], None, None), (["--max-num-batched-tokens", "4096"], 4096, None), (["--max_num_batched_tokens=8k"], 8000, None),
    (["--max-num-batched-tokens", "4K"], 4096, None), (["--max-num-batched", "4096"], 4096, None),
    (["--max-num-b=2.5k"], 2500, None), (["--max-num-seqs", "8"], None, 8), (["--max-num-se", "8"], None, 8),
    (["--max_num_seqs=8", "--max-num-seqs", "16"], None, 16), (["--max-num-seqs", " 8"], None, 8),
    (["--max-num-seqs=\t8"], None, 8), (["--mm-prompt-template", "-1", "--max-num-seqs", "8"], None, 8),
])
def test_a_worker_runs_with_the_limits_vllm_reads_from_its_flags(args, tokens, seqs):
    stack = loaded("cross-server", _extra(args))
    got = stack.resolved.engine(stack.config.workers[0])
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (tokens or 2048, seqs or 256)


@pytest.mark.parametrize("memory, tokens, seqs", [
    ("24564Mi", 2048, 256), ("70Gi", 8192, 1024), ("80Gi", 8192, 1024), ("159Gi", 8192, 1024),
    ("160Gi", 16384, 1024), ("180Gi", 16384, 1024),
])
def test_without_flags_a_worker_gets_vllms_defaults_for_its_cards_memory(memory, tokens, seqs):
    def card(c: dict[str, Any]) -> None:
        c["gpuClasses"] = {
            "gpu-8gb": {"memory": memory, "effectiveTflops": 15, "nodeSelector": [{"key": "a", "operator": "Exists"}]},
            "gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [{"key": "b", "operator": "Exists"}]}}
    stack = loaded("cross-server", card)
    got = stack.resolved.engine(stack.config.workers[0])
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (tokens, seqs)
