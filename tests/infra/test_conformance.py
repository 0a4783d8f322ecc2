"""What the project emits, checked against the real upstream schemas (read by path from ../shared).

Skipped, with the reason, where ../shared/upstream is absent (a user's clone); never vacuous: each
test first asserts it found something to check.
"""

from __future__ import annotations

import jsonschema
import kubernetes_validate
import pytest
import yaml

from infra.lab.render import normalize
from tests.helpers import DGD, RELEASE, ROOT, STACKS, run_stack

UPSTREAM = ROOT.parent / "shared" / "upstream" / "dynamo"
CRD = UPSTREAM / "crds" / "nvidia.com_dynamographdeployments.yaml"
CHART_VALUES = UPSTREAM / "helm" / "platform" / "values.yaml"
REMOVED = ["grove.enabled", "nats.enabled", "etcd.enabled", "kai-scheduler.enabled"]

needs_upstream = pytest.mark.skipif(
    not CRD.is_file(), reason=f"upstream Dynamo data not found at {UPSTREAM} (only in the team's workspace)")


def _v1beta1_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    return version["schema"]["openAPIV3Schema"]


@needs_upstream
@pytest.mark.parametrize("stack", STACKS)
def test_graph_validates_against_the_upstream_v1beta1_crd(stack):
    (dgd,) = run_stack(stack).of_type(DGD)
    doc = normalize(dgd.inputs)
    jsonschema.validate(doc, _v1beta1_schema())


@needs_upstream
def test_the_crd_schema_really_checks_component_types():
    # Guards against a schema that accepts anything: a wrong component type must fail.
    (dgd,) = run_stack("cross-server").of_type(DGD)
    doc = normalize(dgd.inputs)
    doc["spec"]["components"][1]["type"] = "prefiller"
    with pytest.raises(jsonschema.ValidationError, match="prefiller"):
        jsonschema.validate(doc, _v1beta1_schema())


@pytest.mark.parametrize("stack", STACKS)
def test_core_objects_validate_against_kubernetes_1_34(stack):
    # With the optional probe (where the stack allows it) and benchmark on, so their Jobs, Service and
    # ConfigMaps are checked too.
    def edit(c):
        c["benchmark"] = {"enabled": True}
        if stack != "kv-routing":
            c["probe"] = {"enabled": True}
    run = run_stack(stack, edit)
    core = [r for r in run.resources if r.custom and r.type.startswith(("kubernetes:core/", "kubernetes:batch/"))]
    assert core, "every stack emits at least its namespaces"
    for r in core:
        assert kubernetes_validate.validate(normalize(r.inputs), "1.34", strict=True) == "1.34"


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


@needs_upstream
@pytest.mark.parametrize("stack", STACKS)
def test_helm_values_exist_in_the_upstream_chart_and_avoid_removed_keys(stack):
    (release,) = run_stack(stack).of_type(RELEASE)
    values = normalize(release.inputs["values"])
    chart = yaml.safe_load(CHART_VALUES.read_text())
    paths = _leaf_paths(values)
    assert paths
    missing = [p for p in paths if not _has_path(chart, p)]
    assert missing == [], f"not in upstream values.yaml (typo?): {missing}"
    assert [p for p in REMOVED if _has_path(values, p)] == []


@needs_upstream
def test_values_check_catches_a_typo():
    chart = yaml.safe_load(CHART_VALUES.read_text())
    assert _has_path(chart, "global.grove.install")
    assert not _has_path(chart, "global.grove.instal")
