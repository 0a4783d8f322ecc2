"""The sizing report in words: its verdicts, and docs/sizing.md's sample, printed by the tool itself."""

from __future__ import annotations

from dynamo_lab.sizing_text import table, verdict
from tests.helpers import sized


def test_the_ledger_gives_both_sides_and_leaves_the_verdict_to_advise_where_the_link_caps_it():
    # Issue 45: one verdict. The sizing's per-request ledger once said separation "can pay" where
    # advise ranked it 4x worse: it now says what it costs and gains, and names the one verdict.
    for stack in ("cross-server", "same-server"):
        (t,) = sized(stack)[1].transfers
        said = verdict(t, stack)
        assert "expected case" in said and f"{t.expected_seconds:.2f} s of KV transfer" in said
        assert "no longer stalls the decode steps" in said  # the gain, in inter-token latency
        assert f"`dynamo-lab advise {stack}`'s verdict" in said
        assert "it pays here" not in said and "can pay" not in said and "does not pay" not in said
    (t,) = sized("cross-server")[1].transfers
    assert f"at most {t.link_max_requests_per_s:.2f} requests/s" in verdict(t, "cross-server")


# docs/sizing.md's samples (the report, the 3584Mi refusal) are marked samples of `dynamo-lab sizing`:
# tests/test_docs_samples.py holds them to what the command prints.


def test_the_same_node_default_is_labelled_an_estimate():
    assert "Same-node throughput: an ESTIMATE from a development machine" in table(sized("same-server")[1])
    assert "Same-node throughput" not in table(sized("cross-server")[1])


def test_a_same_node_figure_the_user_gave_is_not_called_an_estimate():
    # The words follow the typed basis, not the prose: a configured same-node rate is the user's.
    configured = sized("same-server", lambda c: c.update(sizing={"sameNodeBytesPerSecond": "2G"}))[1]
    assert "Same-node throughput: an ESTIMATE" not in table(configured)


def test_the_rank_reads_are_listed_only_where_a_pair_has_more_than_one_rank():
    def mixed(c):
        w = c["workers"]
        w[0].update(tensorParallel=1, replicas=4)
        w[1].update(tensorParallel=4, replicas=1)
    text = table(sized("two-node-rdma", mixed)[1])
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("Rank reads")))
    # One decode rank a row, its two of Qwen3-32B's 8 KV heads from the one prefill rank.
    assert [line.split()[2:5] for line in lines[at + 3:at + 7]] == [["0", "0", "0-1"], ["1", "0", "2-3"],
                                                                      ["2", "0", "4-5"], ["3", "0", "6-7"]]
    assert "Rank reads" not in table(sized("cross-server")[1])
