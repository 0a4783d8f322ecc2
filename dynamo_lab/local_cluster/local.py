"""A stack deployed by the real Pulumi engine onto the local lab cluster, with no cluster of your own.

    dynamo-lab up STACK --local      start the local cluster if it is not running, then the real
                                     `pulumi preview` and `pulumi up` of the stack; prints what
                                     Pulumi prints and the stack's outputs
    dynamo-lab down STACK --local    `pulumi destroy` of the stack; the cluster stops too once no
                                     local stack is left on it (--keep-local-cluster keeps it)
    dynamo-lab pr-preview BASE HEAD  a fresh local cluster; per stack, BASE's program and stack file
                                     deployed, then the real `pulumi preview --diff` of HEAD's

The cluster is harness.py's (a control plane with kwok's two simulated GPU nodes, in its own
network namespace; root), the engine pulumi_cli.py's (the Pulumi CLI and the Kubernetes provider
built from their Go modules, the program as an inline Automation API program); where deployments
are kept and what is checked before any is touched, local_state.py's. What is not here:
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
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, TextIO

from dynamo_lab import procs, stack_files
from dynamo_lab.local_cluster import harness, local_state, pulumi_cli, standin, tools
from dynamo_lab.local_cluster.local_state import LocalError, check_stack, read_stack_file
from dynamo_lab.local_cluster.pulumi_workspace import Workspace
from dynamo_lab.local_cluster.stack_overrides import local_overrides, stack_document, stack_name_problem
from dynamo_lab.local_cluster.state import CONTEXT, StateDir
from dynamo_lab.paths import ROOT

CONTROL_PLANE = ("kubernetes", "etcd", "kwok")
DGD_CRD = "crds/nvidia.com_dynamographdeployments.yaml"
NOTICE = ("local: no Dynamo operator here (no registry serves it): a stand-in marks the graph Ready "
          "once it exists (dynamo_lab/local_cluster/standin.py); no worker starts and no model is served")


# The two warnings a local `up` shows, both expected (docs/real-engine.md, "What up --local prints").
WARNINGS = ("local: expected warnings above: `no storage class found for \"...-model-cache-...\"`: each "
            "model cache's claim names its own PersistentVolume with no storage class (\"\"), and the provider, "
            "finding no default StorageClass on this cluster, says so while the claim binds; `Has no "
            ".status.conditions`: the graph had not yet been marked Ready (by the operator; here by the "
            "stand-in) when the provider first looked")



# What the running command made that its Ctrl-C account checks (pr-preview's temporary directory).
_started: dict[str, Path] = {}


def accounts_for_ctrl_c(command: str):
    """On Ctrl-C (or SIGTERM, SIGHUP turned into KeyboardInterrupt), say what is true once the
    engine has stopped (pulumi_cli.invoke stops it as Pulumi stops itself): each fact checked, for the
    line cli.main ends with (procs.interrupted_message); then the interrupt goes on."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kw):
            given = inspect.signature(fn).bind(*args, **kw)
            given.apply_defaults()
            _started.clear()
            was_running = (command != "pr-preview"
                           and local_state.local_cluster_running(local_state.local_cluster_state().absolute()))
            try:
                return fn(*args, **kw)
            except KeyboardInterrupt as exc:
                _account(command, exc, given.arguments, was_running)
                raise
        return run
    return wrap


def _bins(log) -> dict[str, Path]:
    if os.geteuid() != 0:
        raise LocalError("the local cluster needs root (it runs in network and PID namespaces of its own): "
                         "run it as root, with the tools' cache in a directory only root can write (e.g. "
                         "DYNAMO_LAB_CACHE=/var/cache/dynamo-lab sudo -E python3 dev.py up STACK --local; "
                         "docs/security.md, What runs as root)")
    names = [*CONTROL_PLANE, "pulumi", "pulumi-resource-kubernetes"]
    bins = tools.bin_dirs(tools.ensure(names, log=log))
    missing = [n for n in names if n not in bins]
    if missing:
        raise LocalError(f"cluster-tools could not provide {', '.join(missing)} (see above)")
    return bins


