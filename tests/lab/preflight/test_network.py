"""Preflight with graph.networkPolicy: the cluster's DNS must be where the graph's NetworkPolicies let
its pods reach it."""

from __future__ import annotations

from tests.lab.preflight.saved_lab import (
    LAB,
    report_for,
    saved,
)

# --- graph.networkPolicy: the DNS the policies let the pods reach --------------------------------

NETWORK_POLICY = {"graph": {"networkPolicy": True}}


def test_with_network_policies_the_labs_dns_is_where_they_let_the_pods_reach_it():
    r = report_for("cross-server", str(LAB), lambda c: c.update(NETWORK_POLICY))
    assert r.problems == []
    (dns,) = [c for c in r.checks if c.name == "network policy: dns"]
    assert dns.ok and dns.detail.startswith("kube-system/coredns runs pods labelled k8s-app=kube-dns")
    assert any("preflight does not read its addresses" in n for n in r.notes)
    assert not any(c.name == "network policy: dns" for c in report_for("cross-server", str(LAB)).checks)


def test_a_cluster_whose_dns_pods_the_policies_miss_does_not_fit(tmp_path):
    def relabel(version, items):
        for i in items:
            if i["kind"] == "Deployment" and i["metadata"]["name"] == "coredns":
                i["spec"]["template"]["metadata"]["labels"] = {"app": "coredns"}
    r = report_for("cross-server", saved(tmp_path, relabel), lambda c: c.update(NETWORK_POLICY))
    assert [(p.where, p.check) for p in r.problems] == [("graph.networkPolicy", "network policy: dns")]
    assert "every name lookup, the Services' and the Hub's, would time out" in r.problems[0].problem
    assert not r.fits
