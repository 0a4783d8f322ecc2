"""A stack deployed by the real Pulumi engine onto the local lab cluster, with no cluster of your own.

    dynamo-lab up STACK --local      start the local cluster if it is not running, then the real
                                     `pulumi preview` and `pulumi up` of the stack; prints what
                                     Pulumi prints and the stack's outputs
    dynamo-lab down STACK --local    `pulumi destroy` of the stack; the cluster stops too once no
                                     local stack is left on it (--keep-cluster keeps it)
    dynamo-lab pr-preview BASE HEAD  a fresh local cluster; per stack, BASE's program and stack file
                                     deployed, then the real `pulumi preview --diff` of HEAD's

The cluster is harness.py's (a control plane with kwok's two simulated GPU nodes, in its own
network namespace; root), the engine engine.py's (the Pulumi CLI and the Kubernetes provider
built from their Go modules, the program as an inline Automation API program). What is not here:
the Dynamo platform chart and operator (`platform.manage: false`; the graph CRD from the pinned
upstream files), so the stand-in (standin.py) marks each graph Ready for `up` to complete, and no
worker runs. It shows what Pulumi does with the stack; it serves no model.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, TextIO

import yaml

from infra.errors import UserError
from infra.lab import mockrun, procs
from infra.lab.cluster import engine, harness, standin, tools

ROOT = Path(__file__).resolve().parents[3]
CONTROL_PLANE = ("kubernetes", "etcd", "kwok")
DGD_CRD = "crds/nvidia.com_dynamographdeployments.yaml"
NOTICE = ("local: no Dynamo operator here (no registry serves it): a stand-in marks the graph Ready "
          "once it exists (infra/lab/cluster/standin.py); no worker starts and no model is served")


# The two warnings a local `up` shows, both expected (docs/real-engine.md, "What up --local prints").
WARNINGS = ("local: expected warnings above: `no storage class found for \"...-model-cache-...\"`: each "
            "model cache's claim names its own PersistentVolume with no storage class (\"\"), and the provider, "
            "finding no default StorageClass on this cluster, says so while the claim binds; `Has no "
            ".status.conditions`: the graph had not yet been marked Ready (by the operator; here by the "
            "stand-in) when the provider first looked")


class LocalError(UserError):
    pass


# What the running command made that its Ctrl-C account checks (pr-preview's temporary directory).
_started: dict[str, Path] = {}


def accounts_for_ctrl_c(command: str):
    """On Ctrl-C (or SIGTERM, SIGHUP turned into KeyboardInterrupt), say what is true once the
    engine has stopped (engine.invoke stops it as Pulumi stops itself): each fact checked, for the
    line cli.main ends with (procs.interrupted_message); then the interrupt goes on."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kw):
            given = inspect.signature(fn).bind(*args, **kw)
            given.apply_defaults()
            _started.clear()
            was_running = command != "pr-preview" and _running(cluster_state().absolute())
            try:
                return fn(*args, **kw)
            except KeyboardInterrupt as exc:
                _account(command, exc, given.arguments, was_running)
                raise
        return run
    return wrap


def local_root(env=None) -> Path:
    """Where local deployments keep their clusters and workspaces: beside the tools' cache."""
    return tools.cache_root(dict(os.environ if env is None else env)).parent / "local"


def cluster_state() -> Path:
    return local_root() / "cluster"


def check_stack(stack: str) -> str:
    """`stack`, if it is a stack name (engine.stack_name_problem); else a one-line refusal. Run as
    root, a local deployment makes the name a directory it writes and removes (stacks/STACK)."""
    problem = engine.stack_name_problem(stack)
    if problem is not None:
        raise LocalError(f"{problem}; nothing was touched. Name one of this project's stacks "
                         f"({', '.join(mockrun.stacks_in(ROOT))})")
    return stack


