"""cluster-tools' pure parts: where a tool is cached, when a stamp is reused, found vs build, and
what root refuses to run."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

from dynamo_lab.local_cluster import tool_build, tool_trust, tools
from dynamo_lab.local_cluster.tools import BY_NAME, ToolChoice, decide

GO_SUM = "example.com/m v1.0.0 h1:abc=\n"


def _exe(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _decide(tool, tmp_path, env=None, which=lambda _: None, says="", stamp=None, go_sum=GO_SUM,
            version_of=None, lstat=os.lstat, trusted_uid=None) -> ToolChoice:
    return decide(tool, env or {}, tmp_path / "cache", go_sum, which, version_of or (lambda _b, _t: says),
                  lambda _e: stamp, digest=tool_trust.file_sha256, lstat=lstat, trusted_uid=trusted_uid)


# As root, everything must be owned by root; the files a test makes are owned by whoever runs it, so
# "root" in these tests is that uid (the rule is the same, and it runs without root too).
ME = os.geteuid()


def _cached_etcd(tmp_path) -> tuple[Path, dict]:
    """An etcd cache entry as a build leaves it: its binary, and the stamp recording its sha256."""
    etcd = BY_NAME["etcd"]
    binary = _exe(tmp_path / "cache" / "etcd-v3.6.16" / "bin" / "etcd", "#!/bin/sh\necho etcd\n")
    for d in (binary.parent, binary.parent.parent, binary.parent.parent.parent):
        d.chmod(0o755)
    binary.chmod(0o755)
    stamp = tool_trust.stamp_for(etcd, GO_SUM, "go1.26.8", 1.0, tool_trust.seal(binary.parent.parent))
    (binary.parent.parent / tool_trust.STAMP).write_text(json.dumps(stamp))
    (binary.parent.parent / tool_trust.STAMP).chmod(0o644)
    return binary, stamp


def _owned_by_another(target: Path):
    """An lstat that says `target` belongs to another uid (no chown needed, so no root needed)."""
    def lstat(path):
        st = os.lstat(path)
        if Path(path) == target:
            return types.SimpleNamespace(st_mode=st.st_mode, st_uid=ME + 1)
        return st
    return lstat


def test_cache_is_outside_the_clone_and_keyed_by_version(tmp_path):
    assert tools.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/dynamo-lab/cluster-tools")
    assert tools.cache_root({"HOME": "/h"}) == Path("/h/.cache/dynamo-lab/cluster-tools")
    assert tools.cache_root({"DYNAMO_LAB_CACHE": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c/cluster-tools")
    assert tool_trust.entry_dir(BY_NAME["etcd"], Path("/r")) == Path("/r/etcd-v3.6.16")
    assert not str(tools.cache_root(dict(os.environ))).startswith(str(tools.ROOT) + os.sep)


def test_pins():
    assert BY_NAME["kubernetes"].version.startswith("v1.34.")
    assert BY_NAME["etcd"].version.startswith("v3.6.")
    assert BY_NAME["kwok"].version == "v0.8.0"
    assert BY_NAME["pulumi"].version == "v3.274.1"
    k8s = " ".join(BY_NAME["kubernetes"].ldflags)
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.34.4" in k8s and f"-X {pkg}.gitMinor=34" in k8s
    assert "version.Version=v3.274.1" in " ".join(BY_NAME["pulumi"].ldflags)


def test_every_buildable_tool_has_a_wrapper_module_that_requires_it():
    for tool in tools.TOOLS:
        if tool.unavailable:
            continue
        mod = (tool_build.WRAPPERS / tool.name / "go.mod").read_text()
        assert f"{tool.module} {tool.module_version}" in mod, tool.name
        assert all(f"{p}" in mod for p in tool.packages), tool.name
        assert (tool_build.WRAPPERS / tool.name / "go.sum").is_file(), tool.name


def test_stamp_reused_only_for_the_same_version_and_go_sum(tmp_path):
    etcd = BY_NAME["etcd"]
    binary, stamp = _cached_etcd(tmp_path)
    bin_dir, digest = binary.parent, tool_trust.file_sha256
    assert tool_trust.stamp_matches(etcd, stamp, GO_SUM, bin_dir, digest)
    assert not tool_trust.stamp_matches(etcd, stamp, GO_SUM + "x y h1:z=\n", bin_dir, digest)
    assert not tool_trust.stamp_matches(etcd, None, GO_SUM, bin_dir, digest)
    newer = dataclasses.replace(etcd, version="v3.6.17", module_version="v3.6.17")
    assert not tool_trust.stamp_matches(newer, stamp, GO_SUM, bin_dir, digest)
    assert not tool_trust.stamp_matches(etcd, {**stamp, "format": tool_trust.STAMP_FORMAT + 1}, GO_SUM, bin_dir, digest)
    # A stamp naming a path instead of a file of bin/ is not followed.
    assert not tool_trust.stamp_matches(etcd, {**stamp, "sha256": {**stamp["sha256"], "../x": "0" * 64}},
                                   GO_SUM, bin_dir, digest)


def test_a_build_records_each_bin_file_and_leaves_nothing_others_can_write(tmp_path):
    """A umask of 002 leaves go build's output group-writable; root would then refuse it."""
    work = tmp_path / "work"
    _exe(work / "bin" / "pulumi", "binary").chmod(0o775)
    _exe(work / "bin" / "pulumi-language-python-exec", "script").chmod(0o777)
    (work / "bin").chmod(0o775)
    sums = tool_trust.seal(work)
    assert sums == {"pulumi": tool_trust.file_sha256(work / "bin" / "pulumi"),
                    "pulumi-language-python-exec": tool_trust.file_sha256(work / "bin" / "pulumi-language-python-exec")}
    assert all(len(h) == 64 for h in sums.values()) and sums["pulumi"] != sums["pulumi-language-python-exec"]
    for path in (work, work / "bin", *(work / "bin").iterdir()):
        assert os.lstat(path).st_mode & 0o022 == 0, path


