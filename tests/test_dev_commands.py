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
    assert installs == [".venv", "ran -m dynamo_lab " + " ".join(argv)]


@pytest.mark.parametrize("argv", [["bench", "same-server", "--target", "twin", "--quick"], ["twin", "kv-routing"]])
def test_the_commands_that_start_the_twin_get_its_environment(installs, argv):
    assert dev.main(argv) == 0
    assert installs == [".venv", ".venv-twin", "ran -m dynamo_lab " + " ".join(argv)]


def test_aiconfigurator_is_installed_for_the_comparison_and_the_slow_tier_only(installs, monkeypatch):
    # The `peer` extra (about 760 MB): `peer` prints the comparison, the slow tier holds it to its
    # tolerances (dynamo_lab/predict/peer.py); the fast tier and the lab's commands go without.
    monkeypatch.setattr(dev, "_ensure_node_tools", lambda: None)
    for argv in (["peer"], ["test-slow", "-q"], ["test", "-q"], ["predict", "same-server"]):
        assert dev.main(argv) == 0
    assert [i for i in installs if not i.startswith("ran ")] == [
        ".venv --extra peer", ".venv --group dev --extra peer", ".venv --group dev", ".venv"]
    assert "ran -m dynamo_lab.predict.peer" in installs


def _selects(tier: list[str], *marks: str) -> bool:
    """Whether the tier's -m expression selects a test with these marks, as pytest judges it."""
    from _pytest.mark.expression import Expression

    return Expression.compile(tier[tier.index("-m") + 1]).evaluate(lambda name, **_: name in marks)


def test_every_marked_tier_is_left_out_of_the_fast_tier_and_run_by_ci():
    import tomllib

    from tests.helpers import ROOT

    markers = [m.split(":")[0] for m in tomllib.loads((ROOT / "pyproject.toml").read_text())
               ["tool"]["pytest"]["ini_options"]["markers"]]
    assert set(markers) == {"slow", "process", "lab", "engine", "cluster"}
    tiers = ("slow", "lab", "engine", "cluster")
    # A line that runs the tier (in the background too), not one that only installs what it needs.
    runs = [line.strip().removeprefix("setsid ") for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if "--collect-only" not in line]
    assert _selects(dev.FAST_TIER) and _selects(dev.FAST_TIER, "hypothesis")
    for marker in markers:
        assert not _selects(dev.FAST_TIER, marker), marker
    for tier in tiers:
        assert any(line.startswith(f"python3 dev.py test-{tier} ") for line in runs), \
            f".ci/run does not run the {tier} tier"
    # The tests of a process the fast tier leaves out run in the slow tier, and no other tier's twice.
    assert _selects(dev.SLOW_TIER, "process") and _selects(dev.SLOW_TIER, "process", "hypothesis")
    for other in ("lab", "engine", "cluster"):
        assert not _selects(dev.SLOW_TIER, "process", other), other


def test_the_property_tests_the_fast_tier_cuts_short_run_whole_in_the_slow_tier():
    # The fast tier's hypothesis profile draws a share of each property's examples (tests/conftest.py);
    # the slow tier, which CI runs after it, selects every hypothesis test of the fast tier and loads
    # no profile, so each draws its full count there.
    assert "--hypothesis-profile=fast" in dev.FAST_TIER
    assert _selects(dev.SLOW_TIER, "hypothesis")
    for other in ("lab", "engine", "cluster"):
        assert not _selects(dev.SLOW_TIER, "hypothesis", other), other
    assert not _selects(dev.SLOW_TIER)  # a plain fast-tier test is not run twice
    assert not any(a.startswith("--hypothesis-profile") for a in dev.SLOW_TIER)


@pytest.fixture
def project(monkeypatch, tmp_path):
    """dev.py pointed at a project of its own in tmp_path, with uv recorded instead of run: a sync
    adds its selection's package to site-packages unless it is there, as uv's would."""
    for name in ("uv.lock", "pyproject.toml"):
        (tmp_path / name).write_text(f"{name}\n")
    environment = tmp_path / ".venv"
    site = environment / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    dev._python(environment).parent.mkdir(parents=True)
    dev._python(environment).write_text("")
    runs: list[list[str]] = []

    def run(cmd, **kw):
        runs.append(cmd)
        (site / f"package{cmd[-1]}").mkdir(exist_ok=True)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "_uv", lambda: Path("uv"))
    monkeypatch.setattr(dev.subprocess, "run", run)
    return environment, site, runs


