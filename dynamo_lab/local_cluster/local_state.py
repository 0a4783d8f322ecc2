"""Where local deployments are kept, and what is checked before a local command touches them: the
local root beside the tools' cache (its cluster and one workspace per stack), a stack name that can
be a directory there, directories only this user can change and paths that resolve where they are
written, a readable stack file, and the one line that says which of its keys a local run sets
otherwise or leaves out.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from dynamo_lab import stack_files
from dynamo_lab.local_cluster import harness, root_paths, tools
from dynamo_lab.local_cluster.pulumi_workspace import Workspace
from dynamo_lab.local_cluster.stack_overrides import (
    CLUSTER_CHOOSERS,
    LOCAL_OVERRIDES,
    kubeconfig_context,
    local_changes,
    local_overrides,
    read_stack_document,
    stack_document,
    stack_name_problem,
)
from dynamo_lab.paths import ROOT
from infra.errors import UserError


class LocalError(UserError):
    pass


def local_root(env=None) -> Path:
    """Where local deployments keep their clusters and workspaces: beside the tools' cache."""
    return tools.cache_root(dict(os.environ if env is None else env)).parent / "local"


def local_cluster_state() -> Path:
    return local_root() / "cluster"


def check_stack(stack: str) -> str:
    """`stack`, if it is a stack name (stack_overrides.stack_name_problem); else a one-line refusal. Run as
    root, a local deployment makes the name a directory it writes and removes (stacks/STACK)."""
    problem = stack_name_problem(stack)
    if problem is not None:
        raise LocalError(f"{problem}; nothing was touched. Name one of this project's stacks "
                         f"({', '.join(stack_files.stacks_in(ROOT))})")
    return stack


def own_directories(*paths: Path) -> None:
    """As root: each of `paths` reached from / through no symbolic link and no directory another user
    could change (root_paths.path_problem: the user's ~/.cache under sudo -E, or a link there), and
    each that exists a directory only root can change (root_paths.loose, for what the project makes).
    A local run, as root, makes and removes what it keeps under them: a link anywhere on the way (the
    local root, the ~/.cache/dynamo-lab it lies in, or above) would point that removal at wherever it
    points, and a directory another user could change would let them swap what is removed. The check
    resolves nothing through a link, so it holds where the resolved-path check in workspace() cannot;
    and every removal walks the path again itself (remove). As a user, your own links are yours: the
    resolved-path check holds inside the local root. One-line refusal, nothing touched."""
    uid = root_paths.trusted_uid()
    if uid is None:
        return
    for path in paths:
        why = root_paths.path_problem(path, uid)
        if why is None:
            with contextlib.suppress(FileNotFoundError):
                strict = root_paths.loose(path, os.lstat(path), uid)
                why = strict and root_paths.Refused(strict, f"chmod go-w {path}" if "writable" in strict else
                                                    f"chown root {path} after checking what is in it")
        if why:
            raise LocalError(f"{why.why}, and a local run makes and removes what it keeps there as root: nothing "
                             f"was touched; fix: {why.fix}, or set DYNAMO_LAB_CACHE to a directory only root can "
                             "write (e.g. /var/cache/dynamo-lab)")


def remove(path: Path, ignore_errors: bool = False) -> bool:
    """Remove a directory a local run keeps (a stack's workspace, a cluster's state) by
    root_paths.remove_tree: never through a link, as root never under a directory another user could
    change, each component checked as it is walked; a refusal is one line and removes nothing
    (`ignore_errors`: an entry rmtree cannot remove is passed over, as shutil.rmtree's)."""
    try:
        return root_paths.remove_tree(path, root_paths.trusted_uid(), ignore_errors=ignore_errors)
    except root_paths.Refused as e:
        raise LocalError(f"not removing {path}: {e.why}: nothing was removed; fix: {e.fix}") from None


