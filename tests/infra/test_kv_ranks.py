"""How NixlConnector pairs a prefill and a decode worker's ranks (infra/kv_ranks.py), on the cases
vLLM 0.31.0's own code spells out; the engine tier holds every case to that code
(tests/engine/test_kv_pairs.py)."""

from __future__ import annotations

import pytest

from infra import kv_ranks
from infra.kv_ranks import RankRead


def test_four_decode_ranks_read_halves_of_two_prefill_ranks():
    # The example in vLLM 0.31.0's NixlConnectorWorker.add_remote_agent docstring (decode TP 4,
    # prefill TP 2): decode ranks 0 and 1 read the two halves of prefill rank 0's heads, 2 and 3 of
    # prefill rank 1's. With 8 KV heads a prefill rank holds 4, a decode rank 2: heads 0-1 and 2-3 of each.
    assert kv_ranks.reads(2, 4, 8) == (RankRead(0, 0, 2, 0), RankRead(1, 0, 2, 2), RankRead(2, 1, 2, 0),
                                       RankRead(3, 1, 2, 2))


def test_a_decode_rank_reads_every_prefill_rank_of_its_heads_where_prefill_has_more():
    assert kv_ranks.reads(4, 2, 8) == (RankRead(0, 0, 2), RankRead(0, 1, 2), RankRead(1, 2, 2), RankRead(1, 3, 2))
    assert kv_ranks.reads(8, 1, 8) == tuple(RankRead(0, p, 1) for p in range(8))


@pytest.mark.parametrize("prefill_tp, decode_tp", [(p, d) for p in (1, 2, 4, 8) for d in (1, 2, 4, 8)])
def test_every_head_moves_once_and_every_decode_rank_gets_its_share(prefill_tp, decode_tp):
    reads = kv_ranks.reads(prefill_tp, decode_tp, 8)
    # Each head once (prefill rank p's own heads are p x 8 / P on), none left behind.
    held = kv_ranks.heads_per_rank(prefill_tp, 8)
    moved = sorted(r.prefill_rank * held + r.first_head + i for r in reads for i in range(r.heads))
    assert moved == list(range(8))
    for rank in range(decode_tp):
        assert sum(r.heads for r in reads if r.decode_rank == rank) == kv_ranks.heads_per_rank(decode_tp, 8)
    # A read never takes more than the prefill rank holds.
    assert all(r.first_head + r.heads <= held for r in reads)


@pytest.mark.parametrize("prefill_tp, decode_tp, said", [
    (2, 5, "Local tensor parallel size 5 is not divisible by remote tensor parallel size 2."),
    (4, 6, "Local tensor parallel size 6 is not divisible by remote tensor parallel size 4."),
    (3, 2, "Remote tensor parallel size 3 is not divisible by local tensor parallel size 2.")])
def test_sizes_that_do_not_divide_are_refused_in_vllms_words(prefill_tp, decode_tp, said):
    why = kv_ranks.refusal(prefill_tp, decode_tp, 12)
    assert "kv_connector/utils.py, TransferTopology.tp_ratio" in why and said in why
    with pytest.raises(ValueError, match="neither divides the other"):
        kv_ranks.reads(prefill_tp, decode_tp, 12)


def test_replicated_prefill_heads_into_fewer_decode_ranks_are_refused_and_more_are_taken():
    # 16 prefill ranks over 8 KV heads: each head on two ranks. vLLM's handshake refuses reading
    # them into 4 decode ranks; into 16 or 32 it reads rank to rank.
    assert "_validate_remote_agent_handshake" in kv_ranks.refusal(16, 4, 8)
    assert kv_ranks.refusal(16, 16, 8) is None and kv_ranks.refusal(16, 32, 8) is None
    # A decode worker with more ranks than heads holds one (replicated) head a rank: two ranks read each.
    assert kv_ranks.reads(4, 16, 8)[:5] == (RankRead(0, 0, 1, 0), RankRead(1, 0, 1, 0), RankRead(2, 0, 1, 1),
                                            RankRead(3, 0, 1, 1), RankRead(4, 1, 1, 0))