def _crd_dir(into: Path) -> Path:
    from dynamo_lab import upstream

    try:
        found = upstream.locate()
    except upstream.UpstreamUnavailable as exc:
        raise LocalError(f"the DynamoGraphDeployment CRD is unavailable ({exc}): {upstream.HOW}") from None
    local_state.make(into)
    shutil.copy(found.file(DGD_CRD), into / "dgd.yaml")
    return into



def ensure_local_cluster(bins, log) -> tuple[harness.Handle, bool]:
    """The local cluster: the running one, else a new one (detached: it outlives this command)."""
    state = local_state.local_cluster_state().absolute()
    if local_state.local_cluster_running(state):
        log(f"local: the cluster in {state} is running; using it")
        return harness.attach(state), False
    if state.exists():
        harness.stop(state)
        local_state.remove(state)
    return harness.up(state, bins, _crd_dir(local_state.local_root() / "crds"), attached=False, log=log), True


def check_as_deployed(stack: str, doc: dict) -> None:
    """The stack loaded and sized as the local run will deploy it (the file with the local
    overrides, stack_overrides.stack_document's), before any tool or cluster starts: a bad stack file is
    one error here, not a started cluster and the engine's output repeating it four times."""
    from infra.plan import load_stack

    planned = stack_document(doc, None, local_overrides(
        local_state.local_cluster_state().absolute() / "kubeconfig", CONTEXT))
    raw, secret_keys = stack_files.config_from_doc(planned.get("config") or {})
    on_the_lab_nodes(load_stack(stack, raw, secret_keys).resolved)


def on_the_lab_nodes(resolved) -> None:
    """The local cluster simulates the lab's nodes (nodes.LAB_CLUSTER): a stack whose GPU class selects
    none of them (an example beyond the lab) would leave its pre-pull Jobs and workers Pending until
    their timeouts, so it is refused before anything starts."""
    from dynamo_lab.local_cluster.nodes import LAB_CLUSTER, lab_nodes
    from dynamo_lab.preflight import classes, selectors

    nodes = lab_nodes(LAB_CLUSTER.read_text())
    for name in resolved.worker_classes:
        term = classes.class_expressions(resolved.config.gpu_classes[name])
        if not any(selectors.term_matches(term, n["metadata"]["labels"]) for n in nodes):
            raise LocalError(
                f"gpuClasses.{name} selects none of the local cluster's nodes, which simulate the lab's "
                f"({', '.join(n['metadata']['name'] for n in nodes)}): its workers and pre-pull Jobs would stay "
                "Pending. The local cluster has the lab's shape only; a stack for another cluster is deployed "
                "by the cluster tier onto a simulation of its own (docs/testing.md; for two-node-rdma: "
                "python3 dev.py test-cluster -k test_example)")