def temporary_root() -> Path:
    """Where pr-preview makes its temporary directory (TMPDIR, else /tmp), refused as root unless
    only root can change it and what is above it (a sticky /tmp passes: root_paths' rule), since
    the directory it makes there is removed as root."""
    where = Path(tempfile.gettempdir())
    why = root_paths.path_problem(where, root_paths.trusted_uid())
    if why:
        raise LocalError(f"{why.why}, and pr-preview makes and removes a directory in {where} as root: "
                         f"nothing was touched; fix: {why.fix}, or set TMPDIR to a directory only root can write")
    return where


def make(path: Path, mode: int = 0o755) -> Path:
    """Make a directory a local run keeps, as root_paths.make_dirs makes it (remove's rule)."""
    try:
        root_paths.make_dirs(path, root_paths.trusted_uid(), mode=mode)
    except root_paths.Refused as e:
        raise LocalError(f"not making {path}: {e.why}: nothing was made; fix: {e.fix}") from None
    return path


def _own_state(*below: str) -> None:
    root = local_root()
    own_directories(root.parent, root, *(root / part for part in below))


def workspace(stack: str, kubeconfig: Path) -> Workspace:
    """The stack's local deployment, `stacks/STACK` of the state directory, refused (nothing touched)
    unless it is a stack name and each of its paths resolves, through any symbolic link, where it
    is written: a link planted in stacks/ (or stacks/ itself a link) would point the removal of a
    deployment at another directory."""
    ws = Workspace(local_root() / "stacks" / check_stack(stack), stack, kubeconfig)
    _own_state("stacks", f"stacks/{stack}", "cluster")
    expected = local_root().resolve() / "stacks" / stack
    for path in (ws.root, ws.project, ws.state, ws.home, ws.stack_file, ws.passphrase_file):
        real = path.resolve()
        if real != expected / path.relative_to(ws.root):
            raise LocalError(f"{path} resolves to {real}, not inside {expected}, where the local deployment of "
                             f"{stack} is kept (a symbolic link?): nothing was touched; remove the link")
    return ws


def read_stack_file(source: Path) -> dict:
    """A stack file's document, or a one-line refusal naming it: the driver's own reader
    (stack_overrides.read_stack_document, the commands' one bounded reader, bounded_read.py)."""
    try:
        return read_stack_document(source)
    except RuntimeError as exc:
        raise LocalError(str(exc)) from None


def report_overrides(stack: str, doc: dict, ws: Workspace, log) -> None:
    """Say, in one line, which of the stack file's keys the local run sets otherwise or leaves out:
    what pulumi_workspace.prepare will write into the workspace (stack_document), against the file."""
    try:  # both within the stack reader's bounds, as the driver reads them (bounded_read.py)
        existing = read_stack_document(ws.stack_file) if ws.stack_file.is_file() else None
        overrides = local_overrides(ws.kubeconfig, kubeconfig_context(ws.kubeconfig))
    except RuntimeError as exc:
        raise LocalError(f"{stack}: {exc}") from None
    changed, left_out = local_changes(doc, stack_document(doc, existing, overrides))
    cluster = [k for k in changed if k in overrides and k not in LOCAL_OVERRIDES]
    local = [k for k in changed if k in LOCAL_OVERRIDES]
    own = [k for k in changed if k not in overrides]
    chooser = [k for k in left_out if k in CLUSTER_CHOOSERS]
    secret = [k for k in left_out if k not in chooser]
    parts = [cluster and f"set to the local cluster's: {', '.join(cluster)}",
             chooser and f"left out: {', '.join(chooser)} (the local kubeconfig chooses the cluster)",
             local and f"set by the local overrides: {', '.join(local)} (platform.manage false: no chart here)",
             secret and f"left out: {', '.join(secret)} (encrypted for another passphrase, which this run does not "
                        "have; no worker runs here, so no secret is needed)",
             own and f"the workspace's own secrets: {', '.join(own)}"]
    if any(parts):
        log(f"local: {stack}: {'; '.join(filter(None, parts))} (docs/real-engine.md, Local overrides)")




def local_cluster_running(state: Path) -> bool:
    return harness.is_running(state)
