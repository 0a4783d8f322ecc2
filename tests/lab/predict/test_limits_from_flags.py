"""The scheduler limits the predictor reads from a worker's extraArgs come from the one reader of
engine flags (infra/config/engine_flags.py) with vLLM's own types: any spelling argparse takes,
`8k`, abbreviations, the last given; what the check refuses is tested beside it."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_lab.predict.costs import limits
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
def test_the_predictor_reads_the_limits_vllm_reads(args, tokens, seqs):
    stack = loaded("cross-server", _extra(args))
    group = stack.config.workers[0]
    got = limits(group, stack.config.gpu_classes[group.gpu_class])
    assert (got.max_num_batched_tokens, got.max_num_seqs) == (tokens or 2048, seqs or 256)
