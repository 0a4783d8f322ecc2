"""`dynamo-lab up|down STACK --local` and `pr-preview`: what they refuse before starting anything."""

from __future__ import annotations

import contextlib
import os
import subprocess

import pytest

from dynamo_lab import stack_files
from dynamo_lab.local_cluster import local, local_state, pulumi_cli, pulumi_workspace
from tests.helpers import ROOT, run_cli


def test_up_without_local_says_to_run_pulumi_itself_and_starts_nothing():
    done = run_cli("up", "cross-server")
    assert done.returncode == 2 and "pulumi up --stack cross-server" in done.stderr and done.stdout == ""
    done = run_cli("down", "kv-routing")
    assert done.returncode == 2 and "pulumi destroy --stack kv-routing" in done.stderr


def test_an_unknown_stack_is_refused_with_the_stacks_there_are():
    done = run_cli("up", "cross-sever", "--local")
    assert done.returncode == 2
    assert "no stack file Pulumi.cross-sever.yaml" in done.stderr
    # Every stack file in the directory, the user's own among them, in the order stacks_in gives.
    assert f"stacks here: {', '.join(stack_files.stacks_in(ROOT))}" in done.stderr


def test_the_local_cluster_needs_root_and_says_so(monkeypatch):
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    with pytest.raises(local.LocalError, match="needs root .* run it as root"):
        local.up("cross-server", log=lambda m: None)


def test_pr_preview_refuses_a_ref_that_is_not_a_commit(tmp_path):
    with pytest.raises(local.LocalError, match="git rev-parse"):
        with local.checkout("no-such-ref-anywhere", tmp_path / "t"):
            pass


# ---- a stack name is a path under the state directory: refused unless it is one Pulumi accepts ----

BAD_NAMES = ["..", ".", "a b", "ab\n", "x" * 101, "a\nb", "stacks/../..", "cross-server/..", "", "ünïcode"]


@pytest.fixture
def untouchable(monkeypatch, tmp_path):
    """The state directory in tmp_path, and every step of a local run that acts made to fail the test."""
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(tmp_path / "cache"))
    root = local_state.local_root()
    assert root == tmp_path / "cache" / "local"

    def touched(*a, **k):
        raise AssertionError("the command went on past the stack name: it would start or remove something")

    for name in ("_bins", "ensure_local_cluster"):
        monkeypatch.setattr(local, name, touched)
    monkeypatch.setattr(local.harness, "stop", touched)
    monkeypatch.setattr(local.harness, "running", touched)
    return root


def _refused(done) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    line = done.stderr
    assert line.endswith("\n") and line.count("\n") == 1, f"not one line: {line!r}"
    return line


def test_down_of_a_directory_name_refuses_and_the_directory_survives(untouchable, tmp_path):
    """The reported case: with no local cluster running, `down /some/dir --local` removed /some/dir."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "keep.txt").write_text("mine")
    line = _refused(run_cli("down", str(victim), "--local"))
    assert repr(str(victim)) in line and "not a stack name" in line and "nothing was touched" in line
    assert (victim / "sub" / "keep.txt").read_text() == "mine"


def test_dot_dot_would_name_the_state_directory_itself_and_is_refused(untouchable):
    (untouchable / "stacks").mkdir(parents=True)
    (untouchable / "cluster").mkdir()
    (untouchable / "cluster" / "status.json").write_text("{}")
    for name in ("..", "."):
        _refused(run_cli("down", name, "--local"))
    assert (untouchable / "cluster" / "status.json").is_file() and (untouchable / "stacks").is_dir()


@pytest.mark.parametrize("name", BAD_NAMES)
def test_every_command_refuses_a_name_pulumi_would_not_take_in_one_line(untouchable, name):
    for argv in (["up", name, "--local"], ["down", name, "--local"], ["down", name],
                 ["pr-preview", "HEAD", "HEAD", "--stack", name]):
        line = _refused(run_cli(*argv))
        assert "not a stack name" in line and "letters, digits" in line, (argv, line)


def test_names_pulumi_takes_pass_the_check():
    for name in ("cross-server", "a", "dev.eu_1", "x" * 100, "...", "-a"):
        assert local.check_stack(name) == name


def test_a_symbolic_link_in_the_state_directory_is_refused_and_its_target_survives(untouchable, tmp_path):
    """stacks/ made a link to another directory: the deployment `down` would remove is someone else's."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "cross-server").mkdir(parents=True)
    (elsewhere / "cross-server" / "keep.txt").write_text("mine")
    untouchable.mkdir(parents=True)
    (untouchable / "stacks").symlink_to(elsewhere)
    line = _refused(run_cli("down", "cross-server", "--local"))
    # As root the link itself is refused (own_directories); otherwise where it resolves to (workspace).
    assert ("resolves to" in line and str(elsewhere / "cross-server") in line) or (
        f"{untouchable / 'stacks'} is a symbolic link" in line)
    assert "nothing was touched" in line
    assert (elsewhere / "cross-server" / "keep.txt").read_text() == "mine"
    (untouchable / "stacks").unlink()
    (untouchable / "stacks" / "cross-server").mkdir(parents=True)
    (untouchable / "stacks" / "cross-server" / "project").symlink_to(elsewhere)  # one level further down
    _refused(run_cli("up", "cross-server", "--local"))
    assert (elsewhere / "cross-server" / "keep.txt").is_file()


