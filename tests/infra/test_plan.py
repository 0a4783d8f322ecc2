"""The plan is the one place that decides what a stack deploys: the program registers exactly the
plan's objects, and no other code calls the builders of a stack's objects or makes a resource."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from infra.plan import load_stack, plan
from tests.helpers import ROOT, everything_on, loaded, raw_config, run_stack

# The builders that make a stack's objects: only the plan calls them (their own modules aside).
STACK_BUILDERS = {
    ("graph", "deployment"), ("graph", "network_policies"), ("model_cache", "claim"), ("model_pull", "jobs"),
    ("transfer_probe", "manifests"), ("benchmark", "manifests"), ("platform", "release"),
}
# Where Pulumi resources are made: the plan's objects (components) and the cluster provider (program).
RESOURCE_MODULES = {"infra/components/__init__.py", "infra/program.py"}

VARIANTS = {
    "shipped": None,
    "everything on": "all",
    "pvc cache, network policies, token": {"modelCache": {"mode": "pvc"}, "graph": {"networkPolicy": True}},
    "existing claim, no platform": {"modelCache": {"mode": "pvc", "pvc": {"claimName": "models"}},
                                    "platform": {"manage": False}},
    "no cache": {"modelCache": {"mode": "off"}},
}


def _edit(stack: str, variant):
    if variant is None:
        return None
    if variant == "all":
        return everything_on(stack)
    return lambda c: c.update(variant)


def _sources() -> list[Path]:
    return [p for p in (ROOT / "infra").rglob("*.py") if "__pycache__" not in p.parts]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_only_the_plan_calls_the_builders_of_a_stacks_objects():
    calls = []
    for path in _sources():
        rel = _rel(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and (node.func.value.id, node.func.attr) in STACK_BUILDERS):
                calls.append((rel, f"{node.func.value.id}.{node.func.attr}"))
    outside = [c for c in calls if c[0] != "infra/plan.py"]
    assert outside == [], f"a stack's objects are built outside infra/plan.py: {outside}"
    assert {c[1] for c in calls} == {f"{m}.{f}" for m, f in STACK_BUILDERS}  # the plan calls every one


def test_only_the_components_and_the_provider_import_the_kubernetes_sdk():
    importers = set()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "pulumi_kubernetes" for n in names):
                importers.add(_rel(path))
    assert importers == RESOURCE_MODULES


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_program_registers_exactly_the_plans_objects_in_their_components(stack, variant):
    edit = _edit(stack, VARIANTS[variant])
    planned = plan(loaded(stack, edit))
    run = run_stack(stack, edit)
    by_urn = {r.urn: r for r in run.resources}
    registered = {r.name: r for r in run.resources if r.custom and r.type != "pulumi:providers:kubernetes"}
    assert sorted(registered) == sorted(o.name for o in planned.objects)
    components = {c.name: c for c in planned.components}
    for o in planned.objects:
        r = registered[o.name]
        assert by_urn[r.parent].name == o.component
        assert by_urn[r.parent].type == components[o.component].type
        assert {by_urn[d].name for d in r.dependencies} == set(o.after), o.name
    assert run.outputs.keys() == planned.outputs.keys()


def test_each_planned_object_comes_after_what_it_waits_for(stack):
    planned = plan(loaded(stack, everything_on(stack)))
    seen: set[str] = set()
    for o in planned.objects:
        assert set(o.after) <= seen, o.name
        seen.add(o.name)
    # The graph waits for the operator and for the model in every cache.
    assert {"platform-release", "graph-ns"} <= set(planned.named("graph-dgd").after)
    assert {o.name for o in planned.of_kind("Job") if o.component == "graph-model-cache"} <= \
        set(planned.named("graph-dgd").after)


def test_the_plan_holds_no_secret_value():
    raw = raw_config("cross-server", lambda c: c.update(hfToken="hf_not_in_any_plan"))
    planned = plan(load_stack("cross-server", raw, secret_keys=["dynamo-lab:hfToken"]))
    assert "hf_not_in_any_plan" not in repr(planned.objects)
    (secret,) = planned.of_kind("Secret")
    assert secret.manifest["stringData"] == {"HF_TOKEN": None}
