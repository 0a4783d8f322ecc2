"""What a command run as root trusts on a path, and the one way it runs a binary and makes or
removes a directory through one: `problem` (the rule for one component), `path_problem` (the rule
for every component from / down), `open_binary` (run exactly the file that was checked),
`make_dirs` and `remove_tree` (never through a symbolic link).

The rule, as root (a user's own paths are theirs: `uid` None checks nothing): every directory from /
down to the path, and the path itself, is owned by root and writable by root alone. Not even the
user who ran sudo (SUDO_UID) may own one: a directory of theirs above a binary root runs lets them
rename the binary's directory away and put their own in its place, between any check and the exec
(docs/security.md, "What runs as root"). One exception, above what the project makes: a directory
writable by others whose sticky bit is set (/tmp, mode 1777), where another user can create entries
but can neither rename nor remove one they do not own (unlink(2), rename(2): EPERM in a sticky
directory), and each entry below it on the path is held to the rule itself. Where something is made
or removed, no component may be a symbolic link (its target would be what is made or removed); a
binary may be reached through links, each read from a directory that passed the rule, and the file
they lead to is what is checked.

Every walk opens one component at a time from /, each relative to the directory above it and with
O_NOFOLLOW, so a check and the step after it act on the same directory.

Standard library only, and nothing of the project: the Pulumi driver imports it as a sibling.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Optional

# A cache entry's record of what its build wrote (tool_trust.stamp_for): bin/'s sibling.
STAMP = "stamp.json"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_LINKS_MAX = 40            # as the kernel's own walk (path_resolution(7): at most 40 links)
_STAMP_BYTES_MAX = 1 << 20


class Refused(RuntimeError):
    """A path root will not use: what is wrong and why (`why`), and the fix (`fix`)."""

    def __init__(self, why: str, fix: str):
        super().__init__(f"{why}; fix: {fix}")
        self.why, self.fix = why, fix


def trusted_uid() -> Optional[int]:
    """Whose paths may be used: root's alone when root runs this; a user runs their own (None)."""
    return 0 if os.geteuid() == 0 else None


def who(uid: int) -> str:
    return "root" if uid == 0 else f"uid {uid}"


def _owner(uid: int) -> str:
    return f"uid {uid}" + (" (the user who ran sudo)" if os.environ.get("SUDO_UID") == str(uid) else "")


def loose(path: Path, st, uid: int) -> Optional[str]:
    """Why another user than `uid` could change `path` (its lstat `st`), or None: owned by someone
    else, or a group or other write bit. The strict rule, for what the project makes itself."""
    if st.st_uid != uid:
        return f"{path} is owned by {_owner(st.st_uid)}, not {who(uid)}"
    bits = [w for w, bit in (("group", 0o020), ("other", 0o002)) if st.st_mode & bit]
    if bits:
        return f"{path} is {'- and '.join(bits)}-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def problem(path: Path, st, uid: Optional[int]) -> Optional[Refused]:
    """Why someone other than root and `uid` could change what `path` names (`st`, its stat), with
    the fix; None when no one can (or `uid` is None). A sticky directory may be writable by others."""
    if uid is None:
        return None
    if st.st_uid not in (0, uid):
        return Refused(f"{path} is owned by {_owner(st.st_uid)}, not {who(uid)}",
                       f"chown {who(uid)} {path} after checking what is in it")
    sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & 0o022 and not sticky:
        return Refused(loose(path, st, st.st_uid) or f"{path} is writable by others", f"chmod go-w {path}")
    return None


def _link(path: Path) -> Refused:
    return Refused(f"{path} is a symbolic link, so what is made or removed there is wherever it points",
                   f"use the directory it points to ({os.path.realpath(path)}) by its own path, not through the link")


def _open_dir(name: str, dir_fd: Optional[int], where: Path, uid: Optional[int], follow: bool = False) -> int:
    """The directory `name` (in `dir_fd`), opened and held to the rule; never through a link unless
    `follow` (a user's own path)."""
    try:
        fd = os.open(name, _DIR | (0 if follow else os.O_NOFOLLOW), dir_fd=dir_fd)
    except OSError as e:
        if os.path.islink(where):
            raise _link(where) from None
        if isinstance(e, NotADirectoryError):
            raise Refused(f"{where} is not a directory", f"remove {where} or name another directory") from None
        raise
    why = problem(where, os.fstat(fd), uid)
    if why:
        os.close(fd)
        raise why
    return fd


