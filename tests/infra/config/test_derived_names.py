"""Stack-file mistakes in the names Kubernetes and Dynamo derive from the stack's, and the length
budgets they leave, each refused with the file, the key and the fix, and nothing registered."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.plan import load_stack
from tests.helpers import raw_config
from tests.infra.config.refusing import refused_text

# --- names Kubernetes and Dynamo derive ----------------------------------------------------------

@pytest.mark.parametrize("rule, message", [
    ({"key": "nvidia.com/gpu memory", "operator": "Exists"}, "is not a Kubernetes label key"),
    ({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu server"]}, "is not a Kubernetes label value"),
    ({"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20GB"]}, "needs exactly one integer value"),
])
def test_node_rules_the_api_server_would_reject_are_refused(rule, message):
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [rule]},
                           "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [
                               {"key": "kubernetes.io/hostname", "operator": "In", "values": ["laptop"]}]}}
    assert message in refused_text(edit)


@pytest.mark.parametrize("name, message", [
    ("a-very-long-graph-name-for-this-lab", "graph.name: 'a-very-long-graph-name-for-this-lab' is 35 characters; "
                                            "names derived from it (the probe's Job "
                                            "`<graph>-kv-probe-initiator-<digest>`) must fit 63, so it can have "
                                            "at most 33"),
    ("2lab", "graph.name: '2lab' starts with a digit"),
])
def test_graph_names_that_would_break_derived_names_are_refused(name, message):
    assert message in refused_text(lambda c: c.update(graph={"name": name}))


def _as_stack(stack: str, edit=None) -> ConfigError:
    """cross-server's file loaded as stack `stack` (the graph takes the stack's name)."""
    with pytest.raises(ConfigError) as info:
        load_stack(stack, raw_config("cross-server", edit))
    return info.value


def test_a_stack_name_too_long_for_the_probes_job_is_refused_when_the_probe_is_on():
    # graph.name's own check sees only a name written; unset, the graph takes the stack's name.
    stack = "s" + "a" * 33  # 34 characters: the probe's Job would be 64
    probe_on = lambda c: c.update(probe={"enabled": True})  # noqa: E731
    assert str(_as_stack(stack, probe_on)).endswith(
        f"graph.name: unset, the graph is named after the stack: {stack!r}, 34 characters; the probe's Job "
        "`<graph>-kv-probe-initiator-<digest>` would be 64 characters, more than the 63 Kubernetes allows. Give "
        f"the graph a name of at most 33 characters: pulumi config set --path graph.name <name> --stack {stack}")
    assert load_stack(stack, raw_config("cross-server", lambda c: (probe_on(c), c.update(graph={"name": "lab"}))))
    assert load_stack(stack, raw_config("cross-server"))  # no probe, no Job: the name fits what it names


def test_a_stack_name_too_long_for_the_frontends_service_is_refused():
    stack = "s" * 50  # `<graph>-frontend` is 59; 55 makes it 64
    assert load_stack(stack, raw_config("cross-server", lambda c: c.update(modelCache={"mode": "off"})))
    err = str(_as_stack("s" * 55, lambda c: c.update(modelCache={"mode": "off"})))
    assert f"graph.name: unset, the graph is named after the stack: {'s' * 55!r}, 55 characters; the operator " \
           f"would name the frontend's Service '{'s' * 55}-frontend', more than the 63 characters" in err


def test_two_groups_of_one_name_each_keep_their_own_context_check():
    # A duplicate name is one mistake; each group's --max-model-len is still judged as its own.
    def edit(c):
        c["workers"][0]["extraArgs"] = ["--max-model-len=abc"]
        c["workers"][1]["name"] = c["workers"][0]["name"]
        c["workers"][1]["extraArgs"] = ["--max-model-len", "100"]
    err = str(_as_stack("cross-server", edit))
    assert "is used twice" in err
    assert "--max-model-len 'abc' is not a token count" in err
    assert "--max-model-len 100 (100 tokens) is shorter than" in err
