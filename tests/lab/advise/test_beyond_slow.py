"""advise beyond the lab with the predictor's full estimate (slow tier): eight nodes through the
bounded search, and tensor parallelism on two 8-GPU nodes. Every figure is outside the envelope."""

from __future__ import annotations

import pytest

from dynamo_lab.advise import search
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.run import check
from tests.helpers import ROOT
from tests.lab.advise.common import advise, base, point

pytestmark = pytest.mark.slow

SAVED = ROOT / "tests" / "data" / "preflight"
FULL = (3, 5)


def test_eight_nodes_the_bounded_search_recommends_a_layout_preflight_accepts():
    data = cluster_data.read_file(str(SAVED / "eight-nodes.json"))
    a = advise(data=data, full=FULL)
    assert a.left_out == [] and a.bounded == 8 and a.winner is not None
    assert check(a.winner.stack, data).fits
    assert all(f.best is not None for f in a.families if f.looked_at > len(f.refused_config))
    assert a.winner.envelope.extrapolated  # five 24GB nodes: outside what the lab validated


def test_two_8_gpu_nodes_rank_tensor_parallel_layouts_and_move_kv_over_rdma():
    data = cluster_data.read_file(str(SAVED / "two-8gpu-rdma.json"))
    a = advise(base("two-node-rdma"), data=data, traffic=point(2, 4), full=FULL, base_name="two-node-rdma")
    assert {g.tensor_parallel for c in a.ranked for g in c.layout.groups} - {1}
    separated = [c for c in a.candidates
                 if c.status in (search.SCREENED, search.REFINED) and c.layout.kind != "aggregated"]
    assert separated and all(g.kv_transfer.transport == "rdma" for c in separated for g in c.stack.config.workers)
    assert all(c.envelope.extrapolated for c in a.ranked)