def own_directories(*paths: Path) -> None:
    """Each of `paths` that exists is a directory only this user can change, and none but the first
    (the directory the local root lies in) is a symbolic link. A local run, as root, removes what it
    keeps under them: a link (the local root itself one, say) or a directory another user could
    swap would point that removal at another directory. The check resolves nothing through a link,
    so it holds where the resolved-path check in workspace() cannot. As root only, as tools.py's
    cache check: another user can remove only what they could anyway. One-line refusal, nothing touched."""
    uid = os.geteuid()
    if uid != 0:
        return
    for i, path in enumerate(paths):
        try:
            st = os.stat(path) if i == 0 else os.lstat(path)
        except FileNotFoundError:
            continue
        why = (tools.loose(path, st, uid) if stat.S_ISDIR(st.st_mode) else
               f"{path} is a symbolic link" if stat.S_ISLNK(st.st_mode) else f"{path} is not a directory")
        if why:
            raise LocalError(f"{why}, and a local run removes what it keeps there: nothing was touched. Remove "
                             f"it or correct its owner and mode, or set DYNAMO_LAB_CACHE to a directory only "
                             f"{tools._who(uid)} can write")


def _own_state(*below: str) -> None:
    root = local_root()
    own_directories(root.parent, root, *(root / part for part in below))


def workspace(stack: str, kubeconfig: Path) -> engine.Workspace:
    """The stack's local deployment, `stacks/STACK` of the state directory, refused (nothing touched)
    unless it is a stack name and each of its paths resolves, through any symbolic link, where it
    is written: a link planted in stacks/ (or stacks/ itself a link) would point the removal of a
    deployment at another directory."""
    ws = engine.Workspace(local_root() / "stacks" / check_stack(stack), stack, kubeconfig)
    _own_state("stacks", f"stacks/{stack}", "cluster")
    expected = local_root().resolve() / "stacks" / stack
    for path in (ws.root, ws.project, ws.state, ws.home, ws.stack_file, ws.passphrase_file):
        real = path.resolve()
        if real != expected / path.relative_to(ws.root):
            raise LocalError(f"{path} resolves to {real}, not inside {expected}, where the local deployment of "
                             f"{stack} is kept (a symbolic link?): nothing was touched; remove the link")
    return ws


