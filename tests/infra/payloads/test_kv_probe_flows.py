"""The several-flows initiator's arithmetic, without NIXL (the transfers are lab tier)."""

from __future__ import annotations

import statistics

import pytest

from infra.payloads import kv_probe, kv_probe_flows

BLOCK = 64 * 1024


def test_each_flow_owns_its_own_blocks_in_every_layer_and_together_they_cover_the_pool_list():
    layers, blocks, flows = 3, 4, 2
    indices = kv_probe_flows.flow_indices(layers, blocks, flows)
    assert [len(i) for i in indices] == [layers * blocks] * flows
    assert sorted(i for flow in indices for i in flow) == list(range(layers * blocks * flows))
    # kv_probe.Pool lists its chunks layer by layer, 8 blocks a layer here: flow 0 owns blocks 0-3 of
    # each layer, flow 1 blocks 4-7.
    assert indices[0] == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]
    assert {i % 8 for i in indices[1]} == {4, 5, 6, 7}


def test_per_flow_figures_are_each_flows_own_and_the_median_over_rounds():
    rounds = [[0.2, 0.4], [0.25, 0.5], [0.3, 0.6]]
    s = kv_probe_flows.summary(100, rounds)
    assert (s["flow_seconds_min"], s["flow_seconds_max"]) == (0.2, 0.6)
    assert s["flow_seconds_median"] == pytest.approx(0.35)
    assert s["flow_seconds_median_by_flow"] == [0.25, 0.5]
    assert s["flow_throughput_bytes_per_s_min"] == pytest.approx(100 / 0.6)
    assert s["flow_throughput_bytes_per_s_max"] == pytest.approx(100 / 0.2)
    assert s["flow_throughput_bytes_per_s"] == pytest.approx(statistics.median([100 / x for r in rounds for x in r]))


def test_one_flow_or_pools_too_small_for_the_flows_are_refused_before_any_nixl(capsys):
    one = 149 * 28 * BLOCK
    common = ["initiator", "--connect", "127.0.0.1:1", "--bytes", str(one)]
    with pytest.raises(SystemExit) as info:
        kv_probe_flows.main(common + ["--flows", "1", "--pool-blocks", "1170"])
    assert info.value.code == 2 and "--flows must be at least 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        kv_probe_flows.main(common + ["--flows", "8", "--pool-blocks", "1170"])
    assert info.value.code == 2
    assert "cannot hold the 1192 blocks" in capsys.readouterr().err


def test_the_flows_initiator_speaks_to_kv_probes_own_target():
    # The target is started with N x one transfer's whole-block bytes: exactly N x its blocks.
    one = kv_probe.plan(2371 * 114_688, "blocks", 28, BLOCK, 1170)
    served = kv_probe.plan(4 * one["bytes"], "blocks", 28, BLOCK, 1170)
    assert served["blocks"] == 4 * one["blocks"] and served["descriptors"] == 4 * one["descriptors"]
