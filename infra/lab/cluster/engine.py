"""The real Pulumi engine and Kubernetes provider, running the project's own program.

`pulumi up` starts a Python program through the language host `pulumi-language-python`, which no
registry these machines reach serves. It is not needed: the Automation API's inline programs
(pulumi/automation/_server.py, `LanguageServer`) serve the program from this process and start the
CLI with `--client=127.0.0.1:PORT`; the CLI then takes its language runtime from that address
(pkg/cmd/pulumi, `connectToLanguageRuntime`) and never looks for a language host. So the real CLI
(v3.274.1) and the real provider (4.25.0, the release pyproject.toml pins), both built from Go
modules (tools.py), run `infra.program.pulumi_main` unchanged, with the stack's own
Pulumi.<stack>.yaml, a file backend and a passphrase.

One local deployment keeps everything in its own directory (`Workspace.root`):

    project/   Pulumi.yaml and Pulumi.<stack>.yaml (the stack's file with the local overrides)
    state/     the file backend (PULUMI_BACKEND_URL)
    home/      PULUMI_HOME: the plugin cache, where the built provider is installed
    passphrase the stack's secrets passphrase, readable by its owner only

The local overrides: the Dynamo platform chart cannot be downloaded here, so `platform.manage` is
false (the graph CRD comes from the pinned upstream files, applied by the cluster harness). Every
stack key that can choose a cluster names the local one: `kubernetes:kubeconfig` is the local
cluster's kubeconfig and `kubernetes:context` its context, whatever the stack file says (the
program's explicit Provider prefers both to the environment, so a lab's kubeconfig left there
would send a local run to the lab); `kubernetes:cluster` and `kubernetes:renderYamlToDirectory`
are left out. What the workspace cannot decrypt is left out too: the source file's secrets
provider state (`encryptionsalt`, ...) and its `secure:` values belong to another passphrase, and
a workspace has its own (no worker runs locally, so the HF token is not missed).

Standard library, the Pulumi SDK and PyYAML: this runs with the project's .venv.
`python -m infra.lab.cluster.engine ACTION --stack S --workspace DIR --kubeconfig K` runs one
action and prints what Pulumi prints; the tests and `dev.py up --local` use it as a subprocess, so
that an interrupted or killed run is a real interrupted or killed process.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

# Nothing of the project at import: the driver runs as a script (`invoke`) beside a program that may
# come from another checkout (`pr-preview` runs each git ref's own program), so the only `infra`
# package it imports is the program's.
ROOT = Path(__file__).resolve().parents[3]
ENGINE_FILE = Path(__file__).resolve()
PROJECT = "dynamo-lab"
# The provider release tools.py builds (tools.PROVIDER) and pyproject.toml pins; a test holds them equal.
PROVIDER_VERSION = "4.25.0"
# What a local deployment changes in a stack's file, and why (module docstring); the cluster keys
# are added by local_overrides, from the local cluster's kubeconfig.
LOCAL_OVERRIDES: dict[str, Any] = {"dynamo-lab:platform": {"manage": False}}
# An override that takes the key out of the stack's config.
REMOVE = object()
# The provider's settings besides kubeconfig and context that choose where resources go
# (pulumi-kubernetes 4.25.0, provider.py: `cluster`, the kubeconfig cluster to use;
# `renderYamlToDirectory`, files instead of a cluster). Only a default provider reads them from the
# stack, and the program has none, but a local run takes no chance with a stack of another program.
CLUSTER_CHOOSERS = ("kubernetes:cluster", "kubernetes:renderYamlToDirectory")
# What a stack file holds besides `config:` (pulumi pkg/workspace, ProjectStack): the secrets
# provider's state, which belongs to the passphrase or key the file was made with, and Pulumi ESC
# environments, which a file backend cannot open and which may set any config key, a cluster's too.
NOT_COPIED = ("encryptionsalt", "secretsprovider", "encryptedkey", "environment")
# Pulumi's stack name rule (pkg/backend/httpstate/backend.go, validateStackName:
# ^[A-Za-z0-9_.-]{1,100}$). A local deployment makes the name a directory (stacks/STACK) and a file
# (Pulumi.STACK.yaml), so nothing else gets through, nor `.` and `..`, which fit the rule.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
ACTIONS = ("preview", "up", "refresh", "destroy", "outputs", "cancel")


@dataclasses.dataclass(frozen=True)
class Workspace:
    """One local deployment of one stack: its project copy, state, plugin cache and passphrase."""
    root: Path
    stack: str
    kubeconfig: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def stack_file(self) -> Path:
        return self.project / f"Pulumi.{self.stack}.yaml"

    @property
    def passphrase_file(self) -> Path:
        return self.root / "passphrase"


# ---- pure parts: the project copy and the environment ----

def stack_name_problem(stack: str) -> Optional[str]:
    """Why `stack` cannot be a stack name (None: it can), in words for a one-line refusal."""
    if STACK_NAME.fullmatch(stack) and stack not in (".", ".."):
        return None
    return (f"{stack!r} is not a stack name: Pulumi's stack names are 1 to 100 letters, digits, '-', '_' "
            "and '.' (and a local run also refuses '.' and '..', which name directories)")


def local_overrides(kubeconfig: Path, context: str) -> dict[str, Any]:
    """LOCAL_OVERRIDES, and every stack key that can choose a cluster set to the local one."""
    return {**LOCAL_OVERRIDES, "kubernetes:kubeconfig": str(kubeconfig), "kubernetes:context": context,
            **{key: REMOVE for key in CLUSTER_CHOOSERS}}


def kubeconfig_context(kubeconfig: Path) -> str:
    """The kubeconfig's current context: the local cluster's kubeconfig names only its own."""
    try:
        context = (yaml.safe_load(kubeconfig.read_text()) or {}).get("current-context")
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        raise RuntimeError(f"the local cluster's kubeconfig {kubeconfig} cannot be read ({exc})") from None
    if not isinstance(context, str) or not context:
        raise RuntimeError(f"the local cluster's kubeconfig {kubeconfig} names no current-context")
    return context


def is_secure(value: Any) -> bool:
    """A value Pulumi keeps encrypted in the stack file: `{secure: <ciphertext>}`, at any depth."""
    if isinstance(value, Mapping):
        return (set(value) == {"secure"} and isinstance(value["secure"], str)) or any(map(is_secure, value.values()))
    if isinstance(value, list):
        return any(map(is_secure, value))
    return False


def merge_config(source: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A stack file's `config:` with `overrides` applied key by key; a mapping value is merged one
    level down (`dynamo-lab:platform: {manage: false}` keeps the stack's other platform keys), and
    REMOVE takes the key out."""
    out = dict(source)
    for key, value in overrides.items():
        if value is REMOVE:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def stack_document(source: Mapping[str, Any], existing: Optional[Mapping[str, Any]],
                   overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace's Pulumi.<stack>.yaml: the source file's config with the overrides, less what
    the workspace cannot decrypt (NOT_COPIED, `secure:` values: another passphrase's), keeping what
    the CLI itself wrote there (the passphrase's salt, values set with `config set --secret`)."""
    doc = {k: v for k, v in source.items() if k != "config" and k not in NOT_COPIED}
    config = {k: v for k, v in (source.get("config") or {}).items() if not is_secure(v)}
    if existing:
        if existing.get("encryptionsalt"):
            doc["encryptionsalt"] = existing["encryptionsalt"]
        for key, value in (existing.get("config") or {}).items():
            if key not in config and is_secure(value):
                config[key] = value
    doc["config"] = merge_config(config, overrides)  # last: no key of either file outranks an override
    return doc


def local_changes(source: Mapping[str, Any], doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """What the workspace's file (`doc`, stack_document's) does not take as the source file has it:
    (the source's config keys it sets otherwise, the source's keys it leaves out), config keys
    first. Names only: a value may be a secret."""
    src, got = source.get("config") or {}, doc.get("config") or {}
    changed = [k for k in src if k in got and got[k] != src[k]]
    left_out = [k for k in src if k not in got] + [k for k in source if k != "config" and doc.get(k) != source[k]]
    return changed, left_out


def cli_env(ws: Workspace, passphrase: str, base: Mapping[str, str]) -> dict[str, str]:
    """The CLI's environment: this workspace's backend, home and passphrase, the local cluster's
    kubeconfig, no update checks, and no plugin but the one installed in its own cache."""
    env = {k: v for k, v in base.items()
           if not (k.startswith("PULUMI_") or k == "KUBECONFIG" or k.startswith("PULUMI_K8S_"))}
    env.update({
        "PULUMI_HOME": str(ws.home),
        "PULUMI_BACKEND_URL": f"file://{ws.state}",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # A provider on PATH at another version would be used silently; this makes a mismatch fail.
        "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "KUBECONFIG": str(ws.kubeconfig),
    })
    return env


# ---- the impure parts ----

def prepare(ws: Workspace, source: Path, overrides: Optional[Mapping[str, Any]] = None) -> None:
    """Write the project copy (the stack's file from `source`, with `overrides`, by default
    local_overrides for the workspace's kubeconfig) and, once, the passphrase."""
    if overrides is None:
        overrides = local_overrides(ws.kubeconfig, kubeconfig_context(ws.kubeconfig))
    ws.project.mkdir(parents=True, exist_ok=True)
    ws.state.mkdir(parents=True, exist_ok=True)
    ws.home.mkdir(parents=True, exist_ok=True)
    (ws.project / "Pulumi.yaml").write_text(yaml.safe_dump(
        {"name": PROJECT, "runtime": "python",
         "description": "dynamo-lab, run by the Automation API (infra/lab/cluster/engine.py)"}, sort_keys=False))
    existing = yaml.safe_load(ws.stack_file.read_text()) if ws.stack_file.exists() else None
    doc = stack_document(yaml.safe_load(source.read_text()) or {}, existing, overrides)
    ws.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    if not ws.passphrase_file.exists():
        fd = os.open(ws.passphrase_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24))


def passphrase(ws: Workspace) -> str:
    return ws.passphrase_file.read_text().strip()


def engine_bins(log=print) -> dict[str, Path]:
    """The Pulumi CLI and the provider, found or built (tools.py)."""
    from infra.lab.cluster import tools

    names = ["pulumi", "pulumi-resource-kubernetes"]
    bins = tools.bin_dirs(tools.ensure(names, log=log))
    missing = [n for n in names if n not in bins]
    if missing:
        raise RuntimeError(f"the engine needs {', '.join(missing)} (see cluster-tools above)")
    return bins


def install_provider(ws: Workspace, bins: Mapping[str, Path], env: Mapping[str, str]) -> None:
    """The built provider in this workspace's plugin cache, as `kubernetes` PROVIDER_VERSION: the
    version the program's pulumi-kubernetes asks for, so the engine loads exactly this binary."""
    plugin = ws.home / "plugins" / f"resource-kubernetes-v{PROVIDER_VERSION}"
    if (plugin / "pulumi-resource-kubernetes").is_file():
        return
    subprocess.run([str(bins["pulumi"] / "pulumi"), "plugin", "install", "resource", "kubernetes",
                    PROVIDER_VERSION, "--file", str(bins["pulumi-resource-kubernetes"] / "pulumi-resource-kubernetes")],
                   env=env, check=True, capture_output=True, text=True)


def orphans(ws: Workspace) -> list[int]:
    """Plugin processes of this workspace whose engine is gone (their parent is now init): what a
    CLI killed with SIGKILL leaves behind, since it starts its plugins in process groups of their
    own. Only binaries run from this workspace's own plugin cache are considered."""
    found = []
    home = str(ws.home) + os.sep
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            exe = os.readlink(proc / "exe")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if exe.startswith(home) and ppid == 1:
                found.append(int(proc.name))
    return found


def reap_orphans(ws: Workspace, echo=None) -> list[int]:
    """Stop what a killed run left of this workspace's plugins, before the next action."""
    pids = orphans(ws)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if echo:
            echo(f"engine: stopped a plugin a killed run left behind (pid {pid})")
    return pids


def processes(ws: Workspace) -> dict[int, str]:
    """This workspace's engine processes still running, pid -> command line: the driver (its
    command line names the workspace), the CLI and its plugins (their environment carries the
    workspace's PULUMI_HOME, cli_env's). Only this user's (root kills what this finds); not this
    process, nor a zombie (it runs nothing)."""
    mark, found = f"PULUMI_HOME={ws.home}".encode(), {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, IndexError):
            if proc.stat().st_uid != os.geteuid():
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            driver = str(ENGINE_FILE) in args and any(args[i:i + 2] == ["--workspace", str(ws.root)]
                                                      for i in range(len(args)))
            if driver or mark in (proc / "environ").read_bytes().split(b"\0"):
                found[int(proc.name)] = " ".join(args).strip()[:200]
    return found


def locks(ws: Workspace) -> list[Path]:
    """The stack's locks in its file backend. The CLI writes one while it updates the stack and
    deletes it when the update ends, however it ends, unless the CLI itself is killed; any other
    lock makes the next update fail ("the stack is currently locked by 1 lock(s)"). Where they are:
    `.pulumi/locks/<the stack's fully qualified name>/<id>.json` (pulumi v3.274.1,
    pkg/backend/diy/lock.go: stackLockDir, lockPath; here organization/dynamo-lab/STACK)."""
    where = ws.state / ".pulumi" / "locks"
    return sorted(p for p in where.rglob("*.json") if p.parent.name == ws.stack) if where.is_dir() else []


def _stack(ws: Workspace, bins: Mapping[str, Path], env: Mapping[str, str]):
    from pulumi import automation as auto

    from infra.program import pulumi_main

    command = auto.PulumiCommand(root=str(bins["pulumi"].parent), skip_version_check=True)
    workspace = auto.LocalWorkspace(work_dir=str(ws.project), pulumi_home=str(ws.home), program=pulumi_main,
                                    env_vars=dict(env), pulumi_command=command)
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
    cenv = cli_env(ws, passphrase(ws), os.environ if env is None else env)
    step()
    install_provider(ws, bins, cenv)
    step()
    stack = _stack(ws, bins, cenv)
    step()
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


@dataclasses.dataclass
class Invocation:
    rc: int
    output: str                          # what the driver printed: Pulumi's output and its own errors
    result: Optional[dict[str, Any]]     # what the engine reported (run's return), when it succeeded


def command(action: str, ws: Workspace, bins: Mapping[str, Path], *, stack_file: Optional[Path] = None,
            diff: bool = False, program_root: Path = ROOT, result: Optional[Path] = None) -> list[str]:
    """The driver's command line: this file as a script, the program from `program_root`."""
    argv = [sys.executable, str(ENGINE_FILE), action, "--stack", ws.stack, "--workspace", str(ws.root),
            "--kubeconfig", str(ws.kubeconfig), "--program-root", str(program_root),
            "--pulumi-bin", str(bins["pulumi"]), "--provider-bin", str(bins["pulumi-resource-kubernetes"])]
    if stack_file is not None:
        argv += ["--stack-file", str(stack_file)]
    if diff:
        argv.append("--diff")
    if result is not None:
        argv += ["--result", str(result)]
    return argv


def start(action: str, ws: Workspace, bins: Mapping[str, Path], **kw) -> tuple[subprocess.Popen, Path]:
    """The driver as a process of its own session (a test can signal it and the CLI it starts
    together, as a terminal's Ctrl-C would); its output goes to a file beside the workspace, and
    its temporary files (the Automation API's event log, the CLI's) into a directory there too
    (TMPDIR), removed once it ends (finish, stop), however it ends."""
    ws.root.mkdir(parents=True, exist_ok=True)
    result = ws.root / f"{action}.result.json"
    result.unlink(missing_ok=True)
    tmp = _beside(result, ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    log = open(_beside(result, ".log"), "w")
    proc = subprocess.Popen(command(action, ws, bins, result=result, **kw), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            cwd=str(kw.get("program_root", ROOT)), env={**os.environ, "TMPDIR": str(tmp)})
    log.close()
    return proc, result


def _beside(result: Path, suffix: str) -> Path:
    """The run's log (.log) or temporary directory (.tmp), named like its result file."""
    return result.with_name(result.name.replace(".result.json", suffix))


def finish(proc: subprocess.Popen, result: Path, timeout: Optional[float] = None) -> Invocation:
    rc = proc.wait(timeout)
    shutil.rmtree(_beside(result, ".tmp"), ignore_errors=True)
    output = _beside(result, ".log").read_text()
    return Invocation(rc, output, json.loads(result.read_text()) if rc == 0 and result.exists() else None)


# After a first SIGINT the CLI cancels: it starts no new step, lets the steps in flight finish,
# saves the state and releases the stack's lock; a second SIGINT (or SIGTERM) terminates it at
# once, and a killed CLI leaves the lock and its plugins (pulumi v3.274.1,
# pkg/backend/cancellation_scope.go; pkg/backend/diy/lock.go). What each step of stop() waits:
CANCEL_GRACE_S = 120.0     # the steps in flight (the provider's Cancel ends its waits for readiness)
TERMINATE_GRACE_S = 15.0   # after the second SIGINT, before SIGKILL
PLUGIN_GRACE_S = 10.0      # the CLI's plugins, once the driver ended, before they are killed
CHANGES = ("up", "refresh", "destroy")   # the actions that write the stack's state
# What the CLI prints when the first SIGINT starts its cancel (cancellation_scope.go, v3.274.1).
CANCELLING = "received; cancelling"


@dataclasses.dataclass
class Halt:
    """How a stopped action ended, each fact checked once it had (stop)."""
    action: str
    ws: Workspace
    rc: Optional[int]            # the driver's exit code
    output: str                  # what the driver printed, Pulumi's own "^C received; cancelling" among it
    how: str                     # ended (before it was signalled), cancelled (Pulumi's own cancel, in its
                                 # words), stopped (ended after SIGINT, no cancel of Pulumi's), terminated, killed
    took_s: float
    saved: bool                  # the stack's checkpoint was written after the signal
    killed: dict[int, str]       # engine processes of the workspace still running after it, killed here
    unlocked: list[str]          # locks the stopped CLI left, removed by `pulumi cancel`
    locked: list[str]            # locks still there
    left: dict[int, str]         # engine processes of the workspace still running after all that

    def said(self) -> tuple[list[str], list[str]]:
        """(what was done, each checked; what is left, each with how to remove it), in the words
        procs.cleaned and procs.left_behind take."""
        what = f"pulumi {self.action} of {self.ws.stack}"
        done: list[str] = []
        left: list[str] = []
        if self.how == "ended":
            done.append(f"{what} had already ended (exit {self.rc})")
        elif self.how in ("cancelled", "stopped"):
            done.append(f"{what} " + (f"cancelled by Pulumi itself in {self.took_s:.0f} s (it starts no new "
                                      "step and finishes those in flight)" if self.how == "cancelled" else
                                      f"stopped in {self.took_s:.0f} s"))
            if self.action in CHANGES and self.saved:
                done.append("its state was saved")
        else:
            done.append(f"{what} {self.how} after {self.took_s:.0f} s")
            if self.action in CHANGES:
                left.append(f"what {what} was changing when it was {self.how} may be missing from the stack's "
                            "state (Pulumi says so on the next run; a refresh reconciles it)")
        if self.killed:
            done.append("killed the engine processes it left running (pid "
                        + ", ".join(map(str, self.killed)) + ")")
        if self.unlocked:
            done.append("removed the lock it left on the stack (pulumi cancel)")
        if self.locked:
            left.append(f"the stack's lock ({', '.join(self.locked)}): `{shlex.join(cancel_command(self.ws))}`")
        else:
            done.append("the stack is not locked")
        left += [f"engine process {pid} ({args[:100]}): kill {pid}" for pid, args in self.left.items()]
        return done, left


def cancel_command(ws: Workspace) -> list[str]:
    """The driver's `cancel` of the workspace's stack, as a user runs it from the project."""
    return [sys.executable, "-m", "infra.lab.cluster.engine", "cancel", "--stack", ws.stack,
            "--workspace", str(ws.root), "--kubeconfig", str(ws.kubeconfig)]


class Interrupted(KeyboardInterrupt):
    """An action stopped by Ctrl-C (or SIGTERM, SIGHUP where the command turns them into
    KeyboardInterrupt, procs.Stopped): `halt` says how it ended; `signum` the exit code's signal."""

    def __init__(self, halt: Halt, signum: int):
        super().__init__(f"pulumi {halt.action} of {halt.ws.stack} interrupted")
        self.halt, self.signum = halt, signum


def stop(proc: subprocess.Popen, action: str, ws: Workspace, bins: Mapping[str, Path], *,
         grace: float = CANCEL_GRACE_S, terminate_grace: float = TERMINATE_GRACE_S,
         plugin_grace: float = PLUGIN_GRACE_S, echo=None) -> Halt:
    """Stop a running action the way Pulumi stops itself, then check what it left.

    SIGINT to the driver's process group (the driver and the CLI: what Ctrl-C does in a terminal;
    the driver waits for the CLI): Pulumi cancels. If it has not ended after `grace` seconds, or on
    another Ctrl-C here, a second SIGINT: Pulumi terminates; after `terminate_grace`, SIGKILL. Then
    an engine process of the workspace still running after `plugin_grace` is killed, and only once
    none runs, a lock left on the stack is removed (`pulumi cancel`: pkg/backend/diy's
    CancelCurrentUpdate deletes the stack's lock files), so the next run needs no `pulumi cancel`.
    Its temporary directory goes too (start)."""
    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    t0, wall0, how = time.monotonic(), time.time(), "ended"
    # Signals are counted, never raised, until it is over: each moves on to the next step, and
    # none can cut the checks short.
    hurry: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, lambda signum, frame: hurry.append(signum))
                    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        phases = [("cancelled", signal.SIGINT, grace), ("terminated", signal.SIGINT, terminate_grace),
                  ("killed", signal.SIGKILL, 30.0)]
        for name, signum, wait_s in phases:
            if proc.poll() is not None:
                break
            how = name
            if name == "cancelled":
                echo(f"engine: interrupted: pulumi {action} of {ws.stack} is cancelling (Pulumi lets the steps "
                     "in flight finish and saves the state; Ctrl-C again stops it at once)")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)
            seen, deadline = len(hurry), time.monotonic() + wait_s
            while proc.poll() is None and time.monotonic() < deadline and len(hurry) == seen:
                time.sleep(0.1)
        proc.wait()
        took = time.monotonic() - t0
        result = ws.root / f"{action}.result.json"
        log = _beside(result, ".log")
        output = log.read_text(errors="replace") if log.is_file() else ""
        if how == "cancelled" and CANCELLING not in output:
            how = "stopped"
        deadline = time.monotonic() + plugin_grace
        while processes(ws) and time.monotonic() < deadline:
            time.sleep(0.2)
        killed = processes(ws)
        for pid in killed:  # each is this user's, and carries this workspace's PULUMI_HOME or names it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while (left := processes(ws)) and time.monotonic() < deadline:
            time.sleep(0.1)
        found = [str(p) for p in locks(ws)]
        if found and not left:
            _cancel(ws, bins)
        locked = [str(p) for p in locks(ws)]
        shutil.rmtree(_beside(result, ".tmp"), ignore_errors=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # (A file's time is the kernel's coarse clock, up to a tick behind time.time().)
    saved = any(p.stat().st_mtime >= wall0 - 0.02 for p in (ws.state / ".pulumi" / "stacks").rglob(f"{ws.stack}.json"))
    return Halt(action, ws, proc.returncode, output, how, took, saved, killed,
                [p for p in found if p not in locked], locked, left)


def _cancel(ws: Workspace, bins: Mapping[str, Path]) -> None:
    """`pulumi cancel` of the stack, by the CLI itself (no program runs): it removes the stack's locks."""
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        subprocess.run([str(bins["pulumi"] / "pulumi"), "cancel", "--yes", "--non-interactive", "--stack",
                        ws.stack], cwd=ws.project, env=cli_env(ws, passphrase(ws), os.environ),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


def invoke(action: str, ws: Workspace, bins: Mapping[str, Path], timeout: Optional[float] = None,
           **kw) -> Invocation:
    """Run one action and wait for it. Interrupted (Ctrl-C, or a timeout), it is stopped as Pulumi
    stops itself (stop); Ctrl-C then raises Interrupted, saying how it ended."""
    proc, result = start(action, ws, bins, **kw)
    try:
        return finish(proc, result, timeout)
    except BaseException as exc:
        halt = stop(proc, action, ws, bins)
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(halt, getattr(exc, "signum", signal.SIGINT)) from exc
        raise


def main(argv: Optional[Sequence[str]] = None) -> int:
    interrupted: list[int] = []

    def on_signal(signum, frame):
        # Recorded, never raised, from the first line on: the CLI is in this process group and got
        # the same signal, so it cancels (or, not started yet, is never started: run's `stopping`);
        # this process waits for it to end instead of dying under it, which would orphan it.
        interrupted.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    p = argparse.ArgumentParser(prog="engine.py",
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
    here = str(ENGINE_FILE.parent)
    sys.path[:] = [str(a.program_root.absolute())] + [x for x in sys.path if x != here]
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