def test_build_when_nothing_is_there(tmp_path):
    d = _decide(BY_NAME["etcd"], tmp_path)
    assert d.action == "build" and d.bin_dir == tmp_path / "cache" / "etcd-v3.6.16" / "bin"


def test_cached_when_the_stamp_matches_and_the_binaries_are_there(tmp_path):
    etcd = BY_NAME["etcd"]
    binary, stamp = _cached_etcd(tmp_path)
    assert _decide(etcd, tmp_path, stamp=stamp).action == "cached"
    assert _decide(etcd, tmp_path, stamp=stamp, trusted_uid=ME).action == "cached"     # as root, too
    assert _decide(etcd, tmp_path, stamp=stamp, go_sum=GO_SUM + "\n").action == "build"
    binary.unlink()
    d = _decide(etcd, tmp_path, stamp=stamp)                                          # stamp but no binary
    assert d.action == "build" and f"{binary} is missing" in d.detail


def test_a_binary_changed_by_one_byte_is_not_run_but_rebuilt(tmp_path):
    binary, stamp = _cached_etcd(tmp_path)
    data = bytearray(binary.read_bytes())
    data[-2] ^= 1
    binary.write_bytes(bytes(data))
    for uid in (None, ME):
        d = _decide(BY_NAME["etcd"], tmp_path, stamp=stamp, trusted_uid=uid)
        assert d.action == "build", d
        assert f"{binary} has sha256 {tool_trust.file_sha256(binary)[:16]}" in d.detail
        assert f"not the {stamp['sha256']['etcd'][:16]}" in d.detail and "\n" not in d.detail


def test_an_old_format_stamp_is_rebuilt_not_trusted(tmp_path):
    """Format 1, as cluster-tools wrote it before the stamp recorded sha256s: nothing in it says the
    binaries are what was built."""
    binary, _ = _cached_etcd(tmp_path)
    etcd = BY_NAME["etcd"]
    old = {"format": 1, "tool": "etcd", "version": etcd.version,
           "module": f"{etcd.module}@{etcd.module_version}", "go_sum_sha256": tool_trust.go_sum_digest(GO_SUM),
           "binaries": ["etcd"], "go": "go1.26.8", "built_s": 26.0}
    d = _decide(etcd, tmp_path, stamp=old, trusted_uid=ME)
    assert d.action == "build" and "stamp is format 1, not" in d.detail


