"""What infra/components does for a user: the real `deploy` of a plan under Pulumi mocks registers one
ComponentResource per planned component and one resource per planned object, in plan order, each
parented, typed and ordered as the plan says; the Helm release as a helm Release with the plan's
values; the token Secret's value only as a Pulumi secret. Also: its deferred import of `requests`."""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pulumi
import pytest
from pulumi.runtime import rpc

from infra import components, pulumi_runtime
from infra.components import deploy
from infra.config import PROJECT
from infra.plan import StackPlan, load_stack, plan
from infra.program import cluster_provider
from tests.helpers import everything_on, raw_config

TOKEN = "hf_never_plain_in_a_registration"
TOKEN_KEY = f"{PROJECT}:hfToken"
PROVIDER = "pulumi:providers:kubernetes"


def _with_everything(stack: str, **more: Any):
    def edit(c: dict[str, Any]) -> None:
        everything_on(stack)(c)
        c["hfToken"] = TOKEN
        c.update(more)
    return edit


# Between them: the platform and its release, the token Secret, NetworkPolicies, hostPath and pvc
# caches (node volumes, one claim), the pre-pull Jobs, the graph, the probe and the benchmark.
CASES = {
    "cross-server, everything on": ("cross-server", _with_everything("cross-server", graph={"networkPolicy": True})),
    "kv-routing, pvc cache": ("kv-routing", _with_everything("kv-routing", modelCache={"mode": "pvc"})),
}


@dataclass
class Deployed:
    plan: StackPlan
    registered: list[pulumi_runtime.Registration]  # as the mock monitor received them (not in a fixed order)
    constructed: list[str]  # every resource's name, in the order deploy made them
    returned: list[str]  # deploy's answer, by name, in its order

    def one(self, name: str) -> pulumi_runtime.Registration:
        (r,) = [r for r in self.registered if r.name == name]
        return r

    @property
    def urns(self) -> dict[str, str]:
        return {r.name: r.urn for r in self.registered}


@pytest.fixture(scope="module", params=sorted(CASES))
def deployed(request) -> Deployed:
    stack_name, edit = CASES[request.param]
    raw = raw_config(stack_name, edit)
    stack = load_stack(stack_name, raw, secret_keys=[TOKEN_KEY])
    planned = plan(stack)
    record: list[pulumi_runtime.Registration] = []
    constructed: list[str] = []
    returned: dict[str, pulumi.Resource] = {}
    init = pulumi.Resource.__init__

    def constructing(self, t, name, *args, **kwargs):  # the SDK registers asynchronously: note the order here
        constructed.append(name)
        init(self, t, name, *args, **kwargs)

    def program() -> dict[str, Any]:
        returned.update(deploy(planned, cluster_provider(stack.config.target)))
        return {}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pulumi.Resource, "__init__", constructing)
        pulumi_runtime.run_with_mocks(program, project=PROJECT, stack=stack_name, config=raw,
                                      secret_keys=[TOKEN_KEY], record=record)
    return Deployed(planned, record, [n for n in constructed if n != f"{PROJECT}-{stack_name}"], list(returned))


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _revealed(value: Any) -> Any:
    """`value` with every Pulumi secret replaced by what it holds."""
    if _is_secret(value):
        return _revealed(value["value"])
    if isinstance(value, dict):
        return {k: _revealed(v) for k, v in value.items()}
    return [_revealed(v) for v in value] if isinstance(value, list) else value


def _plain(value: Any, text: str, path: str = "") -> list[str]:
    """Where `text` occurs in `value` outside a Pulumi secret."""
    if _is_secret(value):
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _plain(v, text, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _plain(v, text, f"{path}[{i}]")]
    return [path] if isinstance(value, str) and text in value else []


def _type_token(kind: tuple[str, str]) -> str:
    api_version, name = kind
    return f"kubernetes:{'core/v1' if api_version == 'v1' else api_version}:{name}"


def test_one_component_resource_per_planned_component_namespaced_and_parented(deployed):
    urns, specs = deployed.urns, {c.name: c for c in deployed.plan.components}
    registered = [r for r in deployed.registered if not r.custom]
    assert sorted(r.name for r in registered) == sorted(specs), "one ComponentResource per planned component"
    stack_urn = f"urn:pulumi:{deployed.plan.stack.name}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-" \
                f"{deployed.plan.stack.name}"
    for r in registered:
        spec = specs[r.name]
        assert r.type == spec.type and re.fullmatch(rf"{PROJECT}:index:[A-Z][A-Za-z]+", r.type), r.type
        assert r.parent == (urns[spec.parent] if spec.parent else stack_urn), r.name
        assert sorted(r.dependencies) == sorted(urns[n] for n in spec.after), r.name
    assert any(c.parent for c in deployed.plan.components), "a nested component is among the cases"