def test_a_sync_with_nothing_changed_starts_no_uv(project):
    environment, _, runs = project
    dev.sync(environment, "--group", "dev")
    dev.sync(environment, "--group", "dev")
    assert len(runs) == 1
    # A second selection adds packages: uv looks once more for the first, which installs nothing;
    # from then on neither starts uv.
    dev.sync(environment)
    dev.sync(environment, "--group", "dev")
    for _ in range(3):
        dev.sync(environment)
        dev.sync(environment, "--group", "dev")
    assert [cmd[-1] for cmd in runs] == ["dev", "--quiet", "dev"]


def test_a_sync_runs_again_when_the_lock_or_the_installed_packages_change(project):
    environment, site, runs = project
    dev.sync(environment)
    (dev.ROOT / "uv.lock").write_text("another lock\n")
    dev.sync(environment)
    assert len(runs) == 2
    # Another installer (Pulumi's uv toolchain, pip) removing a package: uv looks again.
    (site / "package--quiet").rmdir()
    dev.sync(environment)
    assert len(runs) == 3
    dev.sync(environment)
    assert len(runs) == 3


def test_the_interpreter_asked_for_is_the_same_from_inside_a_venv(monkeypatch, tmp_path):
    # The checklist's PATH puts .uv/bin first; dev.py started by a venv's python3 must still ask uv
    # for the base interpreter .venv was made from, or uv makes .venv again.
    base = Path(dev._base_python())
    monkeypatch.setattr(dev.sys, "executable", str(tmp_path / "venv" / "bin" / "python3"))
    monkeypatch.setattr(dev.sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(dev.sys, "_base_executable", str(base), raising=False)
    assert dev._uv_env(dev.VENV)["UV_PYTHON"] == str(base)


def test_dev_py_knows_the_lab_commands_and_its_own():
    import argparse

    from dynamo_lab import cli

    (commands,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    # `local-cluster` has a command line of its own, which cli.main hands argv to before its parser.
    assert sorted(dev.LAB_COMMANDS) == sorted([*commands.choices, "local-cluster"])
    with pytest.raises(SystemExit) as done:
        cli.main(["local-cluster", "--help"])
    assert done.value.code == 0


def test_the_local_clusters_old_command_name_says_its_new_one(capsys):
    from dynamo_lab import cli

    assert cli.main(["cluster", "down", "--keep"]) == 2
    assert "`dynamo-lab local-cluster down --keep`" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        cli.main(["down", "same-server", "--local", "--keep-cluster"])
    assert done.value.code == 2
    assert "argument --keep-cluster: it is --keep-local-cluster now" in capsys.readouterr().err
    documented = dev.__doc__.split("python3 dev.py COMMAND ...", 1)[0]
    assert [c for c in dev.OWN_COMMANDS if f"python3 dev.py {c}" not in documented] == []


def test_dev_pys_old_name_of_the_local_cluster_command_says_its_new_one_before_installing(installs, capsys):
    # `python3 dev.py cluster up` was how docs/testing.md started it: the way it is run names the new
    # command, as dynamo-lab's own does, not only a list of every command.
    assert dev.main(["cluster", "up"]) == 2
    assert installs == []
    assert "`python3 dev.py cluster` is `python3 dev.py local-cluster` now" in capsys.readouterr().err
    assert set(dev.RENAMED_COMMANDS.values()) <= set(dev.LAB_COMMANDS)


def test_an_unknown_command_lists_dev_pys_commands_and_the_labs_before_installing(installs, capsys):
    assert dev.main(["rendr", "cross-server"]) == 2
    assert installs == []
    err = capsys.readouterr().err
    assert "unknown command 'rendr'" in err
    assert "test-cluster" in err and "render" in err and "pr-preview" in err


def test_ci_builds_the_tools_from_its_start_and_runs_the_lab_tier_with_nothing_beside_it():
    # The tools' cold build is most of a cold run: it starts before the first tier, in the
    # background. The lab tier measures real transfers: it runs in the foreground only once the build
    # has been waited for and before the slow tier starts beside the cluster tier.
    from tests.helpers import ROOT

    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]

    def at(start: str) -> int:
        (found,) = [i for i, line in enumerate(lines) if line.startswith(start)]
        return found

    build = at("setsid python3 dev.py cluster-tools ")
    assert lines[build].endswith("&")
    assert build < at("python3 dev.py test -q") < at('wait "$tools_pid"')
    lab = at("python3 dev.py test-lab -q -rs")
    assert at('wait "$tools_pid"') < lab < at("setsid python3 dev.py test-slow ") < at("python3 dev.py test-cluster ")
    assert not lines[lab].endswith("&")
    assert at('wait "$slow_pid"') > at("python3 dev.py test-cluster ")


def _ci_lines_run_under_errexit(tmp_path, first: str, last: str, stubs: dict[str, str], **variables: str):
    """.ci/run's lines from the one containing `first` to the one containing `last`, run by bash as
    .ci/run runs them (set -euo pipefail) with `variables` set and `stubs` (name: script body) first
    on PATH: what a failure of those lines does to the run."""
    import os
    import subprocess

    from tests.helpers import ROOT

    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    (start,) = [i for i, line in enumerate(lines) if first in line]
    end = next(i for i in range(start, len(lines)) if last in lines[i])
    bin_dir = tmp_path / "stubs"
    bin_dir.mkdir()
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = "set -euo pipefail\n" + "".join(f"{k}={v}\n" for k, v in variables.items()) + "\n".join(
        lines[start:end + 1]) + "\necho REACHED-THE-END\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})


def test_ci_fails_when_the_pip_installed_command_does_not_run(tmp_path):
    # set -e ignores a failure anywhere in an && list but its last command: `(check) && echo ok`
    # went on, exit 0, when `dynamo-lab --help` of a plain pip install failed.
    venv_bin = tmp_path / "pipcheck" / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "dynamo-lab").write_text("#!/bin/sh\necho 'ModuleNotFoundError: no module infra' >&2\nexit 1\n")
    (venv_bin / "dynamo-lab").chmod(0o755)
    done = _ci_lines_run_under_errexit(tmp_path, '"$pipcheck/venv/bin/dynamo-lab" --help',
                                       "pip install . gives a working dynamo-lab", {},
                                       pipcheck=str(tmp_path / "pipcheck"))
    assert done.returncode != 0 and "REACHED-THE-END" not in done.stdout, done
    assert "gives a working dynamo-lab" not in done.stdout