@pytest.mark.parametrize("part", ["root", "entry", "bin", "binary", "stamp"])
def test_as_root_a_cache_path_another_user_can_write_is_refused(tmp_path, part):
    binary, stamp = _cached_etcd(tmp_path)
    path = {"root": tmp_path / "cache", "entry": binary.parent.parent, "bin": binary.parent, "binary": binary,
            "stamp": binary.parent.parent / tool_trust.STAMP}[part]
    path.chmod(stat.S_IMODE(path.stat().st_mode) | (0o002 if part == "stamp" else 0o020))
    d = _decide(BY_NAME["etcd"], tmp_path, stamp=stamp, trusted_uid=ME)
    assert d.action == "refused" and d.bin_dir is None, d
    assert f"{path} is {'other' if part == 'stamp' else 'group'}-writable" in d.detail
    assert f"fix: chmod go-w {path}" in d.detail and "\n" not in d.detail
    # Not root: the user's own cache, their own umask.
    assert _decide(BY_NAME["etcd"], tmp_path, stamp=stamp).action == "cached"


@pytest.mark.parametrize("part", ["root", "entry", "binary"])
def test_as_root_a_cache_path_owned_by_another_user_is_refused(tmp_path, part):
    binary, stamp = _cached_etcd(tmp_path)
    entry = binary.parent.parent
    path = {"root": tmp_path / "cache", "entry": entry, "binary": binary}[part]
    d = _decide(BY_NAME["etcd"], tmp_path, stamp=stamp, trusted_uid=ME, lstat=_owned_by_another(path))
    assert d.action == "refused", d
    assert f"{path} is owned by uid {ME + 1}" in d.detail
    assert (f"chown {tool_trust._who(ME)} {path}" if part == "root" else f"fix: rm -rf {entry}") in d.detail


def test_as_root_a_symlink_in_the_cache_is_refused(tmp_path):
    binary, stamp = _cached_etcd(tmp_path)
    real = _exe(tmp_path / "elsewhere" / "etcd", binary.read_text())
    binary.unlink()
    binary.symlink_to(real)      # same bytes, so the sha256 matches: the link itself is refused
    d = _decide(BY_NAME["etcd"], tmp_path, stamp=stamp, trusted_uid=ME)
    assert d.action == "refused" and f"{binary} is not a regular file" in d.detail


def test_refused_by_the_command_exits_2_with_the_fix_and_builds_nothing(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "c"
    (cache / "cluster-tools").mkdir(parents=True)
    (cache / "cluster-tools").chmod(0o777)
    line = _refused_by_the_command(cache, monkeypatch, capsys)
    assert f"chmod go-w {cache / 'cluster-tools'}" in line
    assert list((cache / "cluster-tools").iterdir()) == []


def _refused_by_the_command(cache: Path, monkeypatch, capsys) -> str:
    """`dev.py cluster-tools etcd` as root with DYNAMO_LAB_CACHE=`cache`: exit 2, one line, no build."""
    monkeypatch.setenv("DYNAMO_LAB_CACHE", str(cache))
    for var in ("DYNAMO_LAB_K8S_BIN", "KUBEBUILDER_ASSETS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tools, "_trusted_uid", lambda: ME)      # as root
    monkeypatch.setattr(tools, "build", lambda *a, **k: pytest.fail("built where others could change it"))
    assert tools.main(["etcd"]) == 2
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    assert len(lines) == 1 and "REFUSED" in lines[0] and "Traceback" not in out.err, lines
    return lines[0]


def test_user_k8s_dir_at_the_right_version_is_used(tmp_path):
    assets = tmp_path / "assets"
    for b in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        _exe(assets / b)
    env = {"KUBEBUILDER_ASSETS": str(assets)}
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, says="Kubernetes v1.34.1")
    assert (d.action, d.bin_dir) == ("found", assets)
    assert _decide(BY_NAME["etcd"], tmp_path, env=env, says="etcd Version: 3.6.5\nGit SHA: x").action == "found"
    # DYNAMO_LAB_K8S_BIN wins over KUBEBUILDER_ASSETS.
    assert tool_trust.user_dir({"DYNAMO_LAB_K8S_BIN": "/a", "KUBEBUILDER_ASSETS": "/b"}) == Path("/a")


def test_user_binaries_at_another_version_are_not_used(tmp_path):
    assets = tmp_path / "assets"
    for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        _exe(assets / b)
    env = {"DYNAMO_LAB_K8S_BIN": str(assets)}
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, says="Kubernetes v1.33.2")
    assert d.action == "build" and "v1.33.2" in d.detail
    assert _decide(BY_NAME["etcd"], tmp_path, env=env, says="etcd Version: 3.4.23").action == "build"


