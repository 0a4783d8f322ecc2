"""The cluster tier's fixtures: the pinned tools, and one local lab cluster per test module."""

from __future__ import annotations

import os
import shutil

import pytest

from dynamo_lab import upstream
from dynamo_lab.local_cluster import harness, tools
from tests.helpers import ROOT, unavailable

NEEDED = ("kubernetes", "etcd", "kwok")
ENGINE = ("pulumi", "pulumi-resource-kubernetes")
DGD_CRD = "crds/nvidia.com_dynamographdeployments.yaml"
RDMA_CLUSTER = ROOT / "tests" / "data" / "preflight" / "two-8gpu-rdma.json"


@pytest.fixture(scope="session")
def cluster_bins() -> dict:
    if os.geteuid() != 0:
        unavailable("the cluster tier needs root for its network and PID namespaces",
                    "the cluster tier needs root for its network and PID namespaces, and CI runs it: run CI as root")
    bins = tools.bin_dirs(tools.ensure(list(NEEDED), log=lambda m: print(f"cluster-tools: {m}")))
    missing = [n for n in NEEDED if n not in bins]
    assert not missing, f"cluster-tools could not provide {missing}"
    return bins


@pytest.fixture(scope="session")
def dgd_crd_dir(tmp_path_factory):
    """The DynamoGraphDeployment CRD pinned in dynamo_lab/upstream.py (sha256-checked): from Dynamo's 1.5.0
    development line at upstream commit 2a6da14c, not the v1.6.2 release the stacks install, whose CRDs
    could not be had here."""
    try:
        found = upstream.locate()
    except upstream.UpstreamUnavailable as exc:
        pytest.skip(f"the DynamoGraphDeployment CRD ({upstream.PROVENANCE}) is unavailable ({exc}): {upstream.HOW}")
    d = tmp_path_factory.mktemp("crds")
    shutil.copy(found.file(DGD_CRD), d / "dgd.yaml")
    return d


@pytest.fixture(scope="module")
def lab_cluster(cluster_bins, tmp_path_factory):
    state = tmp_path_factory.mktemp("cluster") / "state"
    with harness.running(state, cluster_bins) as handle:
        yield handle
    assert harness.leftovers(state) == []


@pytest.fixture(scope="module")
def rdma_cluster_with_crd(cluster_bins, dgd_crd_dir, tmp_path_factory):
    """A cluster beyond the lab, for the example stacks: a CPU node and two 8-GPU nodes with an RDMA
    device plugin's resource (tests/data/preflight/two-8gpu-rdma.json), and the pinned CRD."""
    state = tmp_path_factory.mktemp("cluster") / "state"
    with harness.running(state, cluster_bins, crd_dir=dgd_crd_dir, nodes_from=RDMA_CLUSTER) as handle:
        yield handle
    assert harness.leftovers(state) == []


@pytest.fixture(scope="module")
def lab_cluster_with_crd(cluster_bins, dgd_crd_dir, tmp_path_factory):
    state = tmp_path_factory.mktemp("cluster") / "state"
    with harness.running(state, cluster_bins, crd_dir=dgd_crd_dir) as handle:
        yield handle
    assert harness.leftovers(state) == []


@pytest.fixture(scope="session")
def engine_bins(cluster_bins) -> dict:
    """The real Pulumi CLI and Kubernetes provider (built by cluster-tools, like the control plane)."""
    bins = tools.bin_dirs(tools.ensure(list(ENGINE), log=lambda m: print(f"cluster-tools: {m}")))
    missing = [n for n in ENGINE if n not in bins]
    assert not missing, f"cluster-tools could not provide {missing}"
    return bins
