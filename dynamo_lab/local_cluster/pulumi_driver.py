"""The Pulumi driver: one action on a stack, by the real Pulumi engine and Kubernetes provider,
running the project's own program.

`pulumi up` starts a Python program through the language host `pulumi-language-python`, which no
registry these machines reach serves. It is not needed: the Automation API's inline programs
(pulumi/automation/_server.py, `LanguageServer`) serve the program from this process and start the
CLI with `--client=127.0.0.1:PORT`; the CLI then takes its language runtime from that address
(pkg/cmd/pulumi, `connectToLanguageRuntime`) and never looks for a language host. So the real CLI
(v3.274.1) and the real provider (4.25.0, the release pyproject.toml pins), both built from Go
modules (tools.py), run `infra.program.pulumi_main` unchanged, with the stack's own
Pulumi.<stack>.yaml (with the local overrides, stack_overrides.py), a file backend and a
passphrase (pulumi_workspace.py).

`python dynamo_lab/local_cluster/pulumi_driver.py ACTION --stack S --workspace DIR --kubeconfig K` runs
one action and prints what Pulumi prints; pulumi_cli.py runs it as a subprocess for the tests and
`dev.py up --local`, so that an interrupted or killed run is a real interrupted or killed process.

Standard library, the Pulumi SDK and PyYAML: this runs with the project's .venv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

# Nothing of the project at import: the driver runs as a script beside a program that may come from
# another checkout (`pr-preview` runs each git ref's own program), so the only `infra` package it
# imports is the program's. Its own parts are its siblings in this directory, imported by their file
# names when it runs as a script (sys.path[0] is this directory until main() takes it out).
if __package__:
    from dynamo_lab.local_cluster.pulumi_workspace import (
        Workspace,
        cli_env,
        install_provider,
        passphrase,
        prepare,
        reap_orphans,
        repair_torn_attributes,
    )
    from dynamo_lab.local_cluster.root_paths import Binary, open_binary, trusted_uid
    from dynamo_lab.local_cluster.stack_overrides import stack_name_problem
else:
    # The one bounded reader its siblings read stack files with is the toolbox's (dynamo_lab/
    # bounded_read.py, standard library and PyYAML only), one directory up; main() takes both
    # directories out of the path again before the program is imported.
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    from pulumi_workspace import (
        Workspace,
        cli_env,
        install_provider,
        passphrase,
        prepare,
        reap_orphans,
        repair_torn_attributes,
    )
    from root_paths import Binary, open_binary, trusted_uid
    from stack_overrides import stack_name_problem

# The checkout this file is in: the default program (a script cannot import dynamo_lab.paths).
ROOT = Path(__file__).resolve().parents[2]
ACTIONS = ("preview", "up", "refresh", "destroy", "outputs", "cancel")


def engine_bins(log=print) -> dict[str, Path]:
    """The Pulumi CLI and the provider, found or built (tools.py)."""
    from dynamo_lab.local_cluster import tools

    names = ["pulumi", "pulumi-resource-kubernetes"]
    bins = tools.bin_dirs(tools.ensure(names, log=log))
    missing = [n for n in names if n not in bins]
    if missing:
        raise RuntimeError(f"the engine needs {', '.join(missing)} (see cluster-tools above)")
    return bins


def _checked_command(cli: Binary):
    """The Automation API's PulumiCommand, running the CLI `cli` (opened and checked by
    root_paths.open_binary) for each of its commands: its `command` is the open file's path
    (/proc/PID/fd/N), which PulumiCommand.run execs, so each `pulumi` the stack runs is that file,
    never its path looked up again. PulumiCommand's own __init__ is not run: it would run
    `root`/bin/pulumi by path to ask its version (pulumi/automation/_cmd.py); the version is asked
    here of the open file, as that __init__ asks it."""
    from pulumi import automation as auto
    from semver import VersionInfo

    said = subprocess.run([cli.exec_path, "version"], env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
                          capture_output=True, text=True, check=True).stdout.strip()
    command = auto.PulumiCommand.__new__(auto.PulumiCommand)
    command.command, command.version = cli.exec_path, VersionInfo.parse(said.removeprefix("v"))
    return command


def _stack(ws: Workspace, cli: Binary, env: Mapping[str, str]):
    from pulumi import automation as auto

    from infra.program import pulumi_main

    workspace = auto.LocalWorkspace(work_dir=str(ws.project), pulumi_home=str(ws.home), program=pulumi_main,
                                    env_vars=dict(env), pulumi_command=_checked_command(cli))
    return auto.Stack.create_or_select(ws.stack, workspace)


def _steps(events: list) -> list[dict[str, str]]:
    """The engine's steps, from its event stream: op, type and name of each resource."""
    out = []
    for e in events:
        pre = getattr(e, "resource_pre_event", None)
        if pre is None:
            continue
        meta = pre.metadata
        out.append({"op": str(getattr(meta.op, "value", meta.op)), "type": meta.type,
                    "name": meta.urn.rsplit("::", 1)[-1], "diffs": list(meta.diffs or [])})
    return out