def without_outputs(text: str) -> str:
    """Pulumi's output less its `Outputs:` block (up prints the same outputs again; the sizing
    among them is about a hundred lines)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip() == "Outputs:"]
    if not starts:
        return text
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].rstrip() == "Resources:"), None)
    return text if end is None else "".join(lines[:starts[0]] + lines[end:])


def _print_result(inv: pulumi_cli.Invocation, what: str, out: TextIO, outputs: bool = True) -> None:
    out.write(inv.output if outputs or inv.rc != 0 else without_outputs(inv.output))
    if inv.rc != 0:
        raise LocalError(f"{what} failed (exit {inv.rc}); Pulumi's words are above")


@accounts_for_ctrl_c("up")
def up(stack: str, out: TextIO = sys.stdout, log=None) -> int:
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    source = stack_files.stack_file(check_stack(stack), ROOT)
    doc = read_stack_file(source)
    # Its paths, checked before anything starts.
    local_state.workspace(stack, local_state.local_cluster_state() / "kubeconfig")
    check_as_deployed(stack, doc)
    t0 = time.monotonic()
    bins = _bins(log)
    local_cluster, started = ensure_local_cluster(bins, log)
    kubeconfig = local_cluster.kubeconfig
    ws = local_state.workspace(stack, kubeconfig)
    local_state.report_overrides(stack, doc, ws, log)
    log(f"local: {stack}: pulumi preview (workspace {ws.root})")
    _print_result(pulumi_cli.invoke("preview", ws, bins, stack_file=source), "preview", out, outputs=False)
    log(NOTICE)
    log(f"local: {stack}: pulumi up")
    with standin.GraphReady(local_cluster.api()):
        _print_result(pulumi_cli.invoke("up", ws, bins, stack_file=source), "up", out)
    log(WARNINGS)
    log(f"local: {stack} is up on the local cluster in {time.monotonic() - t0:.0f} s "
        f"({'cluster started' if started else 'cluster was running'}); KUBECONFIG={kubeconfig}; "
        f"`dynamo-lab down {stack} --local` removes it")
    return 0


@accounts_for_ctrl_c("down")
def down(stack: str, keep_local_cluster: bool = False, out: TextIO = sys.stdout, log=None) -> int:
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    state = local_state.local_cluster_state()
    local_state.workspace(stack, state / "kubeconfig")  # refused here, before anything is stopped or removed
    if not local_state.local_cluster_running(state):
        local_state.remove(local_state.workspace(stack, StateDir(state).kubeconfig).root, ignore_errors=True)
        log("local: the local cluster is not running: nothing to destroy")
        return 0
    bins = _bins(log)
    ws = local_state.workspace(stack, StateDir(state.absolute()).kubeconfig)
    if ws.stack_file.exists():
        _print_result(pulumi_cli.invoke("destroy", ws, bins), "destroy", out)
        local_state.remove(ws.root)
    else:
        log(f"local: {stack} is not deployed on the local cluster")
    others = sorted(p.name for p in (local_state.local_root() / "stacks").glob("*") if p.is_dir())
    if keep_local_cluster or others:
        why = "--keep-local-cluster" if keep_local_cluster else "still deployed: " + ", ".join(others)
        log(f"local: the cluster keeps running ({why})")
        return 0
    with procs.signals_held():  # a Ctrl-C now would leave a cluster half stopped
        killed = harness.stop(state)
        if harness.leftovers(state):
            raise LocalError("cluster processes are still running:\n  " + "\n  ".join(harness.leftovers(state)))
        local_state.remove(state, ignore_errors=True)
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


def _stack_files(stack: str, trees: dict[str, Path]) -> tuple[Optional[str], list[dict]]:
    """The stack's file in each tree that has one (a pull request's, to be read as root), each read
    by the bounded reader (read_stack_file), in the trees' order; or why one is refused, naming the ref."""
    docs = []
    for ref, tree in trees.items():
        path = tree / f"Pulumi.{stack}.yaml"
        if path.is_file():
            try:
                docs.append(read_stack_file(path))
            except LocalError as exc:
                return f"{ref}'s {exc}", []
    return None, docs