def _walk(path: Path, uid: Optional[int], *, follow: bool, follow_last: bool = False,
          create: Optional[int] = None) -> tuple[int, str, Path]:
    """The directory holding the last component of `path`, open (the caller closes it), that
    component's name, and where it is: every directory from / down opened relative to the one
    above and held to the rule. A symbolic link on the way is followed when `follow` (the last
    component's when `follow_last`), read from the checked directory it lies in, or else refused.
    `create`: a missing directory on the way is made with that mode. FileNotFoundError: one is missing."""
    parts = list(Path(os.path.abspath(path)).parts[1:])
    if not parts:
        raise ValueError("the root directory has no directory above it")
    where, fd, links = Path("/"), _open_dir("/", None, Path("/"), uid), 0
    try:
        while True:
            name = parts.pop(0)
            last = not parts
            if name in ("", ".", ".."):  # only from a link's target: pathlib and abspath remove them
                if last:
                    raise Refused(f"a link on the way to {path} ends in {name!r}", "name the directory itself")
                if name == "..":
                    up = _open_dir("..", fd, where.parent, uid)
                    os.close(fd)
                    fd, where = up, where.parent
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if last or create is None:
                    if last:
                        return fd, name, where / name
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, create, dir_fd=fd)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and (follow_last if last else follow):
                links += 1
                if links > _LINKS_MAX:
                    raise Refused(f"{path} goes through more than {_LINKS_MAX} symbolic links", "name the file itself")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    top = _open_dir("/", None, Path("/"), uid)
                    os.close(fd)
                    fd, where = top, Path("/")
                parts = [p for p in Path(target).parts if p != "/"] + parts
                continue
            if last:
                return fd, name, where / name
            if stat.S_ISLNK(st.st_mode):
                raise _link(where / name)
            down = _open_dir(name, fd, where / name, uid)
            os.close(fd)
            fd, where = down, where / name
    except BaseException:
        os.close(fd)
        raise


def path_problem(path: Path, uid: Optional[int], *, follow: bool = False) -> Optional[Refused]:
    """Why `path` is not one only root (and `uid`) can change: the first component from / down that
    another user could change, or a symbolic link (`follow`: links are followed instead). None when
    there is none, or when the path stops existing below a component that passed."""
    try:
        fd, name, where = _walk(path, uid, follow=follow, follow_last=follow)
    except FileNotFoundError:
        return None
    except Refused as why:
        return why
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)
    return _link(where) if stat.S_ISLNK(st.st_mode) and uid is not None else problem(where, st, uid)


def make_dirs(path: Path, uid: Optional[int], mode: int = 0o700, parents_mode: int = 0o755) -> None:
    """The directory `path` (`mode`) and each missing one above it (`parents_mode`), made by the same
    walk: refused (Refused) where a component is one another user could change or, as root, a link."""
    fd, name, where = _walk(path, uid, follow=uid is None, create=parents_mode)
    try:
        made = True
        try:
            os.mkdir(name, mode, dir_fd=fd)
        except FileExistsError:
            made = False
        made_fd = _open_dir(name, fd, where, uid, follow=uid is None)
        if made:
            os.fchmod(made_fd, mode)  # whatever the umask
        os.close(made_fd)
    finally:
        os.close(fd)


def remove_tree(path: Path, uid: Optional[int], *, ignore_errors: bool = False) -> bool:
    """Remove the directory `path` and everything in it; whether it was there. Its every component is
    walked as `make_dirs` walks it and the tree removed from the directory that holds it, by file
    descriptor (shutil.rmtree with dir_fd: it opens each entry with O_NOFOLLOW and refuses a link at
    the top), so no link anywhere from / down can move the removal elsewhere. Refused where a
    component fails the rule, whatever `ignore_errors` (rmtree's: an entry it cannot remove)."""
    try:
        fd, name, where = _walk(path, uid, follow=uid is None)
    except FileNotFoundError:
        return False
    except Refused:
        raise
    except OSError:
        if ignore_errors:
            return False
        raise
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        why = _link(where) if stat.S_ISLNK(st.st_mode) else problem(where, st, uid)
        if why is None and not stat.S_ISDIR(st.st_mode):
            why = Refused(f"{where} is not a directory", f"remove {where} yourself if it is not needed")
        if why is not None:
            raise why
        shutil.rmtree(name, dir_fd=fd, ignore_errors=ignore_errors)
        return True
    finally:
        os.close(fd)


