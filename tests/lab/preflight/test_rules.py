"""The Kubernetes and Helm rules the preflight rests on, each as exact as the original: node
affinity operators and Helm's kubeVersion constraints (resource quantities: tests/infra/test_units.py)."""

from __future__ import annotations

import pytest

from dynamo_lab.preflight import selectors, versions

LABELS = {"nvidia.com/gpu.memory": "24576", "kubernetes.io/hostname": "gpu-server", "plus": "+7",
          "huge": str(2**63), "word": "large"}


@pytest.mark.parametrize("key, op, values, expected", [
    ("kubernetes.io/hostname", "In", ["a", "gpu-server"], True),
    ("kubernetes.io/hostname", "In", ["a"], False),
    ("missing", "In", ["x"], False),
    ("kubernetes.io/hostname", "NotIn", ["gpu-server"], False),
    ("kubernetes.io/hostname", "NotIn", ["a"], True),
    ("missing", "NotIn", ["x"], True),  # a node without the label is not in the set
    ("nvidia.com/gpu.memory", "Exists", [], True),
    ("missing", "Exists", [], False),
    ("missing", "DoesNotExist", [], True),
    ("nvidia.com/gpu.memory", "DoesNotExist", [], False),
    ("nvidia.com/gpu.memory", "Gt", ["20000"], True),
    ("nvidia.com/gpu.memory", "Gt", ["24576"], False),  # strictly greater
    ("nvidia.com/gpu.memory", "Lt", ["24577"], True),
    ("nvidia.com/gpu.memory", "Lt", ["12000"], False),
    ("missing", "Gt", ["0"], False),  # Gt/Lt need the label
    ("missing", "Lt", ["0"], False),
    ("word", "Gt", ["0"], False),  # a label that is not an integer matches neither
    ("word", "Lt", ["0"], False),
    ("plus", "Gt", ["6"], True),  # strconv.ParseInt takes a sign
    ("huge", "Gt", ["0"], False),  # beyond int64: not an integer to Kubernetes
])
def test_node_affinity_operators(key, op, values, expected):
    assert selectors.matches({"key": key, "operator": op, "values": values}, LABELS) is expected


def test_a_term_ands_its_expressions_and_an_empty_term_matches_nothing():
    big = {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}
    host = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["other"]}
    assert selectors.term_matches([big], LABELS)
    assert not selectors.term_matches([big, host], LABELS)
    assert not selectors.term_matches([], LABELS)


@pytest.mark.parametrize("version, expected", [
    ("v1.34.1", True), ("v1.30.0", True), ("v1.29.15", False), ("v1.34.1+k3s1", True),
    ("v1.30.2-eks-1a2b3c", True),  # vendor versions carry a prerelease part: the -0 admits them
    ("v1.29.15-gke.1", False), ("1.31", True),
])
def test_the_charts_range_admits_what_helm_admits(version, expected):
    assert versions.satisfies(version, versions.SUPPORTED_KUBE_VERSION) is expected


def test_constraints_and_or_and_prereleases_as_in_helm():
    assert versions.satisfies("v1.31.0", ">=1.30.0-0, <1.34.0-0")
    assert not versions.satisfies("v1.34.0", ">=1.30.0-0 <1.34.0-0")
    assert versions.satisfies("v1.34.0", "<1.30.0 || >=1.34.0")
    # Without a prerelease part in the bound, a version with one does not satisfy it (Masterminds semver).
    assert not versions.satisfies("v1.31.0-eks-1", ">=1.30.0")
    assert versions.satisfies("v1.30.0-rc.1", ">=1.30.0-0")  # numeric identifiers rank below words
    with pytest.raises(ValueError, match="not a semantic version"):
        versions.satisfies("master", ">=1.30.0-0")
    with pytest.raises(ValueError, match="cannot read the version constraint"):
        versions.satisfies("v1.34.1", "~1.30")