@accounts_for_ctrl_c("pr-preview")
def pr_preview(base: str, head: str, stacks: Optional[list[str]] = None, out: TextIO = sys.stdout,
               repo: Path = ROOT, log=None) -> int:
    """Deploy BASE on a fresh local cluster, then print the real `pulumi preview --diff` of HEAD,
    per stack. 0: every preview ran (whatever it shows); 1: one failed (its words are printed), or a
    stack file was refused by the bounded reader (named, with why; that stack is neither deployed nor
    previewed, so nothing reads the file further, as root)."""
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    for stack in stacks or []:
        check_stack(stack)
    for ref in (base, head):
        if ref.startswith("-"):  # git would read it as an option
            raise LocalError(f"{ref!r} is not a git ref (it starts with '-'); name a branch, tag or commit")
    bins = _bins(log)
    failed, refused_files = [], []
    with tempfile.TemporaryDirectory(prefix="dynamo-lab-pr-preview-", dir=local_state.temporary_root()) as tmp:
        tmp_path = _started["tmp"] = Path(tmp)
        with checkout(base, tmp_path / "base", repo) as (base_commit, base_tree), \
                checkout(head, tmp_path / "head", repo) as (head_commit, head_tree):
            names = stacks or sorted(set(stacks_of(base_tree)) | set(stacks_of(head_tree)))
            for stack in names:  # a tree's file names are the pull request's: each names a workspace
                if (problem := stack_name_problem(stack)) is not None:
                    raise LocalError(f"a stack file of {base} or {head}: {problem}; nothing was "
                                     "deployed. Rename the file Pulumi.<stack>.yaml with a stack name")
            state = tmp_path / "cluster"
            with harness.running(state, bins, _crd_dir(tmp_path / "crds"), log=log) as local_cluster:
                api = local_cluster.api()
                out.write(f"# pulumi preview --diff of {head_commit[:12]} against {base_commit[:12]} deployed, "
                          f"by the real engine on a local cluster\n{NOTICE}\n")
                for stack in names:
                    out.write(f"\n## {stack}\n")
                    ws = Workspace(tmp_path / "ws" / stack, stack, local_cluster.kubeconfig)
                    refused, docs = _stack_files(stack, {head: head_tree, base: base_tree})
                    if refused:  # a pull request's file that is no stack file: nothing reads it on, as root
                        out.write(f"STACK FILE REFUSED: {refused}; {stack} is neither deployed nor previewed\n")
                        refused_files.append(stack)
                        continue
                    if docs:  # the head's file, else the base's
                        local_state.report_overrides(stack, docs[0], ws, log)
                    if (base_tree / f"Pulumi.{stack}.yaml").is_file():
                        with standin.GraphReady(api):
                            deployed = pulumi_cli.invoke("up", ws, bins, program_root=base_tree)
                        if deployed.rc != 0:
                            out.write(f"(the base could not be deployed; the preview below is against nothing)\n"
                                      f"{deployed.output[-4000:]}\n")
                    else:
                        out.write("(a new stack: not in the base)\n")
                    if not (head_tree / f"Pulumi.{stack}.yaml").is_file():
                        out.write("(removed: the head has no stack file; `pulumi destroy` would delete it all)\n")
                        continue
                    preview = pulumi_cli.invoke("preview", ws, bins, program_root=head_tree, diff=True)
                    out.write(preview.output if preview.rc == 0 else
                              f"PREVIEW FAILED (exit {preview.rc}):\n{preview.output}")
                    if preview.rc != 0:
                        failed.append(stack)
                out.flush()
    if refused_files:
        log(f"pr-preview: a stack file was refused, so not previewed, for {', '.join(refused_files)}")
    if failed:
        log(f"pr-preview: the preview failed for {', '.join(failed)}")
    return 1 if failed or refused_files else 0


# ---- what a Ctrl-C left ----

def _account(command: str, exc: KeyboardInterrupt, given: dict, was_running: bool) -> None:
    """Record, for procs.interrupted_message, what the interrupted command stopped, removed and
    left running, each checked now: the engine's run (pulumi_cli.Halt), the stack's workspace (no
    engine process, no lock), the local cluster, pr-preview's temporary directory."""
    halt = exc.halt if isinstance(exc, pulumi_cli.Interrupted) else None
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
    stack, state = given["stack"], local_state.local_cluster_state().absolute()
    if stack_name_problem(stack) is None and halt is None:
        ws = Workspace(local_state.local_root() / "stacks" / stack, stack, StateDir(state).kubeconfig)
        for pid, args in pulumi_cli.processes(ws).items():
            procs.left_behind(f"engine process {pid} ({args[:100]}): kill {pid}")
        if pulumi_cli.locks(ws):
            procs.left_behind(f"the stack's lock: `{shlex.join(pulumi_cli.cancel_command(ws))}`")
    if local_state.local_cluster_running(state):
        how = "it was running before" if was_running else "this command started it"
        procs.kept(f"the local cluster ({how}; `dynamo-lab down {stack} --local` stops it)")
    elif running := harness.leftovers(state):
        procs.left_behind("local cluster processes (`dynamo-lab local-cluster down --state "
                          f"{state}` stops them): " + "; ".join(running))
    elif was_running:
        procs.cleaned("the local cluster is stopped")
    elif harness.status_of(state).outer_pid:
        procs.cleaned("stopped the local cluster it was starting")