def read_stack_file(source: Path) -> dict:
    """A stack file's document, or a one-line refusal naming it."""
    try:
        doc = mockrun.read_yaml(source) or {}  # the commands' one bounded reader
    except mockrun.StackFileError as exc:
        why = str(exc).removeprefix(f"{source.name}: ")
        raise LocalError(f"{source.name} cannot be read as a stack file ({why})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise LocalError(f"{source.name} is not a stack file: Pulumi writes a YAML map with `config:`, a map of keys")
    return doc


def report_overrides(stack: str, doc: dict, ws: engine.Workspace, log) -> None:
    """Say, in one line, which of the stack file's keys the local run sets otherwise or leaves out:
    what engine.prepare will write into the workspace (stack_document), against the file."""
    existing = yaml.safe_load(ws.stack_file.read_text()) if ws.stack_file.is_file() else None
    overrides = engine.local_overrides(ws.kubeconfig, engine.kubeconfig_context(ws.kubeconfig))
    changed, left_out = engine.local_changes(doc, engine.stack_document(doc, existing, overrides))
    cluster = [k for k in changed if k in overrides and k not in engine.LOCAL_OVERRIDES]
    local = [k for k in changed if k in engine.LOCAL_OVERRIDES]
    own = [k for k in changed if k not in overrides]
    chooser = [k for k in left_out if k in engine.CLUSTER_CHOOSERS]
    secret = [k for k in left_out if k not in chooser]
    parts = [cluster and f"set to the local cluster's: {', '.join(cluster)}",
             chooser and f"left out: {', '.join(chooser)} (the local kubeconfig chooses the cluster)",
             local and f"set by the local overrides: {', '.join(local)} (platform.manage false: no chart here)",
             secret and f"left out: {', '.join(secret)} (encrypted for another passphrase, which this run does not "
                        "have; no worker runs here, so no secret is needed)",
             own and f"the workspace's own secrets: {', '.join(own)}"]
    if any(parts):
        log(f"local: {stack}: {'; '.join(filter(None, parts))} (docs/real-engine.md, Local overrides)")


def _bins(log) -> dict[str, Path]:
    if os.geteuid() != 0:
        raise LocalError("the local cluster needs root (it runs in network and PID namespaces of its own): "
                         "run it as root (e.g. sudo -E python3 dev.py up STACK --local)")
    names = [*CONTROL_PLANE, "pulumi", "pulumi-resource-kubernetes"]
    bins = tools.bin_dirs(tools.ensure(names, log=log))
    missing = [n for n in names if n not in bins]
    if missing:
        raise LocalError(f"cluster-tools could not provide {', '.join(missing)} (see above)")
    return bins


def _crd_dir(into: Path) -> Path:
    from infra.lab import upstream

    try:
        found = upstream.locate()
    except upstream.UpstreamUnavailable as exc:
        raise LocalError(f"the DynamoGraphDeployment CRD is unavailable ({exc}): {upstream.HOW}") from None
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(found.file(DGD_CRD), into / "dgd.yaml")
    return into


def _running(state: Path) -> bool:
    s = harness.status_of(state)
    return bool(s.get("ready")) and harness._ours(s.get("outer_pid"), state.absolute())


def ensure_cluster(bins, log) -> tuple[harness.Handle, bool]:
    """The local cluster: the running one, else a new one (detached: it outlives this command)."""
    state = cluster_state().absolute()
    if _running(state):
        log(f"local: the cluster in {state} is running; using it")
        return harness.Handle(harness.Layout(state), None, harness.status_of(state)), False
    if state.exists():
        harness.stop(state)
        shutil.rmtree(state)
    return harness.up(state, bins, _crd_dir(local_root() / "crds"), attached=False, log=log), True


def check_as_deployed(stack: str, doc: dict) -> None:
    """The stack loaded and sized as the local run will deploy it (the file with the local
    overrides, engine.stack_document's), before any tool or cluster starts: a bad stack file is
    one error here, not a started cluster and the engine's output repeating it four times."""
    from infra.plan import load_stack

    planned = engine.stack_document(doc, None, engine.local_overrides(
        cluster_state().absolute() / "kubeconfig", harness.CONTEXT))
    raw, secret_keys = mockrun.config_from_doc(planned.get("config") or {})
    load_stack(stack, raw, secret_keys)


def without_outputs(text: str) -> str:
    """Pulumi's output less its `Outputs:` block (up prints the same outputs again; the sizing
    among them is about a hundred lines)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip() == "Outputs:"]
    if not starts:
        return text
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].rstrip() == "Resources:"), None)
    return text if end is None else "".join(lines[:starts[0]] + lines[end:])


def _print_result(inv: engine.Invocation, what: str, out: TextIO, outputs: bool = True) -> None:
    out.write(inv.output if outputs or inv.rc != 0 else without_outputs(inv.output))
    if inv.rc != 0:
        raise LocalError(f"local: {what} failed (exit {inv.rc}); Pulumi's words are above")


@accounts_for_ctrl_c("up")
def up(stack: str, out: TextIO = sys.stdout, log=None) -> int:
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    source = mockrun.stack_file(check_stack(stack), ROOT)
    doc = read_stack_file(source)
    workspace(stack, cluster_state() / "kubeconfig")  # its paths, checked before anything starts
    check_as_deployed(stack, doc)
    t0 = time.monotonic()
    bins = _bins(log)
    cluster, started = ensure_cluster(bins, log)
    kubeconfig = cluster.kubeconfig
    ws = workspace(stack, kubeconfig)
    report_overrides(stack, doc, ws, log)
    log(f"local: {stack}: pulumi preview (workspace {ws.root})")
    _print_result(engine.invoke("preview", ws, bins, stack_file=source), "preview", out, outputs=False)
    log(NOTICE)
    log(f"local: {stack}: pulumi up")
    with standin.GraphReady(cluster.api()):
        _print_result(engine.invoke("up", ws, bins, stack_file=source), "up", out)
    log(WARNINGS)
    log(f"local: {stack} is up on the local cluster in {time.monotonic() - t0:.0f} s "
        f"({'cluster started' if started else 'cluster was running'}); KUBECONFIG={kubeconfig}; "
        f"`dynamo-lab down {stack} --local` removes it")
    return 0


@accounts_for_ctrl_c("down")
def down(stack: str, keep_cluster: bool = False, out: TextIO = sys.stdout, log=None) -> int:
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    state = cluster_state()
    workspace(stack, state / "kubeconfig")  # refused here, before anything is stopped or removed
    if not _running(state):
        left = workspace(stack, harness.Layout(state).kubeconfig).root
        shutil.rmtree(left, ignore_errors=True)
        log("local: the local cluster is not running: nothing to destroy")
        return 0
    bins = _bins(log)
    lay = harness.Layout(state.absolute())
    ws = workspace(stack, lay.kubeconfig)
    if ws.stack_file.exists():
        _print_result(engine.invoke("destroy", ws, bins), "destroy", out)
        shutil.rmtree(ws.root)
    else:
        log(f"local: {stack} is not deployed on the local cluster")
    others = sorted(p.name for p in (local_root() / "stacks").glob("*") if p.is_dir())
    if keep_cluster or others:
        why = "--keep-cluster" if keep_cluster else "still deployed: " + ", ".join(others)
        log(f"local: the cluster keeps running ({why})")
        return 0
    with procs.signals_held():  # a Ctrl-C now would leave a cluster half stopped
        killed = harness.stop(state)
        if harness.leftovers(state):
            raise LocalError("local: cluster processes are still running:\n  " + "\n  ".join(harness.leftovers(state)))
        shutil.rmtree(state, ignore_errors=True)
    log("local: cluster stopped" + (f" (had to kill {', '.join(killed)})" if killed else "") + "; nothing left running")
    return 0


# ---- pr-preview ----

def _git(*args: str, cwd: Path = ROOT, binary: bool = False):
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    if proc.returncode != 0:
        raise LocalError(f"git {' '.join(args)}: {proc.stderr.decode().strip()}")
    return proc.stdout if binary else proc.stdout.decode().strip()


@contextlib.contextmanager
def checkout(ref: str, into: Path, repo: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """The tree of `ref` (its program and stack files), extracted into `into`."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}", cwd=repo)
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(_git("archive", "--format=tar", commit, cwd=repo, binary=True))) as tar:
        tar.extractall(into, filter="data")
    yield commit, into


