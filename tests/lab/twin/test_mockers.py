"""The twin's mockers, as pure data: one per replica with its path's throughput (runner.mockers)."""

from __future__ import annotations

import pytest

from dynamo_lab.twin import runner as twin
from infra.catalogue import SAME_NODE_BYTES_PER_SECOND
from tests.helpers import sized


def _mockers(stack, edit=None):
    return twin.mockers(*sized(stack, edit))


def test_twin_runs_one_mocker_per_replica_with_the_sized_path_bandwidth():
    cross = _mockers("cross-server")
    assert [(w.role, w.group) for w in cross] == [("prefill", "prefill"), ("decode", "decode"), ("decode", "decode")]
    assert all(w.bandwidth_gb_s == pytest.approx(0.115) for w in cross)
    same = _mockers("same-server")
    # NixlConnector's READ on one node, at the sizing's measured default.
    read = SAME_NODE_BYTES_PER_SECOND["READ"] / 1e9
    assert len(same) == 4 and all(w.bandwidth_gb_s == pytest.approx(read) for w in same)
    agg = _mockers("kv-routing")
    assert len(agg) == 6 and all(w.role == "agg" and w.bandwidth_gb_s is None for w in agg)
    args = cross[0].args("/m", "Qwen/Qwen3-0.6B")
    assert args[args.index("--kv-bytes-per-token") + 1] == "114688"
    assert args[args.index("--disaggregation-mode") + 1] == "prefill"
    assert args[args.index("--kv-transfer-bandwidth") + 1] == "0.115"


def test_twin_uses_a_measured_throughput_when_the_config_has_one():
    def edit(c):
        c["sizing"] = {"measured": [{"fromGroup": "prefill", "toGroup": "decode", "bytesPerSecond": "119M"}]}
    assert {w.bandwidth_gb_s for w in _mockers("cross-server", edit)} == {0.119}