def _shown(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Stack outputs as printed and kept in results: a secret one as `[secret]`, never its value."""
    return {k: ("[secret]" if v.secret else v.value) for k, v in outputs.items()}


class NotStarted(Exception):
    """Interrupted before the action's CLI started (run's `stopping`)."""


def run(action: str, ws: Workspace, bins: Mapping[str, Path], source: Optional[Path] = None, *,
        diff: bool = False, env: Optional[Mapping[str, str]] = None, echo=None,
        stopping=lambda: False) -> dict[str, Any]:
    """One action on the workspace's stack; returns what the engine reported (steps, summary,
    outputs, stdout). A failed action raises auto.CommandError with Pulumi's own message.
    `stopping()` true (a Ctrl-C that reached no CLI, none running yet) before a CLI is started:
    NotStarted, and no CLI is."""
    def step():
        if stopping():
            raise NotStarted(action)
    if source is not None:
        prepare(ws, source)
    reap_orphans(ws, echo)
    repair_torn_attributes(ws, echo)
    cenv = cli_env(ws, passphrase(ws), os.environ if env is None else env)
    step()
    install_provider(ws, bins, cenv)
    step()
    # Open for the whole action: every CLI the stack runs is this file (_checked_command).
    with open_binary(bins["pulumi"] / "pulumi", trusted_uid()) as cli:
        return _act(action, ws, _stack(ws, cli, cenv), diff, echo, stopping)


def _act(action: str, ws: Workspace, stack, diff: bool, echo, stopping) -> dict[str, Any]:
    if stopping():
        raise NotStarted(action)
    events: list = []
    kw = {"on_output": echo, "on_event": events.append}
    result: dict[str, Any] = {"action": action, "stack": ws.stack}
    if action == "preview":
        r = stack.preview(diff=diff, color="never", **kw)
        result["summary"] = {str(getattr(k, "value", k)): v for k, v in r.change_summary.items()}
    elif action == "up":
        r = stack.up(diff=diff, color="never", **kw)
        result["summary"] = dict(r.summary.resource_changes or {})
        result["outputs"] = _shown(r.outputs)
    elif action == "refresh":
        r = stack.refresh(color="never", **kw)
        result["summary"] = dict(r.summary.resource_changes or {})
    elif action == "destroy":
        r = stack.destroy(color="never", **kw)
        result["summary"] = dict(r.summary.resource_changes or {})
    elif action == "outputs":
        result["outputs"] = _shown(stack.outputs())
        return result
    elif action == "cancel":
        stack.cancel()
        return result
    else:
        raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
    result["stdout"] = r.stdout
    result["steps"] = _steps(events)
    return result



def main(argv: Optional[Sequence[str]] = None) -> int:
    interrupted: list[int] = []

    def on_signal(signum, frame):
        # Recorded, never raised, from the first line on: the CLI is in this process group and got
        # the same signal, so it cancels (or, not started yet, is never started: run's `stopping`);
        # this process waits for it to end instead of dying under it, which would orphan it.
        interrupted.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    p = argparse.ArgumentParser(prog="pulumi_driver.py",
                                description="One Pulumi action on a stack, by the real engine and provider, "
                                            "against the cluster the kubeconfig names.")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("--stack", required=True)
    p.add_argument("--workspace", type=Path, required=True, help="the local deployment's directory")
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--stack-file", type=Path,
                   help="the stack file to deploy (default: the program root's Pulumi.STACK.yaml); written into "
                        "the workspace with the local overrides before the action")
    p.add_argument("--program-root", type=Path, default=ROOT, help="the checkout whose infra.program runs")
    p.add_argument("--pulumi-bin", type=Path, help="the directory of the pulumi CLI (default: cluster-tools')")
    p.add_argument("--provider-bin", type=Path, help="the directory of pulumi-resource-kubernetes")
    p.add_argument("--diff", action="store_true", help="preview/up: show the rich diff")
    p.add_argument("--result", type=Path, help="write what the engine reported here, as JSON")
    a = p.parse_args(argv)
    if (problem := stack_name_problem(a.stack)) is not None:  # it names the workspace's files
        print(f"engine: {problem}", file=sys.stderr)
        return 2
    here = Path(__file__).resolve()
    own = {str(here.parent), str(here.parents[1])}  # its siblings' directory and the toolbox's
    sys.path[:] = [str(a.program_root.absolute())] + [x for x in sys.path if x not in own]
    ws = Workspace(a.workspace.absolute(), a.stack, a.kubeconfig.absolute())
    # preview and up deploy the stack file as it is now; the other actions act on what the
    # workspace holds, and write it only when there is none yet.
    source: Optional[Path] = a.stack_file or a.program_root / f"Pulumi.{a.stack}.yaml"
    if a.action not in ("preview", "up") and a.stack_file is None and ws.stack_file.exists():
        source = None
    if source is not None and not source.is_file():
        print(f"engine: no stack file {source}", file=sys.stderr)
        return 2
    from pulumi.automation import errors as auto_errors
    try:
        bins = ({"pulumi": a.pulumi_bin, "pulumi-resource-kubernetes": a.provider_bin}
                if a.pulumi_bin and a.provider_bin else engine_bins(log=lambda m: None))
        result = run(a.action, ws, bins, source, diff=a.diff, echo=lambda line: print(line, flush=True),
                     stopping=lambda: bool(interrupted))
    except NotStarted:
        print(f"engine: interrupted before pulumi {a.action} of {a.stack} started; the stack was not touched",
              file=sys.stderr, flush=True)
        return 130
    except subprocess.CalledProcessError as exc:  # install_provider's `pulumi plugin install`
        print(f"engine: {shlex.join(exc.cmd)} failed (exit {exc.returncode}):\n{(exc.stderr or '').strip()}",
              file=sys.stderr, flush=True)
        return 130 if interrupted else 1
    except auto_errors.CommandError as exc:
        print(f"engine: pulumi {a.action} failed for stack {a.stack}:\n{_message(exc)}", file=sys.stderr, flush=True)
        return 130 if interrupted else 1
    except RuntimeError as exc:
        print(f"engine: {exc}", file=sys.stderr)
        return 1
    if a.result:
        a.result.write_text(json.dumps(result, indent=2, default=str))
    if a.action == "outputs":
        print(json.dumps(result["outputs"], indent=2, default=str))
    return 130 if interrupted else 0


def _message(exc) -> str:
    """Pulumi's own words from a failed command: its stderr, else the tail of its stdout."""
    err = (getattr(exc, "stderr", "") or "").strip()
    out = (getattr(exc, "stdout", "") or "").strip()
    return err or "\n".join(out.splitlines()[-30:]) or str(exc)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