class Binary:
    """A binary opened to be run: `exec_path` names the very file that was checked, as long as this
    stays open (its context, or `close`). Pass it as Popen's `executable` (argv[0] keeps the name)."""

    def __init__(self, path: Path, fd: int, sha256: str):
        self.path, self.fd, self.sha256 = path, fd, sha256

    @property
    def exec_path(self) -> str:
        # /proc/PID/fd/N, not /proc/self/fd/N: the child resolves it after fork, where "self" is the
        # child, whose copy of the descriptor Popen closes before the exec (close_fds). PID as /proc
        # itself names this process (its link `self`), which in the cluster's PID namespace is not
        # os.getpid(), since /proc there is the host's (namespaces.py mounts none of its own).
        return f"/proc/{os.readlink('/proc/self')}/fd/{self.fd}"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Binary:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fd_sha256(fd: int) -> str:
    """The sha256 of the open file `fd`, read from its start (pread: its offset is left as it is)."""
    h, offset = hashlib.sha256(), 0
    while chunk := os.pread(fd, 1 << 20, offset):
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def open_binary(path: Path, uid: Optional[int]) -> Binary:
    """The binary `path`, opened to be run: every directory from / down to it and the file held to
    the rule (links followed, each read from a directory that passed), the file a regular one, and,
    in a cache entry's bin/ (a stamp beside it), the sha256 its build recorded, hashed from the open
    descriptor. Refused (one line, with the fix) otherwise.

    Why this closes the race between the check and the exec: what runs is the open file, by
    /proc/PID/fd/N (Binary.exec_path), not the path looked up again; what the file holds only root
    can change (owner root, no group or other write bit, checked on the descriptor), and renaming
    another file into its place changes what the path names, never the file that is open. The
    kernel opens the descriptor's file itself for the exec (proc(5), /proc/PID/fd: a link to the
    open file, which works after it is unlinked or renamed)."""
    dir_fd, name, where = _walk(path, uid, follow=True, follow_last=True)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as e:
            raise Refused(f"{where} cannot be opened ({e.strerror})",
                          "run `python3 dev.py cluster-tools` to build or find it again") from None
        try:
            st = os.fstat(fd)
            why = problem(where, st, uid) if stat.S_ISREG(st.st_mode) else Refused(
                f"{where} is not a regular file", f"remove {where} (the next run rebuilds or finds it)")
            if why:
                raise why
            digest = fd_sha256(fd)
            want = _recorded_sha256(dir_fd, name, where, uid)
            if want is not None and digest != want:
                raise Refused(f"{where} has sha256 {digest[:16]}..., not the {want[:16]}... its cache entry's "
                              "stamp recorded when it was built, so it is not run",
                              f"rm -rf {where.parent.parent} (the next run rebuilds it)")
            return Binary(where, fd, digest)
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(dir_fd)


def _recorded_sha256(dir_fd: int, name: str, where: Path, uid: Optional[int]) -> Optional[str]:
    """The sha256 a cache entry's stamp records for the binary `name` of its bin/ (`dir_fd`), read
    from the entry above it, held to the rule as well; None where no stamp lies there (a binary of
    the user's, not built here)."""
    if where.parent.name != "bin":
        return None
    entry = _open_dir("..", dir_fd, where.parent.parent, uid)
    try:
        try:
            sfd = os.open(STAMP, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=entry)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Refused(f"{where.parent.parent / STAMP} cannot be read ({e.strerror})",
                          f"rm -rf {where.parent.parent} (the next run rebuilds it)") from None
        with os.fdopen(sfd, "rb") as f:
            why = problem(where.parent.parent / STAMP, os.fstat(f.fileno()), uid)
            if why:
                raise why
            raw = f.read(_STAMP_BYTES_MAX + 1)
    finally:
        os.close(entry)
    try:
        sums = json.loads(raw).get("sha256") if len(raw) <= _STAMP_BYTES_MAX else None
    except (ValueError, AttributeError):
        sums = None
    if not isinstance(sums, dict) or not isinstance(sums.get(name), str):
        raise Refused(f"the stamp of {where.parent.parent} records no sha256 of {name}, so it is not run",
                      f"rm -rf {where.parent.parent} (the next run rebuilds it)")
    return sums[name]