def _k8s_assets(assets: Path):
    """A directory of Kubernetes test binaries only its owner can write, as DYNAMO_LAB_K8S_BIN, and a
    version probe that records each binary it is asked to run."""
    for b in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        _exe(assets / b).chmod(0o755)
    assets.chmod(0o755)
    ran: list[Path] = []

    def version_of(b, _t):
        ran.append(b)
        return "Kubernetes v1.34.1"

    return {"DYNAMO_LAB_K8S_BIN": str(assets)}, ran, version_of


def test_as_root_user_binaries_another_user_can_write_are_not_even_run(tmp_path):
    """Asking a binary its version runs it: as root, one that someone else could have replaced is
    not run at all; the pinned one is built instead, and the note says why and how to fix it."""
    assets = tmp_path / "assets"
    env, ran, version_of = _k8s_assets(assets)
    assets.chmod(0o775)
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, version_of=version_of, trusted_uid=ME)
    assert (d.action, ran) == ("build", [])
    assert f"{assets} is group-writable" in d.detail and f"chmod go-w {assets}" in d.detail
    assets.chmod(0o755)
    # A binary owned by another user, or reached through a link to one.
    other = _exe(tmp_path / "theirs" / "kube-apiserver")
    (assets / "kube-apiserver").unlink()
    (assets / "kube-apiserver").symlink_to(other)
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, version_of=version_of, trusted_uid=ME,
                lstat=_owned_by_another(other))
    assert (d.action, ran) == ("build", []) and f"{other} is owned by uid {ME + 1}" in d.detail
    # What only root can write is used as before.
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, version_of=version_of, trusted_uid=ME)
    assert d.action == "found" and len(ran) == 3


def test_as_root_pulumi_on_path_in_a_directory_others_can_write_is_not_run(tmp_path):
    pulumi = _exe(tmp_path / "p" / "pulumi")
    pulumi.chmod(0o755)
    (tmp_path / "p").chmod(0o757)
    which = {"pulumi": str(pulumi)}.get
    d = _decide(BY_NAME["pulumi"], tmp_path, which=which, says="v3.274.1", trusted_uid=ME)
    assert d.action == "build" and f"{tmp_path / 'p'} is other-writable" in d.detail
    assert _decide(BY_NAME["pulumi"], tmp_path, which=which, says="v3.274.1").action == "found"


def test_user_dir_missing_a_binary_builds_the_set(tmp_path):
    assets = tmp_path / "assets"
    _exe(assets / "kube-apiserver")           # a kubebuilder layout: no controller manager, no scheduler
    d = _decide(BY_NAME["kubernetes"], tmp_path, env={"KUBEBUILDER_ASSETS": str(assets)}, says="Kubernetes v1.34.1")
    assert d.action == "build" and "kube-scheduler" in d.detail


def test_pulumi_on_path(tmp_path):
    pulumi = _exe(tmp_path / "p" / "pulumi")
    which = {"pulumi": str(pulumi)}.get
    assert _decide(BY_NAME["pulumi"], tmp_path, which=which, says="v3.274.1").action == "found"
    assert _decide(BY_NAME["pulumi"], tmp_path, which=which, says="v3.274.10").action == "build"
    assert _decide(BY_NAME["pulumi"], tmp_path, which=which, says="v3.270.0").action == "build"


