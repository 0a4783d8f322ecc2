"""The probe payload's descriptor arithmetic and roles, without NIXL (the transfers are lab tier)."""

from __future__ import annotations

import pytest

from infra.payloads import kv_probe

COLD = 2371 * 114_688  # one average request's KV: 2,371 tokens of Qwen3-0.6B
WARM = 371 * 114_688  # a warm decode worker pulls only the unique tail
BLOCK = 64 * 1024  # 2 x 16 tokens x 8 KV heads x 128 x 2 bytes


def test_a_cold_request_is_4172_block_descriptors_of_64_kib():
    p = kv_probe.plan(COLD, "blocks", 28, BLOCK, 1170)
    assert (p["blocks"], p["descriptors"], p["descriptor_bytes"]) == (149, 4172, BLOCK)
    # Whole blocks move: the 149th block is partly empty, and moves anyway.
    assert p["bytes"] == 149 * 28 * BLOCK == 273_416_192 > COLD
    assert p["pool_bytes"] == 28 * 1170 * BLOCK


def test_a_warm_request_is_24_blocks():
    p = kv_probe.plan(WARM, "blocks", 28, BLOCK, 1170)
    assert (p["blocks"], p["descriptors"], p["bytes"]) == (24, 672, 24 * 28 * BLOCK)


def test_contiguous_is_one_descriptor_of_exactly_the_bytes():
    p = kv_probe.plan(COLD, "contiguous", 28, BLOCK, 0)
    assert (p["descriptors"], p["descriptor_bytes"], p["bytes"], p["pool_bytes"]) == (1, COLD, COLD, COLD)


def test_a_pool_smaller_than_one_transfer_is_refused():
    with pytest.raises(ValueError, match="--pool-blocks 100 cannot hold the 149 blocks of one transfer"):
        kv_probe.plan(COLD, "blocks", 28, BLOCK, 100)


def test_the_initiator_of_a_read_pulls_and_of_a_write_pushes():
    # READ: the target holds the KV (prefill-like) and the initiator pulls it (decode-like).
    assert kv_probe._is_source("target", "READ") and not kv_probe._is_source("initiator", "READ")
    # WRITE: the initiator holds the KV and pushes it into the target.
    assert kv_probe._is_source("initiator", "WRITE") and not kv_probe._is_source("target", "WRITE")


def test_bad_arguments_are_refused_before_any_nixl(capsys):
    with pytest.raises(SystemExit) as info:
        kv_probe.main(["target", "--port", "1", "--bytes", str(COLD), "--pool-blocks", "10"])
    assert info.value.code == 2
    assert "--pool-blocks 10 cannot hold the 149 blocks" in capsys.readouterr().err
