"""The open question's sweep (dynamo_lab/advise/crossover.py): each layout it predicts is one the
sizing and preflight accept on the saved cluster, and "first wins" reads the table as it says."""

from __future__ import annotations

from dynamo_lab import stack_files
from dynamo_lab.advise import crossover as x
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.checks import check
from infra.plan import load_stack
from tests.helpers import ROOT


def test_every_swept_layout_is_accepted_by_the_sizing_and_preflight_with_its_transport():
    base = stack_files.stack_doc(x.BASE)
    data = cluster_data.read_file(str(ROOT / x.CLUSTER))
    for layout, transport in ((x.AGG, "tcp"), (x.SPLITS[0], "tcp"), (x.SPLITS[2], "rdma")):
        doc = x.config(base, layout, max(x.PROMPTS), transport, 25)
        stack = load_stack("crossover", *stack_files.config_from_doc(doc))
        assert check(stack, data).fits
        assert stack.config.sizing.link.rate == 25e9
        if layout is not x.AGG:
            assert {g.kv_transfer.transport for g in stack.config.workers} == {transport}


def test_separation_first_wins_from_the_slowest_link_it_beats_aggregated_at_and_every_faster_one():
    agg = x.Result(2048, None, None, "agg", 300.0, 5.0, ())
    ttft = {1: 900.0, 10: 250.0, 25: 400.0, 100: 200.0, 400: 150.0}  # wins at 10, loses at 25
    rows = [agg] + [x.Result(2048, "rdma", g, "2 prefill + 2 decode on gpu-80gb (TP 2)", ms, 4.0, ())
                    for g, ms in ttft.items()]
    assert x.first_win(rows, 2048, "rdma", "ttft_p50_ms") == 100
    assert x.first_win(rows, 2048, "rdma", "requests_per_s") is None


def test_what_the_table_answers_is_said_in_words_read_off_it():
    rows = []
    for prompt, agg_ms in ((2048, 300.0), (8192, 1000.0), (32768, 2500.0)):
        rows.append(x.Result(prompt, None, None, "agg", agg_ms, 5.0, ()))
        for t in x.TRANSPORTS:
            for g in x.LINKS_GBIT:
                # RDMA wins from 100 Gbit/s at 2k and 8k; nothing else ever wins.
                wins = t == "rdma" and prompt < 32768 and g >= 100
                rows.append(x.Result(prompt, t, g, "2 prefill + 2 decode on gpu-80gb (TP 2)",
                                     agg_ms / 2 if wins else agg_ms * 2, 6.0 if wins else 4.0, ()))
    assert x.findings(rows) == (
        "- **Over TCP**, separation beats aggregated serving (tokens a prompt): its TTFT p50 at no link swept "
        "for 2,048, 8,192 and 32,768; its requests/s at no link swept for 2,048, 8,192 and 32,768.\n"
        "- **Over RDMA**, separation beats aggregated serving (tokens a prompt): its TTFT p50 from 100 Gbit/s up "
        "for 2,048 and 8,192, at no link swept for 32,768; its requests/s from 100 Gbit/s up for 2,048 and 8,192, "
        "at no link swept for 32,768.")
