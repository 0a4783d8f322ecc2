"""Running the Pulumi driver (pulumi_driver.py) as a process of its own, and stopping it the way
Pulumi stops itself: `invoke` (start, wait, and on Ctrl-C `stop`), `start` and `finish` apart for a
test that signals it in between, and what a run left in its workspace (`processes`, `locks`).

The driver runs as a script, beside the program of any checkout (`program_root`); its output goes
to a file beside the workspace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from dynamo_lab.local_cluster import root_paths
from dynamo_lab.local_cluster.pulumi_workspace import Workspace, cli_env, passphrase
from dynamo_lab.paths import ROOT

# The driver, run as a script (command); its command line names this file, which is how
# `processes` tells a driver of a workspace.
DRIVER_FILE = Path(__file__).resolve().with_name("pulumi_driver.py")


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
            driver = str(DRIVER_FILE) in args and any(args[i:i + 2] == ["--workspace", str(ws.root)]
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



@dataclasses.dataclass
class Invocation:
    rc: int
    output: str                          # what the driver printed: Pulumi's output and its own errors
    result: Optional[dict[str, Any]]     # what the engine reported (run's return), when it succeeded


def command(action: str, ws: Workspace, bins: Mapping[str, Path], *, stack_file: Optional[Path] = None,
            diff: bool = False, program_root: Path = ROOT, result: Optional[Path] = None) -> list[str]:
    """The driver's command line: this file as a script, the program from `program_root`."""
    argv = [sys.executable, str(DRIVER_FILE), action, "--stack", ws.stack, "--workspace", str(ws.root),
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
    # Made and removed by root_paths' walk: as root, never under a link or a directory another user
    # could change (the workspace is removed as root by `down`).
    uid = root_paths.trusted_uid()
    root_paths.make_dirs(ws.root, uid, mode=0o755)
    result = ws.root / f"{action}.result.json"
    result.unlink(missing_ok=True)
    tmp = _beside(result, ".tmp")
    root_paths.remove_tree(tmp, uid)
    root_paths.make_dirs(tmp, uid, mode=0o700)
    log = open(_beside(result, ".log"), "w")
    proc = subprocess.Popen(command(action, ws, bins, result=result, **kw), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            cwd=str(kw.get("program_root", ROOT)), env={**os.environ, "TMPDIR": str(tmp)})
    log.close()
    return proc, result


def _beside(result: Path, suffix: str) -> Path:
    """The run's log (.log) or temporary directory (.tmp), named like its result file."""
    return result.with_name(result.name.replace(".result.json", suffix))


def _remove_tmp(result: Path) -> None:
    """The run's temporary directory removed, never through a link (root_paths.remove_tree): one
    found on its path since start() checked it is left as it is, and what it points to untouched."""
    with contextlib.suppress(root_paths.Refused):
        root_paths.remove_tree(_beside(result, ".tmp"), root_paths.trusted_uid(), ignore_errors=True)


def finish(proc: subprocess.Popen, result: Path, timeout: Optional[float] = None) -> Invocation:
    rc = proc.wait(timeout)
    _remove_tmp(result)
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
    return [sys.executable, "-m", "dynamo_lab.local_cluster.pulumi_driver", "cancel", "--stack", ws.stack,
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
        _remove_tmp(result)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # (A file's time is the kernel's coarse clock, up to a tick behind time.time().)
    saved = any(p.stat().st_mtime >= wall0 - 0.02 for p in (ws.state / ".pulumi" / "stacks").rglob(f"{ws.stack}.json"))
    return Halt(action, ws, proc.returncode, output, how, took, saved, killed,
                [p for p in found if p not in locked], locked, left)


def _cancel(ws: Workspace, bins: Mapping[str, Path]) -> None:
    """`pulumi cancel` of the stack, by the CLI itself (no program runs): it removes the stack's locks."""
    # Refused (the CLI not what was checked): not run, and the lock it would remove is reported as left.
    with contextlib.suppress(subprocess.SubprocessError, OSError, root_paths.Refused), \
            root_paths.open_binary(bins["pulumi"] / "pulumi", root_paths.trusted_uid()) as cli:
        subprocess.run([str(bins["pulumi"] / "pulumi"), "cancel", "--yes", "--non-interactive", "--stack", ws.stack],
                       executable=cli.exec_path, cwd=ws.project, env=cli_env(ws, passphrase(ws), os.environ),
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


