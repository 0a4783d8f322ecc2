"""What the project emits, checked against real schemas: Dynamo's CRD and chart values as pinned in
dynamo_lab/upstream.py (the 1.5.0 development line at upstream commit 2a6da14c, not the v1.6.2
release; it finds or downloads them) and the Kubernetes 1.34 schemas; and what the
preflight assumes of the chart (the Kubernetes versions it supports).

Skipped, with one line saying how to provide the Dynamo files, only when none of the places has
them; DYNAMO_LAB_REQUIRE_UPSTREAM=1 (the GitHub workflow) turns that skip into a failure. Never
vacuous: each check is shown to reject a bad document.
"""

from __future__ import annotations

import functools
import os

import jsonschema
import kubernetes_validate
import pytest
import yaml

from dynamo_lab import upstream
from dynamo_lab.preflight import versions
from tests.helpers import DGD, RELEASE, STACKS, everything_on, run_stack

REMOVED = ["grove.enabled", "nats.enabled", "etcd.enabled", "kai-scheduler.enabled"]

# kubernetes_validate reads and parses its schema files on every call, the 1.5 MB _definitions.json
# among them, for each object: read once per process here (the same files, the same judgement).
_SCHEMA_CONTENTS = functools.cache(kubernetes_validate.utils.schema_contents)


@pytest.fixture(autouse=True)
def _schemas_read_once(monkeypatch):
    monkeypatch.setattr(kubernetes_validate.utils, "schema_contents", _SCHEMA_CONTENTS)
CRD = "crds/nvidia.com_dynamographdeployments.yaml"
VALUES = "helm/platform/values.yaml"
CHART = "helm/platform/Chart.yaml"


@pytest.fixture(scope="session")
def dynamo() -> upstream.Upstream:
    try:
        return upstream.locate()
    except upstream.UpstreamUnavailable as exc:
        message = f"Dynamo's CRD and chart values ({upstream.PROVENANCE}) unavailable ({exc}): {upstream.HOW}"
        if os.environ.get("DYNAMO_LAB_REQUIRE_UPSTREAM") == "1":
            pytest.fail(message)
        pytest.skip(message)


@functools.lru_cache(maxsize=None)
def _crd_validator(path: str) -> jsonschema.protocols.Validator:
    """The v1beta1 schema's validator, compiled once per session rather than per check."""
    with open(path) as f:  # libyaml's loader: the CRD is 1 MB, a second of pure-Python parsing
        crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    schema = version["schema"]["openAPIV3Schema"]
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _graph(stack: str, edit=None) -> dict:
    (dgd,) = run_stack(stack, edit).of_type(DGD)
    return dgd.inputs


# The shipped stacks mount a hostPath model cache; these graphs mount a claim, or nothing.
MODEL_CACHE_MODES = {"pvc": {"mode": "pvc"}, "existing-claim": {"mode": "pvc", "pvc": {"claimName": "models"}},
                     "off": {"mode": "off"}}


@pytest.mark.parametrize("stack", STACKS)
def test_graph_validates_against_the_upstream_v1beta1_crd(stack, dynamo):
    _crd_validator(str(dynamo.file(CRD))).validate(_graph(stack))


@pytest.mark.parametrize("mode", sorted(MODEL_CACHE_MODES))
def test_graph_with_each_model_cache_mode_validates_against_the_crd(mode, dynamo):
    doc = _graph("cross-server", lambda c: c.update(modelCache=MODEL_CACHE_MODES[mode]))
    _crd_validator(str(dynamo.file(CRD))).validate(doc)


def test_the_crd_schema_really_checks_component_types(dynamo):
    doc = _graph("cross-server")
    doc["spec"]["components"][1]["type"] = "prefiller"
    with pytest.raises(jsonschema.ValidationError, match="prefiller"):
        _crd_validator(str(dynamo.file(CRD))).validate(doc)


def _validated_core_kinds(run) -> set[str]:
    """Each core and batch object of a run validated against Kubernetes 1.34; their kinds, so a test
    can show it checked the objects it meant to."""
    core = [r for r in run.resources if r.custom and r.type.startswith(
        ("kubernetes:core/", "kubernetes:batch/", "kubernetes:networking.k8s.io/"))]
    for r in core:
        assert kubernetes_validate.validate(r.inputs, "1.34", strict=True) == "1.34"
    return {r.inputs["kind"] for r in core}


@pytest.mark.parametrize("stack", STACKS)
def test_core_objects_validate_against_kubernetes_1_34(stack):
    # With the optional probe (where the stack allows it) and benchmark on, so their Jobs, Service and
    # ConfigMaps are checked too.
    run = run_stack(stack, lambda c: (everything_on(stack)(c), c.update(graph={"networkPolicy": True})))
    assert _validated_core_kinds(run) >= {"Namespace", "ConfigMap", "Job", "NetworkPolicy"}


@pytest.mark.parametrize("mode", sorted(MODEL_CACHE_MODES))
def test_model_cache_objects_validate_against_kubernetes_1_34(mode):
    run = run_stack("same-server", lambda c: c.update(modelCache=MODEL_CACHE_MODES[mode]))
    kinds = {"pvc": {"PersistentVolumeClaim", "Job"}, "existing-claim": {"Job"}, "off": set()}[mode]
    assert _validated_core_kinds(run) >= kinds | {"Namespace"}


def test_core_validation_catches_a_bad_object():
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"},
                                      "spec": {"bogus": 1}}, "1.34", strict=True)


def _leaf_paths(values: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        out += _leaf_paths(value, path + ".") if isinstance(value, dict) and value else [path]
    return out


def _has_path(values: dict, path: str) -> bool:
    node = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("stack", STACKS)
def test_helm_values_exist_in_the_upstream_chart_and_avoid_removed_keys(stack, dynamo):
    (release,) = run_stack(stack).of_type(RELEASE)
    values = release.inputs["values"]
    chart = yaml.safe_load(dynamo.file(VALUES).read_text())
    paths = _leaf_paths(values)
    assert paths
    missing = [p for p in paths if not _has_path(chart, p)]
    assert missing == [], f"not in upstream values.yaml (typo?): {missing}"
    assert [p for p in REMOVED if _has_path(values, p)] == []


def test_values_check_catches_a_typo(dynamo):
    chart = yaml.safe_load(dynamo.file(VALUES).read_text())
    assert _has_path(chart, "global.grove.install")
    assert not _has_path(chart, "global.grove.instal")


def test_preflight_checks_the_kubernetes_versions_the_chart_declares(dynamo):
    chart = yaml.safe_load(dynamo.file(CHART).read_text())
    assert chart["name"] == "dynamo-platform"
    assert versions.SUPPORTED_KUBE_VERSION == chart["kubeVersion"]
    # The lab's v1.34 is within it, a cluster a minor version below the floor is not.
    assert versions.satisfies("v1.34.1", chart["kubeVersion"])
    assert not versions.satisfies("v1.29.15", chart["kubeVersion"])
