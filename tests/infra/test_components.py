"""The components' import of pulumi_kubernetes: a module it imports but this program never uses
stands in until it is used, and then is the real one."""

from __future__ import annotations

import sys

import pytest

from infra import components


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