def test_every_planned_object_is_registered_once_in_its_component(deployed):
    urns, provider = deployed.urns, deployed.one("cluster")
    assert provider.type == PROVIDER
    objects = [r for r in deployed.registered if r.custom and r.type != PROVIDER]
    assert Counter(r.name for r in objects) == Counter(o.name for o in deployed.plan.objects)
    for o in deployed.plan.objects:
        r = deployed.one(o.name)
        assert r.type == _type_token(o.kind), o.name
        assert r.parent == urns[o.component], f"{o.name} is a child of {o.component}"
        assert sorted(r.dependencies) == sorted(urns[n] for n in o.after), f"{o.name} waits for {o.after}"
        assert r.provider.startswith(provider.urn + "::"), f"{o.name} uses the stack's cluster provider"


def test_objects_are_made_in_plan_order_each_component_just_before_its_first(deployed):
    specs = {c.name: c for c in deployed.plan.components}
    expected = ["cluster"]
    for o in deployed.plan.objects:
        chain, c = [], o.component
        while c is not None:
            chain.insert(0, c)
            c = specs[c].parent
        expected += [c for c in chain if c not in expected] + [o.name]
    assert deployed.constructed == expected
    assert deployed.returned == [o.name for o in deployed.plan.objects]


def test_each_object_is_registered_with_the_plans_manifest(deployed):
    for o in deployed.plan.objects:
        if o.kind == ("helm.sh/v3", "Release") or o.kind == ("v1", "Secret"):
            continue  # below
        assert deployed.one(o.name).inputs == o.manifest, o.name


def test_the_helm_release_is_a_helm_release_with_the_plans_values(deployed):
    doc = deployed.plan.named("platform-release").manifest
    r = deployed.one("platform-release")
    assert r.type == "kubernetes:helm.sh/v3:Release"
    assert r.inputs["values"] == doc.values and r.inputs["values"]["global"]["grove"]["enabled"] is False
    assert (r.inputs["name"], r.inputs["chart"], r.inputs["version"], r.inputs["namespace"]) == \
        (doc.name, doc.chart, doc.version, doc.namespace)
    assert r.inputs["repositoryOpts"] == {"repo": doc.repository}
    assert r.inputs["timeout"] == doc.timeout_seconds
    assert (r.inputs["skipAwait"], r.inputs["waitForJobs"], r.inputs["cleanupOnFail"]) == (False, True, True)


def test_the_token_secret_holds_the_stacks_token_only_as_a_pulumi_secret(deployed):
    (planned,) = deployed.plan.of_kind("Secret")
    r = deployed.one(planned.name)
    assert {k: v for k, v in r.inputs.items() if k != "stringData"} == \
        {k: v for k, v in planned.manifest.items() if k != "stringData"}
    assert _revealed(r.inputs["stringData"]) == {"HF_TOKEN": TOKEN}, "the stack's token, not a placeholder"
    assert {r.name: where for r in deployed.registered if (where := _plain(r.inputs, TOKEN))} == {}


def test_the_plain_check_finds_a_token_outside_a_secret():
    wrapped = {rpc._special_sig_key: rpc._special_secret_sig, "value": TOKEN}
    assert _plain({"a": [wrapped, {"b": f"x{TOKEN}"}]}, TOKEN) == [".a[1].b"]
    assert _revealed({"a": [wrapped]}) == {"a": [TOKEN]}


# --- The deferred import ---------------------------------------------------------------------------

@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    """A module on sys.path that records each time its code runs."""
    (tmp_path / "deferred_probe.py").write_text("import sys\nsys.deferred_probe_runs += 1\n"
                                                "def hello():\n    return 'hello'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "deferred_probe_runs", 0, raising=False)
    monkeypatch.delitem(sys.modules, "deferred_probe", raising=False)
    yield
    sys.modules.pop("deferred_probe", None)


def test_a_deferred_module_runs_only_when_used_and_then_is_the_real_one(probe_module):
    components._import_on_first_use("deferred_probe")
    import deferred_probe  # as pulumi_kubernetes.yaml imports requests

    assert sys.deferred_probe_runs == 0, "importing it ran none of its code"
    assert deferred_probe.hello() == "hello"
    assert sys.deferred_probe_runs == 1
    import deferred_probe as again

    assert again.hello() == "hello" and sys.deferred_probe_runs == 1
    assert type(sys.modules["deferred_probe"]).__name__ == "module"


def test_a_module_already_imported_is_left_as_it_is(probe_module):
    import deferred_probe

    components._import_on_first_use("deferred_probe")
    assert sys.modules["deferred_probe"] is deferred_probe and sys.deferred_probe_runs == 1
