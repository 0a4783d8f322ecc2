"""What a local deployment changes in a stack's file, and why; pure (no process, no file but a
kubeconfig or stack file read, within bounds).

The Dynamo platform chart cannot be downloaded here, so `platform.manage` is false (the graph CRD
comes from the pinned upstream files, applied by the cluster harness). Every stack key that can
choose a cluster names the local one: `kubernetes:kubeconfig` is the local cluster's kubeconfig and
`kubernetes:context` its context, whatever the stack file says (the program's explicit Provider
prefers both to the environment, so a lab's kubeconfig left there would send a local run to the
lab); `kubernetes:cluster` and `kubernetes:renderYamlToDirectory` are left out. What the workspace
cannot decrypt is left out too: the source file's secrets provider state (`encryptionsalt`, ...)
and its `secure:` values belong to another passphrase, and a workspace has its own (no worker runs
locally, so the HF token is not missed).

Standard library and PyYAML, and nothing of the project but the toolbox's bounded reader
(dynamo_lab/bounded_read.py): the Pulumi driver (pulumi_driver.py) imports it as a script's sibling,
with the toolbox's directory on its path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

if __package__:
    from dynamo_lab import bounded_read
else:  # imported by the driver run as a script, which puts the toolbox's directory on its path
    import bounded_read

# What a local deployment changes in a stack's file, and why (module docstring); the cluster keys
# are added by local_overrides, from the local cluster's kubeconfig.
LOCAL_OVERRIDES: dict[str, Any] = {"dynamo-lab:platform": {"manage": False}}
# An override that takes the key out of the stack's config.
REMOVE = object()
# The provider's settings besides kubeconfig and context that choose where resources go
# (pulumi-kubernetes 4.25.0, provider.py: `cluster`, the kubeconfig cluster to use;
# `renderYamlToDirectory`, files instead of a cluster). Only a default provider reads them from the
# stack, and the program has none, but a local run takes no chance with a stack of another program.
CLUSTER_CHOOSERS = ("kubernetes:cluster", "kubernetes:renderYamlToDirectory")
# What a stack file holds besides `config:` (pulumi pkg/workspace, ProjectStack): the secrets
# provider's state, which belongs to the passphrase or key the file was made with, and Pulumi ESC
# environments, which a file backend cannot open and which may set any config key, a cluster's too.
NOT_COPIED = ("encryptionsalt", "secretsprovider", "encryptedkey", "environment")
# Pulumi's stack name rule (pkg/backend/httpstate/backend.go, validateStackName:
# ^[A-Za-z0-9_.-]{1,100}$). A local deployment makes the name a directory (stacks/STACK) and a file
# (Pulumi.STACK.yaml), so nothing else gets through, nor `.` and `..`, which fit the rule.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_name_problem(stack: str) -> Optional[str]:
    """Why `stack` cannot be a stack name (None: it can), in words for a one-line refusal."""
    if STACK_NAME.fullmatch(stack) and stack not in (".", ".."):
        return None
    return (f"{stack!r} is not a stack name: Pulumi's stack names are 1 to 100 letters, digits, '-', '_' "
            "and '.' (and a local run also refuses '.' and '..', which name directories)")


def local_overrides(kubeconfig: Path, context: str) -> dict[str, Any]:
    """LOCAL_OVERRIDES, and every stack key that can choose a cluster set to the local one."""
    return {**LOCAL_OVERRIDES, "kubernetes:kubeconfig": str(kubeconfig), "kubernetes:context": context,
            **{key: REMOVE for key in CLUSTER_CHOOSERS}}


def kubeconfig_context(kubeconfig: Path) -> str:
    """The kubeconfig's current context: the local cluster's kubeconfig names only its own. Read
    with the stack reader's bounds (bounded_read.py): the commands run as root, and a kubeconfig
    is a file anyone may have pointed them at."""
    try:
        context = (bounded_read.read_yaml(kubeconfig, str(kubeconfig)) or {}).get("current-context")
    except (bounded_read.Unreadable, AttributeError) as exc:
        raise RuntimeError(f"the local cluster's kubeconfig {kubeconfig} cannot be read ({exc})") from None
    if not isinstance(context, str) or not context:
        raise RuntimeError(f"the local cluster's kubeconfig {kubeconfig} names no current-context")
    return context


def read_stack_document(path: Path) -> dict[str, Any]:
    """A stack file's document, read within the stack reader's bounds (bounded_read.py), or a
    RuntimeError of one line naming it, worded as local_state.read_stack_file words it (the driver
    prints it as its refusal): the file may be a pull request's, read as root."""
    try:
        doc = bounded_read.read_yaml(path) or {}
    except bounded_read.Unreadable as exc:
        why = str(exc).removeprefix(f"{path.name}: ")
        raise RuntimeError(f"{path.name} cannot be read as a stack file ({why})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise RuntimeError(f"{path.name} is not a stack file: Pulumi writes a YAML map with `config:`, a map of keys")
    return doc


def is_secure(value: Any) -> bool:
    """A value Pulumi keeps encrypted in the stack file: `{secure: <ciphertext>}`, at any depth."""
    if isinstance(value, Mapping):
        return (set(value) == {"secure"} and isinstance(value["secure"], str)) or any(map(is_secure, value.values()))
    if isinstance(value, list):
        return any(map(is_secure, value))
    return False


def merge_config(source: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A stack file's `config:` with `overrides` applied key by key; a mapping value is merged one
    level down (`dynamo-lab:platform: {manage: false}` keeps the stack's other platform keys), and
    REMOVE takes the key out."""
    out = dict(source)
    for key, value in overrides.items():
        if value is REMOVE:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def stack_document(source: Mapping[str, Any], existing: Optional[Mapping[str, Any]],
                   overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace's Pulumi.<stack>.yaml: the source file's config with the overrides, less what
    the workspace cannot decrypt (NOT_COPIED, `secure:` values: another passphrase's), keeping what
    the CLI itself wrote there (the passphrase's salt, values set with `config set --secret`)."""
    doc = {k: v for k, v in source.items() if k != "config" and k not in NOT_COPIED}
    config = {k: v for k, v in (source.get("config") or {}).items() if not is_secure(v)}
    if existing:
        if existing.get("encryptionsalt"):
            doc["encryptionsalt"] = existing["encryptionsalt"]
        for key, value in (existing.get("config") or {}).items():
            if key not in config and is_secure(value):
                config[key] = value
    doc["config"] = merge_config(config, overrides)  # last: no key of either file outranks an override
    return doc


def local_changes(source: Mapping[str, Any], doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """What the workspace's file (`doc`, stack_document's) does not take as the source file has it:
    (the source's config keys it sets otherwise, the source's keys it leaves out), config keys
    first. Names only: a value may be a secret."""
    src, got = source.get("config") or {}, doc.get("config") or {}
    changed = [k for k in src if k in got and got[k] != src[k]]
    left_out = [k for k in src if k not in got] + [k for k in source if k != "config" and doc.get(k) != source[k]]
    return changed, left_out