@pytest.mark.parametrize("name", ["pulumi-language-python", "dynamo-operator"])
def test_tools_the_proxy_does_not_serve_are_unavailable_not_substituted(tmp_path, name):
    d = _decide(BY_NAME[name], tmp_path)
    assert d.action == "unavailable" and d.bin_dir is None and "proxy" in d.detail


def test_build_command():
    cmd = tool_build.build_command(BY_NAME["kubernetes"], Path("/o"))
    assert cmd[:4] == ["go", "build", "-trimpath", "-pgo=off"] and cmd[-4] == "/o" + os.sep
    # No debug information is made only to be stripped: -w at the link, none from the compiler.
    assert "-gcflags=all=-dwarf=false" in cmd and cmd[cmd.index("-ldflags") + 1].startswith("-s -w")
    assert tool_build.build_command(BY_NAME["etcd"], Path("/o"))[-2:] == ["/o/etcd", "go.etcd.io/etcd/server/v3"]
    env = tool_build.build_env({"GOFLAGS": "-mod=mod -buildvcs=false", "PATH": "/bin"})
    assert env["CGO_ENABLED"] == "0" and "-mod=readonly" in env["GOFLAGS"] and "-mod=mod" not in env["GOFLAGS"]


def test_wrappers_are_in_build_order():
    assert [t.name for t in sorted(tools.TOOLS, key=lambda t: t.order)][:2] == ["kubernetes", "etcd"]


