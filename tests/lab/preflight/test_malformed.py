"""`preflight --from` on files that are not what kubectl saves: one line saying what is wrong, where
and how to save the file again, and exit 2 (never a traceback, never exit 1, which means "does not
fit"); and a cap on how much it reads."""

from __future__ import annotations

import copy
import io
import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynamo_lab.preflight import cluster_data
from tests.helpers import examples
from tests.lab.preflight.saved_lab import lab, preflight, saved

RESAVE = "save it again, unedited, with `kubectl version -o json` followed by `kubectl get "


def _one_clear_line(code: int, out: str, err: str, *where: str) -> None:
    assert (code, out) == (2, ""), err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for text in where:
        assert text in err, err


def _first(items, kind):
    return next(i for i in items if i["kind"] == kind)


@pytest.mark.parametrize("edit, where", [
    (lambda v, items: _first(items, "Namespace").pop("metadata"), "the Namespace that is object"),
    (lambda v, items: _first(items, "Namespace").update(metadata=None), "has no metadata.name"),
    (lambda v, items: _first(items, "Node").update(metadata="node-a"), "the Node that is object"),
    (lambda v, items: _first(items, "Node")["metadata"].update(labels=["a"]),
     "metadata.labels is a list, not an object"),
    (lambda v, items: _first(items, "Node")["metadata"]["labels"].update(zone=3), "metadata.labels.zone is a number"),
    (lambda v, items: _first(items, "Node")["spec"].update(taints="none"), "spec.taints is a string, not a list"),
    (lambda v, items: _first(items, "Node")["status"].update(allocatable=[]), "status.allocatable is a list"),
    (lambda v, items: _first(items, "Namespace").update(status="Active"), "status is a string, not an object"),
    (lambda v, items: items.append({"kind": "MutatingWebhookConfiguration", "metadata": {"name": "w"},
                                    "webhooks": [{"rules": "all"}]}),
     "MutatingWebhookConfiguration w: webhooks[0].rules is a string, not a list"),
    (lambda v, items: items.append({"kind": "CustomResourceDefinition", "metadata": {"name": "c"},
                                    "spec": {"conversion": {"webhook": {"clientConfig": "x"}}}}),
     "CustomResourceDefinition c: spec.conversion.webhook.clientConfig is a string"),
    (lambda v, items: v.update(serverVersion="v1.34.1"), "serverVersion is a string, not an object"),
    # A key with a carriage return in it, quoted in the message: still one line, one prefix (hypothesis
    # found it below, once the command line split messages into lines at every line boundary).
    (lambda v, items: _first(items, "Node")["metadata"]["labels"].update({"\r": None}),
     "metadata.labels.\r is null, not a string"),
])
def test_a_malformed_object_is_one_line_and_exit_2(capsys, tmp_path, edit, where):
    code, out, err = preflight(capsys, "cross-server", saved(tmp_path, edit))
    _one_clear_line(code, out, err, str(tmp_path / "cluster.json"), where, RESAVE)


@pytest.mark.parametrize("content, where", [
    ('{"serverVersion": {"gitVersion": "v1.34.1"}}\n{"kind": "List", "items": {"a": 1}}', "items are not a list"),
    ('{"serverVersion": {"gitVersion": "v1.34.1"}}\n{"kind": ["Node"]}', "no Node objects in it"),
    ("[" * 100_000, "nested deeper"),
])
def test_a_malformed_document_is_one_line_and_exit_2(capsys, tmp_path, content, where):
    path = tmp_path / "cluster.json"
    path.write_text(content)
    code, out, err = preflight(capsys, "cross-server", str(path))
    _one_clear_line(code, out, err, str(path), where)


def test_binary_input_is_one_line_and_exit_2(capsys, tmp_path):
    path = tmp_path / "cluster.json"
    path.write_bytes(b'{"a": "\xff\xfe"}')
    code, out, err = preflight(capsys, "cross-server", str(path))
    _one_clear_line(code, out, err, str(path), "not UTF-8 text", RESAVE)


def test_dev_zero_is_refused_at_the_cap_not_read_forever(capsys):
    # Before the cap, this read /dev/zero until memory ran out; it must stop at the cap, at once.
    code, out, err = preflight(capsys, "cross-server", "/dev/zero")
    _one_clear_line(code, out, err, "/dev/zero: more than 128 MiB", "Save it again")


def test_the_cap_applies_to_stdin_too(monkeypatch):
    # In this process, stdin a real pipe (whose reads may come short, unlike a file's) one byte past
    # the cap: what `preflight --from -` reads. The process around it adds nothing to the check.
    read, write = os.pipe()
    os.write(write, b" " * 1001)
    os.close(write)
    with open(read, "rb") as pipe:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(pipe))
        with pytest.raises(cluster_data.ClusterUnreadable) as caught:
            cluster_data.read_file("-", limit=1000)
    assert str(caught.value).startswith("stdin: more than 0 MiB"), caught.value


# Any JSON value put anywhere in the lab's saved objects: preflight answers (0, 1) or says the file is
# unreadable in one line (2); it never crashes.
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: (st.lists(inner, max_size=3)
                                    | st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                     max_leaves=5)
_LAB = lab()


def _paths(value, at=()):
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


_ALL_PATHS = [p for i, obj in enumerate(_LAB[1]) for p in _paths(obj, (i,)) if len(p) > 1]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(_ALL_PATHS), value=_JSON)
def test_any_value_anywhere_is_answered_or_refused_in_one_line(capsys, tmp_path, where, value):
    def edit(version, items):
        target = items
        for key in where[:-1]:
            target = target[key]
        target[where[-1]] = copy.deepcopy(value)
    code, out, err = preflight(capsys, "cross-server", saved(tmp_path, edit))
    assert code in (0, 1, 2) and "Traceback" not in err
    if code == 2:
        _one_clear_line(code, out, err)
    json.dumps(value)  # the edit was JSON