def test_ci_shows_why_collecting_a_tier_to_install_what_it_needs_failed(tmp_path):
    # The slow and lab tiers are collected early (their installs, beside the tools' build) with the
    # collection's output kept out of the log; a collection error (pytest writes it on stdout) must
    # still be seen, not end the run with an exit code alone.
    done = _ci_lines_run_under_errexit(
        tmp_path, "python3 dev.py test-slow -q --collect-only", "python3 dev.py test-lab -q --collect-only",
        {"python3": 'echo "ERROR collecting tests/lab/predict/test_peer.py: ImportError: no aiconfigurator"; exit 2'},
        collect_log=str(tmp_path / "collect.log"))
    assert done.returncode == 2 and "REACHED-THE-END" not in done.stdout, done
    assert "ERROR collecting tests/lab/predict/test_peer.py" in done.stdout + done.stderr, done


def test_ci_shows_what_the_tools_build_said_when_a_tier_fails_before_it_ends(tmp_path):
    # The tools build in the background into a log shown when they end; a tier failing first ends the
    # run, and the log went with it: a build failing too was learnt only on the rerun.
    done = _ci_lines_run_under_errexit(
        tmp_path, 'tools_log="$(mktemp)"', "python3 dev.py test -q -rs",
        {"python3": 'case "$*" in\n'
                    '  *-c*) echo kubernetes ;;\n'
                    '  *cluster-tools*) echo "dev.py: kubernetes: go: module lookup disabled"; sleep 30 ;;\n'
                    '  *) sleep 1; exit 1 ;;\n'
                    'esac'})
    assert done.returncode == 1 and "REACHED-THE-END" not in done.stdout, done
    assert "the run ends with exit 1 while cluster-tools was running" in done.stdout, done
    assert "dev.py: kubernetes: go: module lookup disabled" in done.stdout, done