def test_down_with_no_cluster_still_removes_a_real_deployment_of_the_stack(untouchable):
    left = untouchable / "stacks" / "cross-server" / "project"
    left.mkdir(parents=True)
    done = run_cli("down", "cross-server", "--local")
    assert done.returncode == 0 and "nothing to destroy" in done.stderr
    assert not left.parent.exists() and (untouchable / "stacks").is_dir()


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_pr_preview_refuses_a_stack_file_whose_name_is_no_stack_name_before_any_cluster(untouchable, tmp_path,
                                                                                          monkeypatch):
    """The pull request names the files: `Pulumi....yaml` would be stack `..`, the workspaces' parent."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "Pulumi.cross-server.yaml").write_text("config: {}\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    (repo / "Pulumi....yaml").write_text("config: {}\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "head")
    monkeypatch.setattr(local, "_bins", lambda log: {})
    refusal = r"^a stack file of HEAD~1 or HEAD: '\.\.' is not a stack name"
    with pytest.raises(local.LocalError, match=refusal):
        local.pr_preview("HEAD~1", "HEAD", repo=repo, log=lambda m: None)
    with pytest.raises(local.LocalError, match="starts with '-'"):
        local.pr_preview("--output=/tmp/x", "HEAD", repo=repo, log=lambda m: None)


def test_up_says_in_one_line_which_keys_it_set_for_the_local_cluster_and_which_it_left_out(tmp_path):
    from tests.lab.cluster.test_pulumi_parts import LAB_FILE, local_kubeconfig

    ws = pulumi_workspace.Workspace(tmp_path / "ws", "lab", local_kubeconfig(tmp_path))
    said = []
    local_state.report_overrides("lab", LAB_FILE, ws, said.append)
    (line,) = said
    assert "\n" not in line
    assert "set to the local cluster's: kubernetes:context, kubernetes:kubeconfig" in line
    assert "left out: kubernetes:cluster, kubernetes:renderYamlToDirectory (the local kubeconfig chooses" in line
    assert "left out: dynamo-lab:hfToken, encryptionsalt (encrypted for another passphrase" in line
    assert "dynamo-lab:platform" in line
    assert "v1:" not in line and "lab.yaml" not in line  # names only, never a value
    said.clear()
    shipped = local.read_stack_file(local.ROOT / "Pulumi.cross-server.yaml")
    local_state.report_overrides("cross-server", shipped, ws, said.append)
    assert said == []  # the shipped stack already names the local cluster's context: nothing to say


def test_a_stack_file_that_is_no_yaml_map_is_one_line(tmp_path):
    bad = tmp_path / "Pulumi.x.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(local.LocalError, match=r"^Pulumi.x.yaml is not a stack file"):
        local.read_stack_file(bad)
    bad.write_text("config: [a, b]\n")
    with pytest.raises(local.LocalError, match=r"^Pulumi.x.yaml is not a stack file"):
        local.read_stack_file(bad)
    bad.write_text("config: [\n")
    with pytest.raises(local.LocalError, match=r"^Pulumi.x.yaml cannot be read as a stack file \([^\n]*\)$"):
        local.read_stack_file(bad)


def _victim(tmp_path, monkeypatch):
    """A directory a local run must never remove, and the cache the local root lies in."""
    victim = tmp_path / "victim"
    (victim / "stacks" / "foo").mkdir(parents=True)
    (victim / "stacks" / "foo" / "data").write_text("important")
    (victim / "cluster").mkdir()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(cache))
    assert local_state.local_root() == cache / "local"
    return victim, cache


AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the state directories are checked as root, who removes them")


@AS_ROOT
def test_down_refuses_a_local_root_that_is_a_link_and_removes_nothing(tmp_path, monkeypatch):
    # The resolved-path check passes when the local root itself is a link (both sides resolve
    # through it): down then removed <target>/stacks/foo, found by review.
    victim, cache = _victim(tmp_path, monkeypatch)
    (cache / "local").symlink_to(victim)
    with pytest.raises(local.LocalError, match="is a symbolic link.*nothing was touched"):
        local.down("foo", log=lambda m: None)
    assert (victim / "stacks" / "foo" / "data").read_text() == "important"
    assert (victim / "cluster").is_dir()


@AS_ROOT
@pytest.mark.parametrize("part", ["local", "local/stacks", "local/stacks/foo"])
def test_down_refuses_a_state_directory_another_user_could_change(tmp_path, monkeypatch, part):
    _, cache = _victim(tmp_path, monkeypatch)
    (cache / "local" / "stacks" / "foo").mkdir(parents=True, mode=0o755)
    for d in (cache / "local", cache / "local" / "stacks", cache / "local" / "stacks" / "foo"):
        d.chmod(0o755)
    (cache / part).chmod(0o777)
    with pytest.raises(local.LocalError, match="writable.*nothing was touched"):
        local.down("foo", log=lambda m: None)
    assert (cache / "local" / "stacks" / "foo").is_dir()


def test_down_of_a_stack_in_its_own_state_still_works(tmp_path, monkeypatch):
    _, cache = _victim(tmp_path, monkeypatch)
    (cache / "local" / "stacks" / "foo").mkdir(parents=True)
    for d in (cache / "local", cache / "local" / "stacks", cache / "local" / "stacks" / "foo"):
        d.chmod(0o755)
    assert local.down("foo", log=lambda m: None) == 0
    assert not (cache / "local" / "stacks" / "foo").exists()


def _stack_copy(tmp_path, monkeypatch, edit):
    import shutil

    for name in ("Pulumi.yaml", "Pulumi.cross-server.yaml"):
        shutil.copy(local.ROOT / name, tmp_path / name)
    stack_file = tmp_path / "Pulumi.cross-server.yaml"
    stack_file.write_text(edit(stack_file.read_text()))
    monkeypatch.setattr(local, "ROOT", tmp_path)
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(tmp_path / "cache"))
    started: list[str] = []
    monkeypatch.setattr(local, "_bins", lambda log: started.append("tools") or {})

    def ensure_local_cluster(*args):
        started.append("cluster")
        raise LocalClusterWouldStart

    monkeypatch.setattr(local, "ensure_local_cluster", ensure_local_cluster)
    return started


class LocalClusterWouldStart(Exception):
    """Raised where up --local would start the cluster: every check before it passed."""


def test_up_with_a_bad_stack_file_refuses_once_before_any_cluster_starts(tmp_path, monkeypatch):
    # It once started the cluster, left it running, and printed the error four times.
    from infra.errors import UserError

    started = _stack_copy(tmp_path, monkeypatch, lambda t: t.replace("replicas: 2", "replicas: -2", 1))
    with pytest.raises(UserError) as refused:
        local.up("cross-server", log=lambda m: None)
    assert "replicas" in str(refused.value)
    assert started == []


def test_up_checks_the_stack_as_it_deploys_it_with_the_local_overrides(tmp_path, monkeypatch):
    # kubernetes:cluster is refused in a stack file, but a local run removes it (with every key that
    # could choose another cluster): the check before the cluster starts must not refuse it.
    started = _stack_copy(tmp_path, monkeypatch,
                          lambda t: t.replace("config:\n", "config:\n  kubernetes:cluster: lab\n", 1))
    with pytest.raises(LocalClusterWouldStart):
        local.up("cross-server", log=lambda m: None)
    assert started == ["tools", "cluster"]


PULUMI_PREVIEW = """Previewing update (cross-server):
 +  kubernetes:core/v1:Namespace graph-ns create
