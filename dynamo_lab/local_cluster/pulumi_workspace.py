"""One local deployment of one stack, kept in its own directory (`Workspace.root`):

    project/   Pulumi.yaml and Pulumi.<stack>.yaml (the stack's file with the local overrides)
    state/     the file backend (PULUMI_BACKEND_URL)
    home/      PULUMI_HOME: the plugin cache, where the built provider is installed
    passphrase the stack's secrets passphrase, readable by its owner only

What is written there (`prepare`), the Pulumi CLI's environment for it (`cli_env`), the provider
installed in its plugin cache, and what a killed run of it left behind: its plugins (`orphans`)
and torn attribute files in its state (`repair_torn_attributes`).

Standard library and PyYAML, and nothing of the project but its sibling stack_overrides.py: the
Pulumi driver (pulumi_driver.py) imports it as a script's sibling.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

if __package__:
    from dynamo_lab.local_cluster.root_paths import open_binary, trusted_uid
    from dynamo_lab.local_cluster.stack_overrides import (
        kubeconfig_context,
        local_overrides,
        read_stack_document,
        stack_document,
    )
else:  # imported by the driver run as a script: a sibling in its directory (pulumi_driver.py)
    from root_paths import open_binary, trusted_uid
    from stack_overrides import kubeconfig_context, local_overrides, read_stack_document, stack_document

PROJECT = "dynamo-lab"
# The provider release tools.py builds (tools.PROVIDER) and pyproject.toml pins; a test holds them equal.
PROVIDER_VERSION = "4.25.0"


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


def prepare(ws: Workspace, source: Path, overrides: Optional[Mapping[str, Any]] = None) -> None:
    """Write the project copy (the stack's file from `source`, with `overrides`, by default
    local_overrides for the workspace's kubeconfig) and, once, the passphrase."""
    # Both files read first, within the stack reader's bounds (as root, and `source` may be a pull
    # request's): one they refuse stops here, a RuntimeError of one line, and nothing is written.
    existing = read_stack_document(ws.stack_file) if ws.stack_file.exists() else None
    source_doc = read_stack_document(source)
    if overrides is None:
        overrides = local_overrides(ws.kubeconfig, kubeconfig_context(ws.kubeconfig))
    ws.project.mkdir(parents=True, exist_ok=True)
    ws.state.mkdir(parents=True, exist_ok=True)
    ws.home.mkdir(parents=True, exist_ok=True)
    (ws.project / "Pulumi.yaml").write_text(yaml.safe_dump(
        {"name": PROJECT, "runtime": "python",
         "description": "dynamo-lab, run by the Automation API (dynamo_lab/local_cluster/pulumi_driver.py)"},
        sort_keys=False))
    doc = stack_document(source_doc, existing, overrides)
    ws.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    if not ws.passphrase_file.exists():
        fd = os.open(ws.passphrase_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24))


def passphrase(ws: Workspace) -> str:
    return ws.passphrase_file.read_text().strip()


def install_provider(ws: Workspace, bins: Mapping[str, Path], env: Mapping[str, str]) -> None:
    """The built provider in this workspace's plugin cache, as `kubernetes` PROVIDER_VERSION: the
    version the program's pulumi-kubernetes asks for, so the engine loads exactly this binary. It is
    copied from the provider as opened and checked (root_paths.open_binary: the CLI reads the open
    file, /proc/PID/fd/N), by the CLI as opened and checked; a copy there already is kept only while
    it is, byte for byte, that provider (a rebuilt provider is installed again)."""
    plugin = ws.home / "plugins" / f"resource-kubernetes-v{PROVIDER_VERSION}" / "pulumi-resource-kubernetes"
    uid = trusted_uid()
    with open_binary(bins["pulumi-resource-kubernetes"] / "pulumi-resource-kubernetes", uid) as provider:
        if plugin.is_file() and not plugin.is_symlink():
            with open_binary(plugin, uid) as installed:
                if installed.sha256 == provider.sha256:
                    return
        with open_binary(bins["pulumi"] / "pulumi", uid) as cli:
            subprocess.run([str(bins["pulumi"] / "pulumi"), "plugin", "install", "resource", "kubernetes",
                            PROVIDER_VERSION, "--reinstall", "--file", provider.exec_path], executable=cli.exec_path,
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


def torn_attributes(ws: Workspace) -> list[Path]:
    """Attribute files in this workspace's state that a killed CLI left unreadable. The file backend
    writes each object atomically (a temporary file, then a rename) but the object's `<name>.attrs`
    beside it in place: gocloud.dev blob/fileblob/attrs.go, setAttrs (at the version the Pulumi
    CLI's go.sum pins, tools/cluster/pulumi), truncates it with os.Create and then writes it. A CLI
    killed between the two leaves it empty, and every later read of the object fails on it
    ("failed to load checkpoint: EOF", for the stack's own file). Only regular files under the
    state directory count (links are not followed)."""
    torn = []
    for path in sorted(ws.state.rglob("*.attrs")) if ws.state.is_dir() else []:
        with contextlib.suppress(OSError):
            if not path.is_symlink() and path.is_file() and not _json_object(path.read_bytes()):
                torn.append(path)
    return torn


def _json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def repair_torn_attributes(ws: Workspace, echo=None) -> list[Path]:
    """Remove the torn attribute files, before the next action. Nothing is lost: an attribute file
    holds only the object's content type and metadata, and fileblob reads a missing one as the
    default (attrs.go, getAttrs), which is what the file backend wrote there."""
    torn = torn_attributes(ws)
    for path in torn:
        path.unlink(missing_ok=True)
        if echo:
            echo(f"engine: removed {path.relative_to(ws.state)}, which a killed run left empty or torn "
                 "(the file backend's object beside it is intact)")
    return torn
