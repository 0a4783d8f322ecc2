"""The one bounded reader (bounded_read.py) at each door the local cluster's commands open as root:
the Pulumi driver's copy of a stack file into its workspace (pulumi_workspace.prepare, the driver run
as a script), the workspace's own file and the local cluster's kubeconfig (stack_overrides,
local_state.report_overrides), and `pr-preview`'s read of a pull request's stack files; and the
preflight's `--from FILE`, which shares its byte bound. A huge file, an alias bomb, nesting thousands
deep, a link to /dev/zero: each is refused in one line naming the file, after bounded work, and
nothing is written or deployed from it. No cluster: pr-preview's cluster and engine are stood in for
here (test_pr_preview.py runs the real ones)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynamo_lab import bounded_read, stack_files
from dynamo_lab.local_cluster import local, local_state, pulumi_cli, pulumi_workspace, stack_overrides
from dynamo_lab.preflight import cluster_data
from tests.helpers import ROOT
from tests.lab.cluster.test_pulumi_parts import local_kubeconfig
from tests.lab.test_stack_reader import NOT_STACK_FILES

# A string of 200 KiB and 4,000 aliases of it: 800 MB of text once written out (json.dumps of the
# setting, the workspace's safe_dump), from a file of 212 KiB, within the byte, value and depth bounds.
TEXT_BOMB = ("config:\n  dynamo-lab:s: &s " + "x" * (200 * 1024) + "\n  dynamo-lab:l: ["
             + ", ".join(["*s"] * 4000) + "]\n").encode()
HOSTILE = {
    "huge": (b"config: {}\n" + b"#" * bounded_read.MAX_YAML_BYTES,
             "more than 256 KiB, where a stack file is a few kilobytes; is it the right file?"),
    "alias-bomb": (NOT_STACK_FILES["alias-bomb"][0],
                   "refused at line 5, column 7: its aliases (*name) expand to more than 5,000 values, where a "
                   "stack file has a few hundred; is it the right file?"),
    "deep": (NOT_STACK_FILES["deep"][0],
             "refused at line 2, column 262: nested more than 64 levels deep; is it the right file?"),
    "text-bomb": (TEXT_BOMB,
                  "refused at line 3, column 17: its aliases (*name) expand to more than 256 KiB of text, where a "
                  "stack file is a few kilobytes; is it the right file?"),
}


def _hostile(tmp_path: Path, kind: str, name: str = "Pulumi.bad.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(HOSTILE[kind][0])
    return path


def test_bounded_bytes_stops_one_byte_past_its_limit_on_a_file_a_link_and_a_stream(tmp_path):
    (tmp_path / "zero").symlink_to("/dev/zero")  # followed, as open follows it: read no further than the bound
    for source in (tmp_path / "zero", io.BytesIO(b"x" * 1001)):
        with pytest.raises(bounded_read.TooLarge):
            bounded_read.bounded_bytes(source, 1000)
    (tmp_path / "small").write_bytes(b"x" * 1000)
    assert bounded_read.bounded_bytes(tmp_path / "small", 1000) == b"x" * 1000


def test_an_alias_of_a_long_string_repeated_is_refused_before_it_is_written_out():
    # Within the bytes, values and depth: only the text its aliases expand to gives it away.
    data, why = HOSTILE["text-bomb"]
    assert len(data) < bounded_read.MAX_YAML_BYTES and data.count(b"*s") < bounded_read.MAX_YAML_VALUES
    with pytest.raises(stack_files.StackFileError) as caught:
        stack_files.parse_yaml(data.decode(), "Pulumi.bad.yaml")
    assert str(caught.value) == f"Pulumi.bad.yaml: {why}"
    # The same text written out once is a file of its size, not a refusal: the bound is the aliases'.
    assert stack_files.parse_yaml("s: " + "x" * (300 * 1024) + "\n", "long")["s"] == "x" * (300 * 1024)


@pytest.mark.parametrize("kind", HOSTILE)
def test_the_stack_reader_refuses_each_in_one_line(tmp_path, kind):
    with pytest.raises(stack_files.StackFileError) as caught:
        stack_files.read_yaml(_hostile(tmp_path, kind))
    assert str(caught.value) == f"Pulumi.bad.yaml: {HOSTILE[kind][1]}"


def test_the_stack_reader_and_preflight_refuse_a_link_to_dev_zero_unread(tmp_path):
    (tmp_path / "Pulumi.zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(stack_files.StackFileError, match=r"^Pulumi\.zero\.yaml: more than 256 KiB"):
        stack_files.read_yaml(tmp_path / "Pulumi.zero.yaml")
    (tmp_path / "cluster.json").symlink_to("/dev/zero")
    with pytest.raises(cluster_data.ClusterUnreadable) as caught:
        cluster_data.read_file(str(tmp_path / "cluster.json"), limit=2**20)
    assert str(caught.value) == (f"{tmp_path / 'cluster.json'}: more than 1 MiB, more than saved cluster data is; is "
                                 f"it the right file? {cluster_data.RESAVE[0].upper()}{cluster_data.RESAVE[1:]}")


@pytest.mark.parametrize("kind", HOSTILE)
def test_prepare_refuses_the_stack_file_in_one_line_and_writes_nothing(tmp_path, kind):
    source = _hostile(tmp_path, kind)
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "bad", local_kubeconfig(tmp_path))
    with pytest.raises(RuntimeError) as caught:
        pulumi_workspace.prepare(ws, source)
    assert str(caught.value) == f"Pulumi.bad.yaml cannot be read as a stack file ({HOSTILE[kind][1]})"
    assert not ws.root.exists()


def test_prepare_refuses_a_workspace_file_that_is_no_stack_file(tmp_path):
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "bad", local_kubeconfig(tmp_path))
    ws.project.mkdir(parents=True)
    ws.stack_file.write_bytes(HOSTILE["alias-bomb"][0])
    with pytest.raises(RuntimeError, match=r"^Pulumi\.bad\.yaml cannot be read as a stack file \(refused at line 5"):
        pulumi_workspace.prepare(ws, ROOT / "Pulumi.cross-server.yaml")
    ws.stack_file.write_text("- a list\n")
    with pytest.raises(RuntimeError, match=r"^Pulumi\.bad\.yaml is not a stack file: Pulumi writes a YAML map"):
        pulumi_workspace.prepare(ws, ROOT / "Pulumi.cross-server.yaml")


@pytest.mark.process
@pytest.mark.parametrize("kind", ["huge", "alias-bomb", "deep"])
def test_the_driver_run_as_a_script_refuses_the_stack_file_in_one_line(tmp_path, kind):
    # As pulumi_cli runs it: a script, its siblings (bounded_read.py among them) its only project modules.
    source = _hostile(tmp_path, kind)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "dynamo_lab/local_cluster/pulumi_driver.py"), "preview", "--stack", "bad",
         "--workspace", str(tmp_path / "ws"), "--kubeconfig", str(local_kubeconfig(tmp_path)),
         "--stack-file", str(source), "--pulumi-bin", str(tmp_path), "--provider-bin", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""}, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        1, "", f"engine: Pulumi.bad.yaml cannot be read as a stack file ({HOSTILE[kind][1]})\n")
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_kubeconfig_is_read_with_the_same_bounds(tmp_path, kind):
    path = _hostile(tmp_path, kind, "kubeconfig")
    with pytest.raises(RuntimeError) as caught:
        stack_overrides.kubeconfig_context(path)
    assert str(caught.value) == f"the local cluster's kubeconfig {path} cannot be read ({path}: {HOSTILE[kind][1]})"


def test_a_kubeconfig_that_links_to_dev_zero_is_refused_unread(tmp_path):
    (tmp_path / "kubeconfig").symlink_to("/dev/zero")
    with pytest.raises(RuntimeError, match=r"cannot be read \(.*kubeconfig: more than 256 KiB"):
        stack_overrides.kubeconfig_context(tmp_path / "kubeconfig")


def test_report_overrides_refuses_a_hostile_workspace_file_or_kubeconfig_in_one_line(tmp_path):
    from tests.lab.cluster.test_pulumi_parts import LAB_FILE

    ws = pulumi_workspace.Workspace(tmp_path / "ws", "lab", local_kubeconfig(tmp_path))
    ws.project.mkdir(parents=True)
    ws.stack_file.write_bytes(HOSTILE["huge"][0])
    with pytest.raises(local_state.LocalError) as caught:
        local_state.report_overrides("lab", LAB_FILE, ws, print)
    assert str(caught.value) == f"lab: Pulumi.lab.yaml cannot be read as a stack file ({HOSTILE['huge'][1]})"
    ws.stack_file.unlink()
    bomb = pulumi_workspace.Workspace(ws.root, "lab", _hostile(tmp_path, "alias-bomb", "kubeconfig"))
    with pytest.raises(local_state.LocalError, match=r"^lab: the local cluster's kubeconfig .* cannot be read "
                                                     r"\(.*its aliases \(\*name\) expand to more than 5,000 values"):
        local_state.report_overrides("lab", LAB_FILE, bomb, print)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("kind, where", [("huge", "head"), ("alias-bomb", "head"), ("deep", "base")])
def test_pr_preview_names_a_refused_stack_file_skips_that_stack_and_previews_the_others(tmp_path, monkeypatch,
                                                                                        kind, where):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shipped = (ROOT / "Pulumi.cross-server.yaml").read_bytes()
    (repo / "Pulumi.cross-server.yaml").write_bytes(shipped)
    (repo / "Pulumi.big.yaml").write_bytes(HOSTILE[kind][0] if where == "base" else shipped)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    (repo / "Pulumi.big.yaml").write_bytes(HOSTILE[kind][0] if where == "head" else shipped)
    _git(repo, "commit", "-qam", "head", "--allow-empty")
    ran: list[tuple[str, str]] = []

    def invoke(action, ws, bins, **kw):
        ran.append((action, ws.stack))
        return pulumi_cli.Invocation(0, f"(the engine's {action} of {ws.stack})\n", {})

    handle = type("Handle", (), {"kubeconfig": local_kubeconfig(tmp_path), "api": lambda self: None})()
    monkeypatch.setattr(local, "_bins", lambda log: {})
    monkeypatch.setattr(local, "_crd_dir", lambda into: into)
    monkeypatch.setattr(local.harness, "running", lambda *a, **k: contextlib.nullcontext(handle))
    monkeypatch.setattr(local.standin, "GraphReady", lambda api: contextlib.nullcontext())
    monkeypatch.setattr(local.pulumi_cli, "invoke", invoke)
    out, said = io.StringIO(), []
    assert local.pr_preview("HEAD~1", "HEAD", out=out, repo=repo, log=said.append) == 1
    ref = "HEAD" if where == "head" else "HEAD~1"
    big = out.getvalue().split("## big\n")[1].split("\n## ")[0]
    assert big == (f"STACK FILE REFUSED: {ref}'s Pulumi.big.yaml cannot be read as a stack file ({HOSTILE[kind][1]}); "
                   "big is neither deployed nor previewed\n")
    assert ran == [("up", "cross-server"), ("preview", "cross-server")]  # nothing ran for big
    assert "(the engine's preview of cross-server)" in out.getvalue()
    assert said[-1] == "pr-preview: a stack file was refused, so not previewed, for big"


def test_preflight_from_a_file_keeps_its_own_words(tmp_path):
    # The byte bound is the shared reader's; the words are preflight's, as before.
    (tmp_path / "cluster.json").write_text(json.dumps({"serverVersion": {"gitVersion": "v1.34.0"}}) + " " * 100)
    with pytest.raises(cluster_data.ClusterUnreadable, match=r"cluster\.json: more than 0 MiB, more than saved "):
        cluster_data.read_file(str(tmp_path / "cluster.json"), limit=64)
    with pytest.raises(cluster_data.ClusterUnreadable, match=r"^cannot read .*missing\.json: \[Errno 2\]"):
        cluster_data.read_file(str(tmp_path / "missing.json"))
