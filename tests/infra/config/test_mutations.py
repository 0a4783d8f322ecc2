"""Property: a stack file with mistakes in it (a key deleted, retyped, renamed, negated, emptied or
nested) either renders or is refused in lines naming the file and each key: a ConfigError, or the
reader's one line (an integer past 64 bits). Never another exception, and on error nothing on stdout.

Every single mistake is tried in every stack (test_every_single_mistake_...), so a traceback any
one of them causes fails every run, on every machine; Hypothesis then combines up to three, from a
fixed seed (derandomize), so what it finds it finds again: a failure is a defect, never the luck of
a fresh clone's first run."""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalogue import EXAMPLE_STACKS
from infra.errors import ConfigError, UserError
from infra.plan import load_stack, plan
from tests.helpers import ROOT, STACKS, encoded, examples, run_cli

# The lab's stacks and the example beyond it (several nodes, whole GPUs, tensorParallel, RDMA).
MUTATED = [*STACKS, *EXAMPLE_STACKS]
DOCS = {s: yaml.safe_load((ROOT / f"Pulumi.{s}.yaml").read_text()) for s in MUTATED}
# Values of every type a stack file can hold, each where another was meant: a boolean, counts past
# 64 bits and infinite, a count with a point, numbers in quotes, a YAML 1.1 boolean, maps and lists.
ODD_VALUES = [None, True, False, 0, -1, 1.5, 2.0, 10**12, 10**30, 1e400, "1e400", "1e999999999", "9" * 60, "",
              "x", "-3", "3", "yes", "1Gi", "10 Gi", [], {}, [1], {"a": 1}]
OPS = ["delete", "retype", "rename", "negate", "empty", "nest"]


def _paths(node, prefix=()):
    """Every path into a nested config: dict keys and list indexes."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(config: dict, path: tuple, op: str, odd):
    """Apply one mistake at `path` (a key or index below the config map)."""
    parent = config
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    value = parent[key]
    if op == "delete":
        del parent[key]
    elif op == "retype":
        parent[key] = copy.deepcopy(odd)  # a later mistake may edit it: ODD_VALUES must stay as written
    elif op == "rename" and isinstance(parent, dict):
        parent[str(key)[:-1] if len(str(key)) > 1 else str(key) + "x"] = parent.pop(key)
    elif op == "negate":
        parent[key] = -value if isinstance(value, (int, float)) and not isinstance(value, bool) else f"-{value}"
    elif op == "empty":
        parent[key] = type(value)() if isinstance(value, (dict, list, str)) else ""
    elif op == "nest":
        parent[key] = {"value": value} if not isinstance(value, dict) else [value]
    enable = config.get("dynamo-lab:probe")  # keep the optional parts exercised too
    return config, enable


@st.composite
def mutated(draw):
    stack = draw(st.sampled_from(MUTATED))
    config = copy.deepcopy(DOCS[stack]["config"])
    if draw(st.booleans()):
        config["dynamo-lab:benchmark"] = {"enabled": True}
        if stack not in ("kv-routing", *EXAMPLE_STACKS):  # the probe measures TCP; the example's KV is RDMA
            config["dynamo-lab:probe"] = {"enabled": True}
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(config) if p]
        path = draw(st.sampled_from(paths))
        _mutate(config, path, draw(st.sampled_from(OPS)), draw(st.sampled_from(ODD_VALUES)))
    return stack, config


def _assert_refusal_names_file_and_keys(err: ConfigError, stack: str) -> None:
    assert err.stack_file == f"Pulumi.{stack}.yaml"
    assert err.problems, "a refusal says what is wrong"
    for key, message in err.problems:
        assert key and key.strip() and message.strip(), (key, message)
    assert all(line.startswith(f"Pulumi.{stack}.yaml: ") for line in str(err).splitlines())


def _built_or_refused(stack: str, config: dict) -> None:
    """The stack's config with its mistakes, handed over as the Pulumi CLI would, is planned whole or
    refused naming the file and each key; any other exception propagates, and fails the test."""
    try:
        raw, secrets = encoded(config, stack)
        loaded = load_stack(stack, raw, secret_keys=secrets)
    except ConfigError as err:
        _assert_refusal_names_file_and_keys(err, stack)
        return
    except UserError as err:  # the reader's refusal (stack_files.StackFileError): one line, file and key
        assert str(err).startswith(f"Pulumi.{stack}.yaml: `") and "\n" not in str(err), str(err)
        return
    # Accepted: the plan the program registers is made, whole, and in an order it can be created in.
    planned = plan(loaded)
    assert planned.of_kind("DynamoGraphDeployment") and planned.of_kind("Namespace")
    seen: set[str] = set()
    for o in planned.objects:
        assert set(o.after) <= seen, f"{o.name} waits for an object planned after it"
        seen.add(o.name)
    assert len(seen) == len(planned.objects), "two planned objects share a name"


def _single_mistakes(stack: str):
    """Every one mistake in the stack's file: each op at each key and list item, and each odd value."""
    base = DOCS[stack]["config"]
    for path in (p for p in _paths(base) if p):
        for op in OPS:
            for odd in (ODD_VALUES if op == "retype" else [None]):
                config = copy.deepcopy(base)
                _mutate(config, path, op, odd)
                yield (path, op, odd), config


@pytest.mark.parametrize("stack", MUTATED)
def test_every_single_mistake_is_built_or_refused_with_file_and_key(stack):
    # Deterministic and whole: `model.name` nested as {value: ...} was a TypeError (unhashable) that
    # the random draws below found on one run of a fresh clone in several.
    failures = []
    for mistake, config in _single_mistakes(stack):
        try:
            _built_or_refused(stack, config)
        except Exception as exc:  # every mistake is tried; the failure lists them all
            failures.append(f"{mistake}: {type(exc).__name__}: {str(exc)[:200]}")
    assert failures == []


@settings(max_examples=examples(150), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_a_mutated_stack_is_sized_and_built_or_refused_with_file_and_key(case):
    _built_or_refused(*case)


@settings(max_examples=examples(12), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_render_of_a_mutated_stack_prints_manifests_or_only_the_error(case):
    stack, config = case
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / "Pulumi.yaml", Path(tmp) / "Pulumi.yaml")
        (Path(tmp) / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
        proc = run_cli("render", stack, cwd=tmp)
    if proc.returncode == 0:
        assert proc.stdout.startswith(f"# dynamo-lab render of stack {stack}")
        assert "kind: DynamoGraphDeployment" in proc.stdout
    else:
        assert proc.returncode == 2 and proc.stdout == ""
        lines = proc.stderr.splitlines()  # the reader's refusal, or one line a problem the schema finds
        assert lines and all(line.startswith(f"error: dynamo-lab render: Pulumi.{stack}.yaml: ") for line in lines), (
            proc.stderr)