def stacks_of(tree: Path) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in tree.glob("Pulumi.*.yaml"))


@accounts_for_ctrl_c("pr-preview")
def pr_preview(base: str, head: str, stacks: Optional[list[str]] = None, out: TextIO = sys.stdout,
               repo: Path = ROOT, log=None) -> int:
    """Deploy BASE on a fresh local cluster, then print the real `pulumi preview --diff` of HEAD,
    per stack. 0: every preview ran (whatever it shows); 1: one failed (its words are printed)."""
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    for stack in stacks or []:
        check_stack(stack)
    for ref in (base, head):
        if ref.startswith("-"):  # git would read it as an option
            raise LocalError(f"pr-preview: {ref!r} is not a git ref (it starts with '-'); name a branch, tag or commit")
    bins = _bins(log)
    failed = []
    with tempfile.TemporaryDirectory(prefix="dynamo-lab-pr-preview-") as tmp:
        tmp_path = _started["tmp"] = Path(tmp)
        with checkout(base, tmp_path / "base", repo) as (base_commit, base_tree), \
                checkout(head, tmp_path / "head", repo) as (head_commit, head_tree):
            names = stacks or sorted(set(stacks_of(base_tree)) | set(stacks_of(head_tree)))
            for stack in names:  # a tree's file names are the pull request's: each names a workspace
                if (problem := engine.stack_name_problem(stack)) is not None:
                    raise LocalError(f"pr-preview: a stack file of {base} or {head}: {problem}; nothing was "
                                     "deployed. Rename the file Pulumi.<stack>.yaml with a stack name")
            state = tmp_path / "cluster"
            with harness.running(state, bins, _crd_dir(tmp_path / "crds"), log=log) as cluster:
                api = cluster.api()
                out.write(f"# pulumi preview --diff of {head_commit[:12]} against {base_commit[:12]} deployed, "
                          f"by the real engine on a local cluster\n{NOTICE}\n")
                for stack in names:
                    out.write(f"\n## {stack}\n")
                    ws = engine.Workspace(tmp_path / "ws" / stack, stack, cluster.kubeconfig)
                    shown = next((t / f"Pulumi.{stack}.yaml" for t in (head_tree, base_tree)
                                  if (t / f"Pulumi.{stack}.yaml").is_file()), None)
                    with contextlib.suppress(LocalError):  # an unreadable file: its preview says why
                        if shown is not None:
                            report_overrides(stack, read_stack_file(shown), ws, log)
                    if (base_tree / f"Pulumi.{stack}.yaml").is_file():
                        with standin.GraphReady(api):
                            deployed = engine.invoke("up", ws, bins, program_root=base_tree)
                        if deployed.rc != 0:
                            out.write(f"(the base could not be deployed; the preview below is against nothing)\n"
                                      f"{deployed.output[-4000:]}\n")
                    else:
                        out.write("(a new stack: not in the base)\n")
                    if not (head_tree / f"Pulumi.{stack}.yaml").is_file():
                        out.write("(removed: the head has no stack file; `pulumi destroy` would delete it all)\n")
                        continue
                    preview = engine.invoke("preview", ws, bins, program_root=head_tree, diff=True)
                    out.write(preview.output if preview.rc == 0 else
                              f"PREVIEW FAILED (exit {preview.rc}):\n{preview.output}")
                    if preview.rc != 0:
                        failed.append(stack)
                out.flush()
    if failed:
        log(f"pr-preview: the preview failed for {', '.join(failed)}")
        return 1
    return 0


