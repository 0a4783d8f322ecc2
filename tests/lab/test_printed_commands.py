"""The shell commands the project prints (the stack outputs probeLogs and benchLogs, and `bench
--target cluster`'s steps) run as printed: each goes through a real shell with stand-ins for
`pulumi` and `kubectl` on PATH, and kubectl must get exactly the arguments meant, no `|` among them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import everything_on, run_stack, sized

STACK = "cross-server"
LOG = ["Collecting aiperf==0.13.0", '{"run": 1, "ttft_p50_ms": 90}', "run 1 done", '{"run": 2, "ttft_p50_ms": 95}']
# The stand-ins run with this test's Python, without site (-S): `#!/usr/bin/env python3` found a pyenv
# shim on the development machine, a bash script that took half a second to start each one.
SHEBANG = f"#!{sys.executable} -S\n"
FAKE_KUBECTL = SHEBANG + textwrap.dedent("""\
    # kubectl logs: records its arguments, prints the Job's log (--tail=N: its last N lines).
    import json, os, sys
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
    lines = json.loads(os.environ["FAKE_LOG"])
    tail = [a for a in sys.argv[1:] if a.startswith("--tail=")]
    print("\\n".join(lines[-int(tail[0].split("=")[1]):] if tail else lines))
    """)
FAKE_PULUMI = SHEBANG + textwrap.dedent("""\
    # pulumi stack output NAME --stack STACK: the value the stack's program outputs.
    import json, os, sys
    args = sys.argv[1:]
    assert args[:2] == ["stack", "output"] and args[3:] == ["--stack", os.environ["FAKE_STACK"]], args
    print(json.loads(os.environ["FAKE_OUTPUTS"])[args[2]])
    """)


@pytest.fixture(scope="module")
def outputs():
    return run_stack(STACK, everything_on(STACK)).outputs


@pytest.fixture
def shell(tmp_path, outputs):
    """Runs a command line with sh, as a user pasting it would; returns (stdout, kubectl's argv lists)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("kubectl", FAKE_KUBECTL), ("pulumi", FAKE_PULUMI)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_CALLS": str(calls),
           "FAKE_LOG": json.dumps(LOG), "FAKE_STACK": STACK, "FAKE_OUTPUTS": json.dumps(outputs)}

    def run(line: str) -> tuple[str, list[list[str]]]:
        proc = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        made = [json.loads(c) for c in calls.read_text().splitlines()] if calls.exists() else []
        calls.unlink(missing_ok=True)
        return proc.stdout, made
    return run


# Every printed kubectl command names the stack's cluster (kubernetes:context), never the current one.
CONTEXT = ["--context", "dynamo-lab"]


def _logs_args(outputs, job_key: str) -> list[str]:
    return [*CONTEXT, "logs", "-n", f"dynamo-lab-{STACK}", f"job/{outputs[job_key]}"]


def test_bench_logs_runs_with_eval_and_keeps_only_the_json_lines(shell, outputs):
    out, calls = shell(f'eval "$(pulumi stack output benchLogs --stack {STACK})"')
    assert calls == [_logs_args(outputs, "benchJob")]
    assert out.splitlines() == [line for line in LOG if line.startswith("{")]


@pytest.mark.parametrize("form", ['eval "$(pulumi stack output probeLogs --stack {s})"',
                                  "$(pulumi stack output probeLogs --stack {s})"])
def test_probe_logs_runs_as_printed_either_way(shell, outputs, form):
    out, (call,) = shell(form.format(s=STACK))
    job = [w for w in outputs["probeLogs"].split() if w.startswith("job/")][0]
    assert job.startswith(f"job/{STACK}-kv-probe-initiator-") and "|" not in call
    assert call == [*CONTEXT, "logs", "-n", f"dynamo-lab-{STACK}", job, "--tail=1"]
    assert out.splitlines() == LOG[-1:]


def test_the_printed_cluster_bench_steps_run_as_printed(shell, outputs, tmp_path):
    from dynamo_lab.bench import sweep

    cfg, _ = sized(STACK, everything_on(STACK))
    out_dir = tmp_path / "bench out"  # a space, which the steps must quote
    steps = sweep.cluster_steps(STACK, cfg, out_dir).splitlines()
    (follow,) = [s for s in steps if s.startswith("kubectl --context dynamo-lab logs")]
    _, calls = shell(follow)
    assert calls == [[*CONTEXT, "logs", "-n", f"dynamo-lab-{STACK}", "-f", f"job/{outputs['benchJob']}"]]
    (collect,) = [s for s in steps if "benchLogs" in s and not s.startswith("#")]
    _, calls = shell(collect)
    assert calls == [_logs_args(outputs, "benchJob")]
    results = out_dir / "results.jsonl"
    assert [json.loads(line) for line in results.read_text().splitlines()] == [json.loads(LOG[1]), json.loads(LOG[3])]
    (report,) = [s for s in steps if s.startswith("python3 dev.py report")]
    assert shlex.split(report)[-1] == str(results)
    assert Path(shlex.split(report)[-1]).is_file()


@pytest.mark.parametrize("form", ['eval "$(pulumi stack output portForward --stack {s})"',
                                  "$(pulumi stack output portForward --stack {s})"])
def test_port_forward_runs_as_printed_either_way(shell, form):
    _, calls = shell(form.format(s=STACK))
    assert calls == [[*CONTEXT, "port-forward", "-n", f"dynamo-lab-{STACK}", f"svc/{STACK}-frontend", "8000:8000"]]


def test_a_printed_command_reads_the_stacks_own_kubeconfig(tmp_path):
    # kubernetes:kubeconfig set (the checklist's `pulumi config set kubernetes:kubeconfig ~/.kube/lab.yaml`):
    # the printed command must read that file too, or kubectl would look for the context elsewhere.
    def edit(c):
        c["kubernetes:kubeconfig"] = "~/.kube/lab one.yaml"

    printed = run_stack(STACK, edit).outputs["portForward"]
    home = tmp_path / "home"
    proc = subprocess.run(["sh", "-c", f'printf "%s\\n" {printed}'], env={**os.environ, "HOME": str(home)},
                          capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines()[:4] == ["kubectl", "--kubeconfig", f"{home}/.kube/lab one.yaml", "--context"]
