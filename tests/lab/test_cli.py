"""The lab's command line: output on success, only the error (exit 2) on a bad stack file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dynamo_lab import cli
from tests.helpers import ROOT, run_cli, syntax_nodes


def test_render_json_lists_registrations_in_order():
    proc = run_cli("render", "cross-server", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    regs = json.loads(proc.stdout)
    types = [r["type"] for r in regs]
    assert types.index("kubernetes:helm.sh/v3:Release") < types.index(
        "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment")
    assert all(set(r) == {"type", "name", "inputs"} for r in regs)


def test_render_yaml_labels_the_helm_release():
    proc = run_cli("render", "kv-routing")
    assert proc.returncode == 0, proc.stderr
    assert "# Helm release, installed by Pulumi's helm.v3.Release (not a Kubernetes object)" in proc.stdout
    assert "kind: DynamoGraphDeployment" in proc.stdout


def test_render_of_a_bad_stack_file_prints_only_the_error(tmp_path):
    # A copy of the project with one misspelled key; the CLI reads the stack files of the project
    # it is run in, as the Pulumi CLI does.
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    text = (ROOT / "Pulumi.cross-server.yaml").read_text()
    assert "      replicas: 2\n" in text
    (tmp_path / "Pulumi.cross-server.yaml").write_text(text.replace("      replicas: 2\n", "      replica: 2\n"))
    proc = run_cli("render", "cross-server", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: dynamo-lab render: Pulumi.cross-server.yaml: workers.decode.replica: "
                                  "unknown key `replica`; did you mean `replicas`?")


def test_unknown_stack_is_a_clear_error():
    proc = run_cli("render", "no-such-stack")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no stack file Pulumi.no-such-stack.yaml" in proc.stderr
    assert "cross-server" in proc.stderr


def test_a_stack_file_ending_yml_is_named_with_what_pulumi_reads_instead(tmp_path):
    # Beside Pulumi.yaml, Pulumi reads a stack's file only as Pulumi.<stack>.yaml: a .yml copy would
    # be ignored by `pulumi up` as much as by dynamo-lab, and the refusal says which name to give it.
    (tmp_path / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.mine.yml").write_bytes((ROOT / "Pulumi.cross-server.yaml").read_bytes())
    proc = run_cli("sizing", "mine", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no stack file Pulumi.mine.yaml" in proc.stderr
    assert "Pulumi.mine.yml is here" in proc.stderr and "rename it to Pulumi.mine.yaml" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_sizing_json_has_the_documented_keys():
    proc = run_cli("sizing", "cross-server", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["kv_bytes_per_token"] == 114688
    assert data["kv_bytes_per_request"] == 2371 * 114688
    for g in data["groups"]:
        assert {"name", "role", "gpu_class", "kv_cache_bytes", "host_memory_floor_bytes",
                "memory_limit_bytes"} <= set(g)
    (t,) = data["transfers"]
    assert {"from_group", "to_group", "cold_bytes", "warm_bytes", "throughput_bytes_per_s", "cold_seconds",
            "warm_seconds", "expected_seconds", "decode_prefix_hit_probability"} <= set(t)
    assert 2.2 <= t["cold_seconds"] <= 2.6 and t["warm_seconds"] < t["expected_seconds"] < t["cold_seconds"]


@pytest.mark.process
def test_console_script_is_installed():
    exe = shutil.which("dynamo-lab", path=str(Path(sys.executable).parent))
    assert exe, "pyproject.toml [project.scripts] installs dynamo-lab"
    proc = subprocess.run([exe, "sizing", "same-server"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Stack same-server: Qwen/Qwen3-0.6B")


@pytest.mark.process
def test_a_reader_that_stops_early_gets_no_traceback():
    # `dynamo-lab sizing STACK | head -1`: the reader is gone before the report is written (`true` reads nothing).
    proc = subprocess.run(f"{sys.executable} -m dynamo_lab sizing cross-server | true",
                          shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


@pytest.mark.process
def test_a_python_without_the_projects_packages_is_told_to_use_dev_py():
    # -S: this Python without its site-packages, as the system python3 outside .venv is.
    proc = subprocess.run([sys.executable, "-S", "-m", "dynamo_lab", "sizing", "cross-server"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr and "ModuleNotFoundError" not in proc.stderr
    assert "it is not the project's environment. Run it as `python3 dev.py sizing cross-server`" in proc.stderr


def test_help_names_only_the_entries_that_run_the_tools():
    text = " ".join(cli.parser().format_help().split())  # argparse wraps lines
    assert "python -m dynamo_lab COMMAND" in text and "python3 dev.py COMMAND" in text
    # `python -m infra` is the Pulumi program's entry: it only says where the tools are.
    assert "python -m infra`" not in text and "python -m infra " not in text


def test_help_names_every_command_that_reads_a_cluster():
    # A command with --from (read a saved copy instead of the live cluster) reads a cluster; the
    # help once said only preflight did, while advise does too.
    import argparse

    p = cli.parser()
    (commands,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    readers = sorted(name for name, sub in commands.choices.items()
                     if any("--from" in a.option_strings for a in sub._actions))
    assert "preflight" in readers and "advise" in readers
    text = " ".join(p.format_help().split())
    sentence = text[:text.index("read a cluster")]
    sentence = sentence[sentence.rindex(".") + 1:]
    assert [r for r in readers if f"`{r}`" not in sentence] == [], sentence


def test_an_installed_copy_run_outside_a_project_says_no_project_was_found(tmp_path, monkeypatch):
    # As `pip install .` installs it: the code in site-packages, no Pulumi.yaml beside it.
    from dynamo_lab import stack_files

    monkeypatch.setattr(stack_files, "ROOT", tmp_path / "site-packages")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_cli("sizing", "cross-server", cwd=elsewhere)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: dynamo-lab sizing: no Pulumi.yaml of dynamo-lab in {elsewhere} or any "
                                  "directory above it: run dynamo-lab in the project's checkout")
    assert "site-packages" not in proc.stderr
    # Below the project, the project is found, as the Pulumi CLI finds it.
    assert run_cli("sizing", "cross-server", cwd=ROOT / "infra").returncode == 0


@pytest.mark.process
def test_the_process_entry_exits_with_the_commands_code_and_its_whole_output():
    # python -m dynamo_lab (and the console script) end through cli.entry, which freezes the heap
    # before exit: the output still arrives whole and the exit code is the command's.
    bad = subprocess.run([sys.executable, "-m", "dynamo_lab", "sizing", "no-such-stack"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == "" and "no stack file Pulumi.no-such-stack.yaml" in bad.stderr
    good = subprocess.run([sys.executable, "-m", "dynamo_lab", "sizing", "cross-server"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and good.stdout == run_cli("sizing", "cross-server").stdout


@pytest.mark.parametrize("argv", [["predict", "same-server", "--rate", "abc"],
                                  ["advise", "same-server", "--concurrency", "0"],
                                  ["sizing"], ["nosuch"], ["render", "same-server", "--no-such-flag"]])
def test_a_refused_command_line_is_one_line_worded_as_every_refusal_without_the_usage_block(argv):
    done = run_cli(*argv)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: dynamo-lab") and "--help)" in line, line


def test_no_refusal_begins_with_a_prefix_of_its_own_under_the_commands():
    # main prints every UserError as `error: dynamo-lab COMMAND: MESSAGE`: a message that begins with
    # `error: `, a command's name or the local run's `local: ` tag would print that prefix twice
    # (`error: dynamo-lab pr-preview: pr-preview: ...`). Every error class of the tools is a UserError,
    # and each raise here words its message with the literal it begins with.
    import argparse
    import ast

    (sub,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = {*sub.choices, "local", "local-cluster", "error"}
    doubled = []
    for path in sorted((ROOT / "dynamo_lab").rglob("*.py")):
        for node in syntax_nodes(path.read_text()):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            first = node.exc.args[0]
            first = first.values[0] if isinstance(first, ast.JoinedStr) and first.values else first
            text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
            if text.split(":")[0] in commands and ":" in text:
                doubled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]!r}")
    assert doubled == []


def test_pr_previews_refusal_has_one_prefix():
    said = run_cli("pr-preview", "--", "--output=/tmp/x", "HEAD", cwd=ROOT)
    assert said.returncode == 2 and said.stdout == ""
    assert said.stderr == ("error: dynamo-lab pr-preview: '--output=/tmp/x' is not a git ref (it starts with '-'); "
                           "name a branch, tag or commit\n")
