"""The sizing report in words: its verdicts, and docs/sizing.md's sample, printed by the tool itself."""

from __future__ import annotations

from dynamo_lab.sizing_text import table, verdict
from tests.helpers import sized


def test_the_cross_server_verdict_says_it_does_not_pay_and_where_the_link_caps_it():
    (t,) = sized("cross-server")[1].transfers
    assert "does not pay" in verdict(t) and "expected case" in verdict(t)
    assert f"at most {t.link_max_requests_per_s:.2f} requests/s" in verdict(t)


# docs/sizing.md's samples (the report, the 3584Mi refusal) are marked samples of `dynamo-lab sizing`:
# tests/test_docs_samples.py holds them to what the command prints.


def test_the_same_node_default_is_labelled_an_estimate():
    assert "Same-node throughput: an ESTIMATE from a development machine" in table(sized("same-server")[1])
    assert "Same-node throughput" not in table(sized("cross-server")[1])


def test_a_same_node_figure_the_user_gave_is_not_called_an_estimate():
    # The words follow the typed basis, not the prose: a configured same-node rate is the user's.
    configured = sized("same-server", lambda c: c.update(sizing={"sameNodeBytesPerSecond": "2G"}))[1]
    assert "Same-node throughput: an ESTIMATE" not in table(configured)
