"""The README's deploy checklist, its Pulumi CLI steps run as written, in its order, with the real
Pulumi CLI against the local cluster: so the order (stack select before config set, `--stack` on
every config command) cannot rot.

Run as written: `pulumi version`, `pulumi stack select --create`, `pulumi config set ... --stack`,
`pulumi stack output ... --stack` and `pulumi stack rm`, by the CLI itself, in a copy of the
project (its Pulumi.yaml and the shipped stack file). `preview`, `up` and `destroy` run the program,
which the CLI starts through the Python language host, not to be had here: those three go through
the Automation API driver (dynamo_lab/local_cluster/pulumi_driver.py), which runs the same CLI on the same
stack, state and stack file, the program served in-process (docs/real-engine.md). The one change
to the checklist's commands: the context is the local cluster's, not `my-lab`. The local
deployment also turns platform management off (no chart here), and the stand-in reports the graph
Ready; step 10's request needs a running worker, which no local cluster has.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.standin import GraphReady
from tests.helpers import ROOT, deploy_checklist, pulumi_steps
from tests.lab.cluster.test_deploy import copy_checkout, ok

pytestmark = pytest.mark.cluster

STACK = "cross-server"
# What the driver runs for the checklist's program-running commands.
DRIVEN = {f"pulumi preview --stack {STACK} --diff": "preview", f"pulumi up --stack {STACK} --yes": "up",
          f"pulumi destroy --stack {STACK} --yes": "destroy"}


def test_the_checklists_pulumi_steps_run_as_written_in_order(lab_cluster_with_crd, engine_bins, tmp_path):
    readme = (ROOT / "README.md").read_text()
    steps = pulumi_steps(readme)
    ran = [command for _, command in steps]
    assert [n for n, _ in steps] == sorted(n for n, _ in steps)  # in the checklist's order
    assert set(DRIVEN) <= set(ran), ran

    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster_with_crd.kubeconfig)
    pulumi_workspace.prepare(ws, ROOT / f"Pulumi.{STACK}.yaml")
    env = pulumi_workspace.cli_env(ws, pulumi_workspace.passphrase(ws), os.environ)
    env["PATH"] = f"{engine_bins['pulumi']}{os.pathsep}{env.get('PATH', '')}"
    context = "dynamo-lab"  # the local cluster's kubeconfig context
    outputs: dict[str, str] = {}
    previews: list[dict] = []
    with GraphReady(lab_cluster_with_crd.api()):
        for number, command in steps:
            if command in DRIVEN:
                # The workspace's stack file as the CLI steps left it: what `config set` wrote stays.
                inv = pulumi_cli.invoke(DRIVEN[command], ws, engine_bins, stack_file=ws.stack_file,
                                    diff="--diff" in command)
                result = ok(inv)
                if DRIVEN[command] == "preview":
                    previews.append(result)
                continue
            argv = shlex.split(command.replace("my-lab", context))
            done = subprocess.run(argv, cwd=ws.project, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (number, command, done.stdout, done.stderr)
            outputs[command] = done.stdout.strip()
    # The preview output docs/deploy.md shows for step 8 is this one's: the same steps, in the same words.
    shown_in = (ROOT / "docs" / "deploy.md").read_text()
    block = shown_in[shown_in.index("<!-- preview-output -->"):shown_in.index("<!-- /preview-output -->")]
    shown = set(re.findall(r"^\s+\+  (\S+) (\S+) create$", block, flags=re.M))
    (preview,) = previews
    assert shown == {(s["type"], s["name"]) for s in preview["steps"]}, shown
    assert f"+ {len(shown)} to create" in block
    # What step 10 runs next is what the stack output said (the program's portForward).
    # Its cluster is the local one here (its kubeconfig and context, which a local run sets), the
    # checklist's my-lab there.
    (portforward,) = [o for c, o in outputs.items() if "stack output portForward" in c]
    local = f"--kubeconfig {lab_cluster_with_crd.kubeconfig} --context {context} "
    assert local in portforward
    assert f"\n    {portforward.replace(local, '--context my-lab ')} &\n" in readme
    # `stack rm --preserve-config` kept the stack file; the stack is gone from the backend.
    assert ws.stack_file.exists()
    listed = subprocess.run(["pulumi", "stack", "ls", "--json"], cwd=ws.project, env=env, capture_output=True,
                            text=True, check=True).stdout
    assert STACK not in listed


def test_the_checklists_dev_py_steps_run_in_its_environment_without_rebuilding_venv(lab_cluster, tmp_path,
                                                                                     record_property):
    # Its shell as the checklist leaves it: step 3's `export PATH="$PWD/.uv/bin:$PATH"` stays in force
    # for every later `python3 dev.py`, which then must not make .venv again (it once did: .uv/bin had
    # a python3 of its own, and a sizing took 6-21 s instead of 1).
    project = copy_checkout(tmp_path / "project")
    commands = [(step.number, c) for step in deploy_checklist((ROOT / "README.md").read_text())
                for c in step.commands() if c.startswith(("python3 dev.py ", "export PATH="))]
    assert [c for _, c in commands][:2] == ["python3 dev.py setup", 'export PATH="$PWD/.uv/bin:$PATH"'], commands
    env = {**os.environ, "KUBECONFIG": str(lab_cluster.kubeconfig)}  # the stack's context is the local one's
    times, marks = [], []
    script = "set -e\n"
    for i, (_, command) in enumerate(commands):
        # Each command timed in the shell itself, and .venv's identity noted after it.
        script += (f"s=$(date +%s%N); {command}\n"
                   f"echo \"step {i} $(( ($(date +%s%N) - s) / 1000000 ))\" >> times\n"
                   f"stat -c 'venv {i} %i %.9Y' .venv/pyvenv.cfg >> times\n")
    done = subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    for line in (project / "times").read_text().splitlines():
        kind, i, *rest = line.split()
        (times if kind == "step" else marks).append((int(i), rest))
    for (_, (ms,)), (number, command) in zip(times, commands, strict=True):
        record_property(f"step {number}: {command}", f"{int(ms) / 1000:.2f} s")
        print(f"checklist step {number}: {command}: {int(ms) / 1000:.2f} s")
    made = marks[0][1]
    rebuilt = [commands[i] for i, mark in marks[1:] if mark != made]
    assert rebuilt == [], f"these checklist steps made .venv again: {rebuilt}"
    # What the environment's PATH holds of .uv: uv, and no interpreter to shadow python3.
    assert sorted(p.name for p in (project / ".uv" / "bin").iterdir()) == ["uv"]