# ---- what a Ctrl-C left ----

def _account(command: str, exc: KeyboardInterrupt, given: dict, was_running: bool) -> None:
    """Record, for procs.interrupted_message, what the interrupted command stopped, removed and
    left running, each checked now: the engine's run (engine.Halt), the stack's workspace (no
    engine process, no lock), the local cluster, pr-preview's temporary directory."""
    halt = exc.halt if isinstance(exc, engine.Interrupted) else None
    if halt is not None:
        out = given.get("out") or sys.stdout
        out.write(halt.output)
        out.flush()
        done, left = halt.said()
        for what in done:
            procs.cleaned(what)
        for what in left:
            procs.left_behind(what)
    if command == "pr-preview":
        tmp = _started.get("tmp")
        if tmp is None:
            return
        running = harness.leftovers(tmp / "cluster")
        if running:
            procs.left_behind("its local cluster's processes (kill them): " + "; ".join(running))
        else:
            procs.cleaned("no process of its local cluster is running")
        if tmp.exists():
            procs.left_behind(f"its temporary directory {tmp} (rm -rf {tmp})")
        else:
            procs.cleaned(f"removed its temporary directory {tmp}")
        return
    stack, state = given["stack"], cluster_state().absolute()
    if engine.stack_name_problem(stack) is None and halt is None:
        ws = engine.Workspace(local_root() / "stacks" / stack, stack, harness.Layout(state).kubeconfig)
        for pid, args in engine.processes(ws).items():
            procs.left_behind(f"engine process {pid} ({args[:100]}): kill {pid}")
        if engine.locks(ws):
            procs.left_behind(f"the stack's lock: `{shlex.join(engine.cancel_command(ws))}`")
    if _running(state):
        how = "it was running before" if was_running else "this command started it"
        procs.kept(f"the local cluster ({how}; `dynamo-lab down {stack} --local` stops it)")
    elif running := harness.leftovers(state):
        procs.left_behind("local cluster processes (`dynamo-lab cluster down --state "
                          f"{state}` stops them): " + "; ".join(running))
    elif was_running:
        procs.cleaned("the local cluster is stopped")
    elif harness.status_of(state).get("outer_pid"):
        procs.cleaned("stopped the local cluster it was starting")
