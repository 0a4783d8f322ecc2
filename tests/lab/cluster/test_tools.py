"""cluster-tools' pure parts: where a tool is cached, when a stamp is reused, found vs build."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from infra.lab.cluster import tools
from infra.lab.cluster.tools import BY_NAME, Decision, decide

GO_SUM = "example.com/m v1.0.0 h1:abc=\n"


def _exe(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _decide(tool, tmp_path, env=None, which=lambda _: None, says="", stamp=None, go_sum=GO_SUM) -> Decision:
    return decide(tool, env or {}, tmp_path / "cache", go_sum, which, lambda _b, _t: says, lambda _e: stamp)


def test_cache_is_outside_the_clone_and_keyed_by_version(tmp_path):
    assert tools.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/dynamo-lab/cluster-tools")
    assert tools.cache_root({"HOME": "/h"}) == Path("/h/.cache/dynamo-lab/cluster-tools")
    assert tools.cache_root({"DYNAMO_LAB_CACHE": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c/cluster-tools")
    assert tools.entry_dir(BY_NAME["etcd"], Path("/r")) == Path("/r/etcd-v3.6.16")
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
        mod = (tools.WRAPPERS / tool.name / "go.mod").read_text()
        assert f"{tool.module} {tool.module_version}" in mod, tool.name
        assert all(f"{p}" in mod for p in tool.packages), tool.name
        assert (tools.WRAPPERS / tool.name / "go.sum").is_file(), tool.name


def test_stamp_reused_only_for_the_same_version_and_go_sum():
    etcd = BY_NAME["etcd"]
    stamp = tools.stamp_for(etcd, GO_SUM, "go1.26.8", 12.0)
    assert tools.stamp_matches(etcd, stamp, GO_SUM)
    assert not tools.stamp_matches(etcd, stamp, GO_SUM + "x y h1:z=\n")
    assert not tools.stamp_matches(etcd, None, GO_SUM)
    newer = dataclasses.replace(etcd, version="v3.6.17", module_version="v3.6.17")
    assert not tools.stamp_matches(newer, stamp, GO_SUM)
    assert not tools.stamp_matches(etcd, {**stamp, "format": tools.STAMP_FORMAT + 1}, GO_SUM)


def test_build_when_nothing_is_there(tmp_path):
    d = _decide(BY_NAME["etcd"], tmp_path)
    assert d.action == "build" and d.bin_dir == tmp_path / "cache" / "etcd-v3.6.16" / "bin"


def test_cached_when_the_stamp_matches_and_the_binaries_are_there(tmp_path):
    etcd = BY_NAME["etcd"]
    stamp = tools.stamp_for(etcd, GO_SUM, "go1.26.8", 1.0)
    assert _decide(etcd, tmp_path, stamp=stamp).action == "build"       # stamp but no binary
    _exe(tmp_path / "cache" / "etcd-v3.6.16" / "bin" / "etcd")
    assert _decide(etcd, tmp_path, stamp=stamp).action == "cached"
    assert _decide(etcd, tmp_path, stamp=stamp, go_sum=GO_SUM + "\n").action == "build"


def test_user_k8s_dir_at_the_right_version_is_used(tmp_path):
    assets = tmp_path / "assets"
    for b in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        _exe(assets / b)
    env = {"KUBEBUILDER_ASSETS": str(assets)}
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, says="Kubernetes v1.34.1")
    assert (d.action, d.bin_dir) == ("found", assets)
    assert _decide(BY_NAME["etcd"], tmp_path, env=env, says="etcd Version: 3.6.5\nGit SHA: x").action == "found"
    # DYNAMO_LAB_K8S_BIN wins over KUBEBUILDER_ASSETS.
    assert tools.user_dir({"DYNAMO_LAB_K8S_BIN": "/a", "KUBEBUILDER_ASSETS": "/b"}) == Path("/a")


def test_user_binaries_at_another_version_are_not_used(tmp_path):
    assets = tmp_path / "assets"
    for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        _exe(assets / b)
    env = {"DYNAMO_LAB_K8S_BIN": str(assets)}
    d = _decide(BY_NAME["kubernetes"], tmp_path, env=env, says="Kubernetes v1.33.2")
    assert d.action == "build" and "v1.33.2" in d.detail
    assert _decide(BY_NAME["etcd"], tmp_path, env=env, says="etcd Version: 3.4.23").action == "build"


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
    cmd = tools.build_command(BY_NAME["kubernetes"], Path("/o"))
    assert cmd[:4] == ["go", "build", "-trimpath", "-pgo=off"] and cmd[-4] == "/o" + os.sep
    assert tools.build_command(BY_NAME["etcd"], Path("/o"))[-2:] == ["/o/etcd", "go.etcd.io/etcd/server/v3"]
    env = tools.build_env({"GOFLAGS": "-mod=mod -buildvcs=false", "PATH": "/bin"})
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
    go_mod = (tools.WRAPPERS / provider.name / "go.mod").read_text()
    assert f"github.com/pulumi/pulumi-kubernetes/sdk/v4 {provider.version} " in go_mod
    assert f"replace {provider.module} => ./provider" in go_mod
    assert provider.source_sum.startswith("h1:") and not provider.unavailable


def test_embed_files_are_what_the_providers_generate_step_writes(tmp_path):
    (tmp_path / "schema.json").write_text('{\n  "name": "kubernetes",\n  "resources": {"a": 1}\n}\n')
    (tmp_path / "terraform-mapping.json").write_text('{\n  "x": [1, 2]\n}\n')
    tools.embed_files(tmp_path, "4.25.0")
    assert (tmp_path / "schema-embed.json").read_text() == \
        '{"name":"kubernetes","resources":{"a":1},"version":"4.25.0"}'
    assert (tmp_path / "terraform-mapping-embed.json").read_text() == '{"x":[1,2]}'


def test_a_provider_source_whose_hash_differs_is_not_built(tmp_path, monkeypatch):
    provider = dataclasses.replace(BY_NAME["pulumi-resource-kubernetes"], source_sum="h1:other=")

    class Done:
        returncode, stderr = 0, ""
        stdout = '{"Dir": "/nowhere", "Sum": "h1:j2bphCf7c2YhnBrhwht2f3TNRRgcMImltUlAgzxr9H4="}'

    monkeypatch.setattr(tools.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(RuntimeError, match="not the pinned h1:other="):
        tools._before_build(provider, "go", tmp_path, {})
    assert list(tmp_path.iterdir()) == []
