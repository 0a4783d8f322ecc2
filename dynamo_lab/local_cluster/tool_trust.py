"""Whether a tool's binaries may be run, and the cache entries that hold them: a binary of the
user's (on PATH, or in DYNAMO_LAB_K8S_BIN or KUBEBUILDER_ASSETS) at the pinned version, or a cache
entry whose stamp matches this go.sum and whose every file still has the sha256 recorded when it
was built; as root, each safe to run (no directory or file another user could change, from / down:
root_paths.py's rule). `decide` says found, cached, build, unavailable or refused; `seal` finishes
a built entry. What decide allows is run only through root_paths.open_binary, which checks it again
on the open file and runs that file.

Standard library only (tools.py says why).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from dynamo_lab.local_cluster.root_paths import STAMP, Refused, fd_sha256, loose, open_binary, path_problem, trusted_uid
from dynamo_lab.local_cluster.root_paths import who as _who
from dynamo_lab.local_cluster.tool_spec import Tool

# Bumped when the layout of a cache entry or the stamp changes: older entries are rebuilt.
# 2: the stamp records each bin/ file's sha256, checked before every use (format 1 recorded none,
# so an entry of format 1 is never trusted).
STAMP_FORMAT = 2
# What a file name recorded in a stamp may be: a plain name inside bin/, never a path.
_BIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def entry_dir(tool: Tool, root: Path) -> Path:
    return root / tool.key


def go_sum_digest(go_sum: str) -> str:
    return hashlib.sha256(go_sum.encode()).hexdigest()


def stamp_for(tool: Tool, go_sum: str, go_version: str, built_s: float, sha256: Mapping[str, str]) -> dict:
    """What a build records; `sha256`: each file it left in bin/ by name."""
    return {"format": STAMP_FORMAT, "tool": tool.name, "version": tool.version,
            "module": f"{tool.module}@{tool.module_version}", "go_sum_sha256": go_sum_digest(go_sum),
            "binaries": list(tool.binaries), "sha256": dict(sorted(sha256.items())), "go": go_version,
            "built_s": round(built_s, 1)}


def stamp_problem(tool: Tool, stamp: Optional[dict], go_sum: str, bin_dir: Path,
                  digest: Callable[[Path], Optional[str]]) -> Optional[str]:
    """Why a cache entry is not the one this run would build (None: it is): another version, another
    go.sum, an older stamp format, or a file of bin/ whose sha256 (read by `digest`, None when it
    cannot be read) is not the one recorded when it was built."""
    if not isinstance(stamp, dict):
        return "it has no readable stamp"
    if stamp.get("format") != STAMP_FORMAT:
        return (f"its stamp is format {stamp.get('format')!r}, not {STAMP_FORMAT} (older stamps record "
                f"no sha256 of the binaries, so they are not trusted)")
    built = (stamp.get("tool"), stamp.get("version"), stamp.get("module"))
    if built != (tool.name, tool.version, f"{tool.module}@{tool.module_version}"):
        return f"it was built as {built}, not {(tool.name, tool.version, f'{tool.module}@{tool.module_version}')}"
    if stamp.get("go_sum_sha256") != go_sum_digest(go_sum):
        return f"it was built from another tools/cluster/{tool.name}/go.sum"
    sums = stamp.get("sha256")
    if not isinstance(sums, dict) or sorted(stamp.get("binaries") or []) != sorted(tool.binaries) \
            or not set(tool.binaries) <= set(sums) \
            or not all(isinstance(n, str) and _BIN_NAME.match(n) and isinstance(h, str) and _SHA256.match(h)
                       for n, h in sums.items()):
        return f"its stamp's sha256 record does not name each of {', '.join(tool.binaries)} by a sha256"
    for name, want in sums.items():
        got = digest(bin_dir / name)
        if got is None:
            return f"{bin_dir / name} is missing or unreadable"
        if got != want:
            return f"{bin_dir / name} has sha256 {got[:16]}..., not the {want[:16]}... recorded when it was built"
    return None


def stamp_matches(tool: Tool, stamp: Optional[dict], go_sum: str, bin_dir: Path,
                  digest: Callable[[Path], Optional[str]]) -> bool:
    """A cache entry is reused only when built from this version and this very go.sum, and every
    file of its bin/ is, byte for byte, what that build wrote."""
    return stamp_problem(tool, stamp, go_sum, bin_dir, digest) is None


def unsafe_cache(tool: Tool, root: Path, stamp_names: Sequence[str], lstat: Callable[[Path], object],
                 uid: int) -> Optional[str]:
    """As root: every directory above the cache root, from / down, one only `uid` (or root) can
    change and no symbolic link (root_paths.path_problem: builds make and remove entries there);
    the cache root, the entry, its bin/, each file run from it and the stamp, each owned by `uid` and
    writable by it alone, each the kind of file this code makes (never a symbolic link); the first
    that is not, as one line with its fix (None: all are, or are not there yet: a build makes them)."""
    above = path_problem(root.parent, uid)
    if above:
        # Above the cache, a directory of another user's (a ~/.cache of the user who ran sudo -E) lets
        # them rename the cache away and put theirs in its place between any check and the exec.
        return (f"refusing the cached {tool.name}: {above.why}, above the cache {root}, so another user could "
                f"change what root runs; fix: {above.fix}, or set DYNAMO_LAB_CACHE to a directory only "
                f"{_who(uid)} can write (e.g. /var/cache/dynamo-lab)")
    entry = entry_dir(tool, root)
    names = list(dict.fromkeys([*tool.binaries, *(n for n in stamp_names if _BIN_NAME.match(n))]))
    chain = [(root, True), (entry, True), (entry / "bin", True), *((entry / "bin" / n, False) for n in names),
             (entry / STAMP, False)]
    for path, is_dir in chain:
        try:
            st = lstat(path)
        except FileNotFoundError:
            if path in (root, entry, entry / "bin"):
                break
            continue
        # The kind first: a symbolic link's own mode bits mean nothing, where it points does.
        kind_ok = stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)
        why = loose(path, st, uid) if kind_ok else f"{path} is not a {'directory' if is_dir else 'regular file'}"
        if not why:
            continue
        if path == root:
            fix = (f"chmod go-w {root}" if st.st_uid == uid and kind_ok else
                   f"chown {_who(uid)} {root} after checking what is in it" if kind_ok else
                   f"replace {root} by a directory")
            fix += f", or set DYNAMO_LAB_CACHE to a directory only {_who(uid)} can write"
        elif st.st_uid == uid and kind_ok:
            fix = f"chmod go-w {path} (or rm -rf {entry} to rebuild it)"
        else:
            fix = f"rm -rf {entry} (the next run rebuilds it)"
        return f"refusing the cached {tool.name}: {why}, so another user could change what root runs; fix: {fix}"
    return None


def unsafe_found(d: Path, bins: Sequence[Path], lstat: Callable[[Path], object], uid: int) -> Optional[str]:
    """As root: a binary of the user's, the file it resolves to and their directories, each owned by
    `uid` and writable by it alone, and every directory from / down to each (links followed, each
    read from a directory that passed: root_paths' rule); the first that is not, as one line with its fix."""
    paths: list[Path] = []
    for p in (d, *bins):
        real = Path(os.path.realpath(p))
        paths += [real] if p == d else [real.parent, real]
    for path in dict.fromkeys(paths):
        try:
            st = lstat(path)
        except OSError as e:
            return f"{path}: cannot be checked ({e.strerror}): not run"
        why = loose(path, st, uid)
        if why:
            fix = f"chmod go-w {path}" if st.st_uid == uid else f"chown {_who(uid)} {path}"
            return f"{why}, so another user could change what root runs: not run (fix: {fix})"
    for p in (d, *bins):
        above = path_problem(p, uid, follow=True)
        if above:
            return f"{above.why}, so another user could change what root runs: not run (fix: {above.fix})"
    return None


def version_ok(tool: Tool, output: str) -> bool:
    return bool(tool.accept) and any(re.search(tool.accept, line.strip()) for line in output.splitlines())


def user_dir(env: Mapping[str, str]) -> Optional[Path]:
    """The directory of Kubernetes test binaries the user names, if any."""
    for var in ("DYNAMO_LAB_K8S_BIN", "KUBEBUILDER_ASSETS"):
        if env.get(var):
            return Path(env[var])
    return None


@dataclasses.dataclass(frozen=True)
class ToolChoice:
    tool: Tool
    action: str                 # "found", "cached", "build", "unavailable", "refused"
    bin_dir: Optional[Path]     # where its binaries are (or will be)
    detail: str = ""


def candidates(tool: Tool, env: Mapping[str, str], which: Callable[[str], Optional[str]]) -> list[Path]:
    """Where a binary the user already has might be, by the tool's kind of lookup."""
    if tool.found_in == "path":
        hit = which(tool.binaries[0])
        return [Path(hit).parent] if hit else []
    if tool.found_in == "k8s-dir":
        d = user_dir(env)
        return [d] if d else []
    return []


def decide(tool: Tool, env: Mapping[str, str], root: Path, go_sum: Optional[str],
           which: Callable[[str], Optional[str]], version_of: Callable[[Path, Tool], str],
           read_stamp: Callable[[Path], Optional[dict]], *, digest: Callable[[Path], Optional[str]],
           lstat: Callable[[Path], object], trusted_uid: Optional[int]) -> ToolChoice:
    """Found (the user's, at the pinned version), cached (our stamp and sha256s match), build,
    unavailable, or refused (`trusted_uid` set, as when root runs it: a cache path someone else
    could write).

    A user's binary at another version, or (trusted_uid set) one someone else could write, is not
    used, and said so; the tool is then built. A cache entry whose files are not what was built is
    rebuilt, and said so.
    """
    notes = []
    for d in candidates(tool, env, which):
        bins = [d / b for b in tool.binaries]
        if not all(b.is_file() and os.access(b, os.X_OK) for b in bins):
            notes.append(f"{d} lacks {', '.join(b.name for b in bins if not b.is_file())}")
            continue
        if trusted_uid is not None:
            why = unsafe_found(d, bins, lstat, trusted_uid)
            if why:
                notes.append(why)
                continue
        outputs = [version_of(b, tool) for b in bins]
        bad = [f"{b.name} says {o.strip().splitlines()[0] if o.strip() else 'nothing'!r}"
               for b, o in zip(bins, outputs, strict=True) if not version_ok(tool, o)]
        if not bad:
            return ToolChoice(tool, "found", d, outputs[0].strip().splitlines()[0])
        notes.append(f"{d}: not {tool.version}: " + "; ".join(bad))
    if tool.unavailable:
        return ToolChoice(tool, "unavailable", None, tool.unavailable)
    if go_sum is None:
        return ToolChoice(tool, "unavailable", None, f"no wrapper module in tools/cluster/{tool.name}/")
    entry = entry_dir(tool, root)
    bin_dir = entry / "bin"
    stamp = read_stamp(entry)
    if trusted_uid is not None:
        sums = stamp.get("sha256") if isinstance(stamp, dict) else None
        why = unsafe_cache(tool, root, [n for n in sums if isinstance(n, str)] if isinstance(sums, dict) else [],
                           lstat, trusted_uid)
        if why:
            return ToolChoice(tool, "refused", None, why)
    if not lexists(entry, lstat):
        return ToolChoice(tool, "build", bin_dir, "; ".join(notes))
    why = stamp_problem(tool, stamp, go_sum, bin_dir, digest)
    if why is None:
        return ToolChoice(tool, "cached", bin_dir, "; ".join(notes))
    return ToolChoice(tool, "build", bin_dir, "; ".join([*notes, f"not using {entry}: {why}; rebuilding it"]))


def lexists(path: Path, lstat: Callable[[Path], object]) -> bool:
    try:
        lstat(path)
    except FileNotFoundError:
        return False
    return True


def version_of(binary: Path, tool: Tool) -> str:
    if not tool.version_args:
        return f"{tool.version} (as built; it has no version flag)"
    try:
        with open_binary(binary, trusted_uid()) as exe:  # the file checked is the file run (root_paths)
            p = subprocess.run([str(binary), *tool.version_args], executable=exe.exec_path, capture_output=True,
                               text=True, timeout=30)
    except Refused as e:
        return f"(not run: {e})"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(could not run: {e})"
    return (p.stdout + p.stderr).strip()


def read_stamp(entry: Path) -> Optional[dict]:
    try:
        return json.loads((entry / STAMP).read_text())
    except (OSError, ValueError):
        return None


def file_sha256(path: Path) -> Optional[str]:
    """The file's sha256, None when it cannot be read (O_NOFOLLOW: a symbolic link is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return fd_sha256(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def seal(work: Path) -> dict[str, str]:
    """A finished build's entry made writable by its owner alone (what the umask let go build and
    mkdir leave group-writable would be refused as root), and the sha256 of each file in its bin/."""
    bin_dir = work / "bin"
    for path in [work, bin_dir, *bin_dir.iterdir(), *(work / "stages").rglob("*"), work / "stages"]:
        if path.exists() and not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o022)
    sums = {}
    for path in sorted(bin_dir.iterdir()):
        if path.is_symlink() or not path.is_file():
            raise RuntimeError(f"the build left {path}, not a regular file, in bin/")
        digest = file_sha256(path)
        if digest is None:
            raise RuntimeError(f"cannot read {path} back to record its sha256")
        sums[path.name] = digest
    return sums