def test_the_provider_built_is_the_release_the_project_pins():
    """What the cluster tier runs is what a user's `pulumi up` downloads: the provider release equals
    pyproject's pulumi-kubernetes pin, and the wrapper requires the SDK of that same release."""
    import tomllib
    provider = BY_NAME["pulumi-resource-kubernetes"]
    deps = tomllib.loads((tools.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"pulumi-kubernetes=={provider.version.lstrip('v')}" in deps
    assert f"version.Version={provider.version.lstrip('v')}" in " ".join(provider.ldflags)
    go_mod = (tool_build.WRAPPERS / provider.name / "go.mod").read_text()
    assert f"github.com/pulumi/pulumi-kubernetes/sdk/v4 {provider.version} " in go_mod
    assert f"replace {provider.module} => ./provider" in go_mod
    assert provider.source_sum.startswith("h1:") and not provider.unavailable


def test_embed_files_are_what_the_providers_generate_step_writes(tmp_path):
    (tmp_path / "schema.json").write_text('{\n  "name": "kubernetes",\n  "resources": {"a": 1}\n}\n')
    (tmp_path / "terraform-mapping.json").write_text('{\n  "x": [1, 2]\n}\n')
    tool_build.embed_files(tmp_path, "4.25.0")
    assert (tmp_path / "schema-embed.json").read_text() == \
        '{"name":"kubernetes","resources":{"a":1},"version":"4.25.0"}'
    assert (tmp_path / "terraform-mapping-embed.json").read_text() == '{"x":[1,2]}'


def test_a_provider_source_whose_hash_differs_is_not_built(tmp_path, monkeypatch):
    provider = dataclasses.replace(BY_NAME["pulumi-resource-kubernetes"], source_sum="h1:other=")

    class Done:
        returncode, stderr = 0, ""
        stdout = '{"Dir": "/nowhere", "Sum": "h1:j2bphCf7c2YhnBrhwht2f3TNRRgcMImltUlAgzxr9H4="}'

    monkeypatch.setattr(tool_build.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(RuntimeError, match="not the pinned h1:other="):
        tool_build._before_build(provider, "go", tmp_path, {})
    assert list(tmp_path.iterdir()) == []


def test_a_long_build_says_it_is_alive_and_how_far_it_is(tmp_path):
    # A cold kube-apiserver build printed nothing for 9 minutes; go build -v writes a line per
    # package, which the heartbeat counts.
    script = ("import sys, time\n"
              "for i in range(6):\n"
              "    print(f'k8s.io/pkg{i}', file=sys.stderr, flush=True)\n"
              "    time.sleep(0.1)\n")
    said: list[str] = []
    rc = tool_build.run_build([sys.executable, "-c", script], tmp_path, os.environ, tmp_path / "build.log", said.append,
                         heartbeat_s=0.15)
    assert rc == 0
    assert said and all(s.startswith("still building: 0 min 0") for s in said), said
    counts = [int(s.rsplit(", ", 1)[1].split()[0]) for s in said]
    assert counts == sorted(counts) and 0 < counts[-1] <= 6
    assert (tmp_path / "build.log").read_text().count("k8s.io/pkg") == 6


def test_the_build_asks_go_for_a_line_per_package():
    assert "-v" in tool_build.build_command(BY_NAME["kubernetes"], Path("/o"))


def test_what_will_be_built_and_how_long_a_cold_build_took_is_said_up_front(tmp_path, monkeypatch):
    monkeypatch.setattr(tools, "build", lambda tool, root, env, log: (_ for _ in ()).throw(RuntimeError("no go")))
    said: list[str] = []
    tools.ensure(["etcd"], env={**os.environ, "DYNAMO_LAB_CACHE": str(tmp_path), "PATH": ""}, log=said.append)
    assert said[0].startswith("1 of 1 tools to build from Go modules (etcd), 1 at once: a cold build of all five "
                              "one at a time took about 22")


# ---- every directory from / down (issue 43): what runs as root trusts the paths above its own ----

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root, whom the rule is for")


@pytest.mark.parametrize("how", ["group-writable", "a symbolic link",
                                 pytest.param("the sudo user's", marks=AS_ROOT)])
def test_as_root_a_directory_above_the_cache_another_user_could_change_is_refused(tmp_path, monkeypatch, how):
    """sudo -E keeps HOME, so the cache is in the user's ~/.cache: its owner can rename the cache away
    and put theirs in its place between the check and the exec. Every directory above is checked."""
    home = tmp_path / "home"
    binary, stamp = _cached_etcd(home)              # home/cache/etcd-v3.6.16/bin/etcd
    home.chmod(0o755)
    if how == "group-writable":
        home.chmod(0o775)
        want = f"{home} is group-writable (mode 0775), above the cache {home / 'cache'}"
    elif how == "a symbolic link":
        home.rename(tmp_path / "real")
        home.symlink_to(tmp_path / "real")
        want = f"{home} is a symbolic link"
    else:
        monkeypatch.setenv("SUDO_UID", "1000")
        os.chown(home, 1000, 1000)
        want = f"{home} is owned by uid 1000 (the user who ran sudo), not root"
    d = _decide(BY_NAME["etcd"], home, stamp=stamp, trusted_uid=ME)
    assert d.action == "refused" and d.bin_dir is None, d
    assert want in d.detail and "set DYNAMO_LAB_CACHE to a directory only" in d.detail and "\n" not in d.detail
    # Not root: the user's own directories, their own business.
    assert _decide(BY_NAME["etcd"], home, stamp=stamp).action == "cached"


def test_as_root_a_sticky_directory_above_the_cache_is_trusted(tmp_path):
    """/tmp (1777): others can make entries in it, but can neither rename nor remove root's."""
    binary, stamp = _cached_etcd(tmp_path / "tmp")
    (tmp_path / "tmp").chmod(0o1777)
    assert _decide(BY_NAME["etcd"], tmp_path / "tmp", stamp=stamp, trusted_uid=ME).action == "cached"


def test_as_root_user_binaries_below_a_directory_others_can_write_are_not_even_run(tmp_path):
    opt = tmp_path / "opt"
    env, ran, version_of = _k8s_assets(opt / "assets")
    opt.chmod(0o777)
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, version_of=version_of, trusted_uid=ME)
    assert (d.action, ran) == ("build", []) and f"{opt} is group- and other-writable" in d.detail
    assert f"chmod go-w {opt}" in d.detail
    opt.chmod(0o755)
    assert _decide(BY_NAME["kubernetes"], tmp_path, env=env, version_of=version_of, trusted_uid=ME).action == "found"


def test_a_cached_binary_swapped_after_the_check_is_not_run(tmp_path):
    """Checked, then replaced (a new file renamed into its place): asking it its version, as every
    run of a cached binary does, goes through root_paths.open_binary and refuses it."""
    marker = tmp_path / "swapped-ran"
    etcd = BY_NAME["etcd"]
    binary, stamp = _cached_etcd(tmp_path)
    assert _decide(etcd, tmp_path, stamp=stamp, trusted_uid=ME).action == "cached"
    swap = _exe(tmp_path / "swap", f"#!/bin/sh\ntouch {marker}\n")
    swap.chmod(0o755)
    swap.rename(binary)
    said = tool_trust.version_of(binary, etcd)
    assert said.startswith(f"(not run: {binary} has sha256") and "not the" in said, said
    assert not marker.exists()


def test_refused_above_the_cache_by_the_command_exits_2_in_one_line_and_builds_nothing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "c").mkdir(parents=True)
    home.chmod(0o777)
    line = _refused_by_the_command(home / "c", monkeypatch, capsys)
    assert f"fix: chmod go-w {home}" in line and "DYNAMO_LAB_CACHE" in line
    assert not (home / "c" / "cluster-tools").exists()


def test_two_builds_run_at_once_most_valuable_first_and_a_failed_one_stops_no_other(tmp_path, monkeypatch):
    # A cold run's builds are most of it on 2 cores: two at once (tools.BUILDS_AT_ONCE), so one's
    # downloads and link use what the other's compiles leave. Never more (a kube-apiserver link
    # takes GBs of memory); the result keeps the tools' order whatever order they end in.
    import threading
    import time

    names = ["kubernetes", "etcd", "kwok", "pulumi", "pulumi-resource-kubernetes"]
    monkeypatch.setattr(tools, "decide",
                        lambda tool, env, root, *a, **k: ToolChoice(tool, "build", root / tool.key / "bin"))
    lock, running, most, started = threading.Lock(), set(), [0], []
    both = threading.Barrier(2, timeout=10)

    def build(tool, root, env, log):
        with lock:
            running.add(tool.name)
            started.append(tool.name)
            most[0] = max(most[0], len(running))
        if tool.name in ("kubernetes", "etcd"):
            both.wait()  # both first builds must run at the same time, or this times out
        time.sleep(0.05)
        with lock:
            running.discard(tool.name)
        if tool.name == "kwok":
            raise RuntimeError("go build failed (exit 1)")
        return 1.0

    monkeypatch.setattr(tools, "build", build)
    monkeypatch.setattr(tools, "version_of", lambda binary, tool: "v")
    said = []
    results = tools.ensure(names, env={"DYNAMO_LAB_CACHE": str(tmp_path)}, log=said.append)
    assert list(results) == names
    assert {n: d.action for n, d in results.items()} == {**{n: "built" for n in names}, "kwok": "failed"}
    assert most[0] == tools.BUILDS_AT_ONCE == 2
    assert started[:2] == ["kubernetes", "etcd"] or started[:2] == ["etcd", "kubernetes"]
    assert started.index("pulumi") < started.index("pulumi-resource-kubernetes")
    assert any(line.startswith("kwok v0.8.0: FAILED after") for line in said)
    assert "5 of 5 tools to build from Go modules" in said[0] and "2 at once" in said[0]


def test_each_line_of_the_command_is_written_whole_while_two_builds_say_theirs(monkeypatch):
    # Two builds log from two threads (BUILDS_AT_ONCE), their heartbeats due at the same moments:
    # print writes a line and its newline in two writes, between which the other thread's line can
    # land ("cluster-tools: a...cluster-tools: b...\n\n"). One write a line keeps each line whole.
    writes: list[str] = []

    class Out:
        def write(self, s):
            writes.append(s)
            return len(s)

        def flush(self):
            pass

    def ensure(names, log):
        log("etcd v3.6.16: still building: 0 min 30 s, 12 packages compiled")
        return {}

    monkeypatch.setattr(tools, "ensure", ensure)
    monkeypatch.setattr(sys, "stdout", Out())
    assert tools.main([]) == 0
    assert writes == ["cluster-tools: etcd v3.6.16: still building: 0 min 30 s, 12 packages compiled\n"]