Outputs:
    sizing        : {
        concurrency : 8
    }
Resources:
    + 12 to create
"""


def test_the_previews_outputs_are_left_out_and_its_steps_and_summary_kept():
    shown = local.without_outputs(PULUMI_PREVIEW)
    assert shown == ("Previewing update (cross-server):\n +  kubernetes:core/v1:Namespace graph-ns create\n"
                     "Resources:\n    + 12 to create\n")
    assert local.without_outputs("no outputs here\n") == "no outputs here\n"


def test_up_prints_the_outputs_once_and_says_which_warnings_are_expected(tmp_path, monkeypatch):
    import io


    _stack_copy(tmp_path, monkeypatch, lambda t: t)
    monkeypatch.setattr(local, "_bins", lambda log: {})
    handle = type("Handle", (), {"kubeconfig": tmp_path / "kubeconfig", "api": lambda self: None})()
    monkeypatch.setattr(local, "ensure_local_cluster", lambda bins, log: (handle, False))
    monkeypatch.setattr(local.standin, "GraphReady", lambda api: contextlib.nullcontext())
    ran: list[str] = []

    def invoke(action, ws, bins, **kw):
        ran.append(action)
        text = PULUMI_PREVIEW if action == "preview" else PULUMI_PREVIEW.replace("Previewing", "Updating")
        return pulumi_cli.Invocation(0, text, {})

    monkeypatch.setattr(local.pulumi_cli, "invoke", invoke)
    monkeypatch.setattr(local.local_state, "report_overrides", lambda *a: None)
    out, said = io.StringIO(), []
    assert local.up("cross-server", out=out, log=said.append) == 0
    assert ran == ["preview", "up"]  # no third run printing the outputs as JSON
    assert out.getvalue().count("Outputs:") == 1 and out.getvalue().count("Resources:") == 2
    assert any("no storage class found" in line and "Has no .status.conditions" in line for line in said)


def test_a_missing_stack_file_is_worded_as_every_other_command_words_it():
    local_says = run_cli("up", "cross-sever", "--local").stderr.strip().splitlines()[-1]
    render_says = run_cli("render", "cross-sever").stderr.strip().splitlines()[-1]
    assert local_says.startswith("error: dynamo-lab up: ") and render_says.startswith("error: dynamo-lab render: ")
    assert local_says.removeprefix("error: dynamo-lab up: ") == render_says.removeprefix("error: dynamo-lab render: ")


def test_up_refuses_a_stack_whose_gpu_class_selects_none_of_the_local_nodes_before_any_cluster_starts(
        tmp_path, monkeypatch):
    # The local cluster simulates the lab's nodes: the 8GB class moved to 80GB cards selects none,
    # and its workers and pre-pull Job would wait there until their timeouts.
    from infra.errors import UserError

    started = _stack_copy(tmp_path, monkeypatch, lambda t: t.replace("config:\n", (
        "config:\n  dynamo-lab:gpuClasses:\n    gpu-8gb: {memory: 81559Mi, effectiveTflops: 400, nodeSelector: "
        "[{key: nvidia.com/gpu.memory, operator: Gt, values: ['70000']}]}\n    gpu-24gb: {memory: 24564Mi, "
        "effectiveTflops: 40, nodeSelector: [{key: nvidia.com/gpu.memory, operator: Gt, values: ['20000']}]}\n"), 1))
    with pytest.raises(UserError) as refused:
        local.up("cross-server", log=lambda m: None)
    assert str(refused.value).startswith("gpuClasses.gpu-8gb selects none of the local cluster's nodes, which "
                                         "simulate the lab's (gpu-server, gpu-laptop)")
    assert started == []


# ---- every component from / down (issue 43): no link, nothing another user could change ----

def _linked_cache(tmp_path, monkeypatch, level: str):
    """A victim laid out as a local root would be, and DYNAMO_LAB_CACHE reaching it through a link:
    the cache directory itself (~/.cache/dynamo-lab) a link, or a directory above it (~/.cache)."""
    victim = tmp_path / "victim"
    (victim / "local" / "stacks" / "foo").mkdir(parents=True)
    (victim / "local" / "stacks" / "foo" / "data").write_text("important")
    for d in (victim, victim / "local", victim / "local" / "stacks", victim / "local" / "stacks" / "foo"):
        d.chmod(0o755)
    if level == "the cache directory":
        cache = tmp_path / "cache"
        cache.symlink_to(victim)
    else:
        (tmp_path / "home").symlink_to(tmp_path)
        cache = tmp_path / "home" / "victim"
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(cache))
    return victim, cache


@AS_ROOT
@pytest.mark.parametrize("level", ["the cache directory", "a directory above it"])
def test_down_refuses_a_cache_reached_through_a_link_and_removes_nothing(tmp_path, monkeypatch, level):
    """Before, a linked ~/.cache/dynamo-lab passed (the check followed it, and every path then resolved
    inside the link's target): `down` removed <target>/local/stacks/foo."""
    victim, cache = _linked_cache(tmp_path, monkeypatch, level)
    line = _refused(run_cli("down", "foo", "--local"))
    link = cache if level == "the cache directory" else tmp_path / "home"
    assert f"{link} is a symbolic link" in line and "nothing was touched" in line and "fix: " in line, line
    assert (victim / "local" / "stacks" / "foo" / "data").read_text() == "important"


@AS_ROOT
@pytest.mark.parametrize("how", ["group-writable", "the sudo user's"])
def test_down_refuses_a_directory_above_the_cache_another_user_could_change(tmp_path, monkeypatch, how):
    """sudo -E keeps HOME: a ~/.cache of the user's lets them swap what root removes."""
    home = tmp_path / "home"
    (home / "cache" / "local" / "stacks" / "foo").mkdir(parents=True)
    (home / "cache" / "local" / "stacks" / "foo" / "data").write_text("kept")
    for d in (home, home / "cache", home / "cache" / "local", home / "cache" / "local" / "stacks",
              home / "cache" / "local" / "stacks" / "foo"):
        d.chmod(0o755)
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(home / "cache"))
    if how == "group-writable":
        home.chmod(0o775)
        want = f"{home} is group-writable (mode 0775)"
    else:
        monkeypatch.setenv("SUDO_UID", "1000")
        os.chown(home, 1000, 1000)
        want = f"{home} is owned by uid 1000 (the user who ran sudo), not root"
    line = _refused(run_cli("down", "foo", "--local"))
    assert want in line and "nothing was touched" in line and "DYNAMO_LAB_CACHE" in line, line
    assert (home / "cache" / "local" / "stacks" / "foo" / "data").read_text() == "kept"
    # A sticky directory there (a cache under /tmp) passes: root's entries in it are root's alone.
    if how == "group-writable":
        home.chmod(0o1777)
        assert run_cli("down", "foo", "--local").returncode == 0
        assert not (home / "cache" / "local" / "stacks" / "foo").exists()


@AS_ROOT
def test_a_local_run_removes_nothing_through_a_link_and_says_so_in_one_line(tmp_path):
    victim = tmp_path / "victim"
    (victim / "foo").mkdir(parents=True)
    (victim / "foo" / "data").write_text("important")
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "stacks").symlink_to(victim)
    with pytest.raises(local_state.LocalError) as refused:
        local_state.remove(tmp_path / "local" / "stacks" / "foo")
    line = str(refused.value)
    assert line.startswith(f"not removing {tmp_path / 'local' / 'stacks' / 'foo'}: "
                           f"{tmp_path / 'local' / 'stacks'} is a symbolic link")
    assert "nothing was removed; fix: use the directory it points to" in line and "\n" not in line
    assert (victim / "foo" / "data").read_text() == "important"
