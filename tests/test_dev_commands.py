"""What dev.py installs before it runs a lab command: only what that command uses."""

from __future__ import annotations

from pathlib import Path

import pytest

import dev


@pytest.fixture
def installs(monkeypatch):
    """dev.main with its installs recorded instead of made, and the command recorded instead of run."""
    made: list[str] = []
    monkeypatch.setattr(dev, "sync", lambda environment=dev.VENV, *selection: made.append(
        f"{Path(environment).name} {' '.join(selection)}".strip()) or Path("python"))
    monkeypatch.setattr(dev, "ensure_twin", lambda: made.append(".venv-twin") or Path("twin-python"))
    monkeypatch.setattr(dev, "run_to_the_end", lambda cmd, **popen: made.append("ran " + " ".join(cmd[1:])) or 0)
    monkeypatch.delenv("DYNAMO_LAB_TWIN_PYTHON", raising=False)
    return made


@pytest.mark.parametrize("argv", [["bench", "same-server", "--target", "cluster"],
                                  ["bench", "--target=cluster", "same-server"]])
def test_bench_against_the_cluster_prints_steps_without_installing_the_twin(installs, argv):
    assert dev.main(argv) == 0
    assert installs == [".venv", "ran -m infra.lab " + " ".join(argv)]


@pytest.mark.parametrize("argv", [["bench", "same-server", "--target", "twin", "--quick"], ["twin", "kv-routing"]])
def test_the_commands_that_start_the_twin_get_its_environment(installs, argv):
    assert dev.main(argv) == 0
    assert installs == [".venv", ".venv-twin", "ran -m infra.lab " + " ".join(argv)]


def test_every_marked_tier_is_left_out_of_the_fast_tier_and_run_by_ci():
    import tomllib

    from tests.helpers import ROOT

    markers = [m.split(":")[0] for m in tomllib.loads((ROOT / "pyproject.toml").read_text())
               ["tool"]["pytest"]["ini_options"]["markers"]]
    assert set(markers) == {"slow", "lab", "engine", "cluster"}
    selection = dev.FAST_TIER[dev.FAST_TIER.index("-m") + 1]
    ci = (ROOT / ".ci" / "run").read_text()
    for marker in markers:
        assert f"not {marker}" in selection.split(" and "), marker
        assert f"\npython3 dev.py test-{marker} " in ci, f".ci/run does not run the {marker} tier"
