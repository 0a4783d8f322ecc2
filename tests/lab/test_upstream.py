"""Where the conformance data comes from: a named directory, the workspace copy, or a download at
the pinned tag into a cache that is checked by hash (served here from loopback, never the internet)."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

from infra.lab import upstream


@pytest.fixture
def mirror(tmp_path):
    """A loopback HTTP server laid out like the upstream repository at the pinned tag."""
    root = tmp_path / "mirror"
    for name, path in upstream.FILES.items():
        f = root / upstream.TAG / path
        f.parent.mkdir(parents=True, exist_ok=True)  # two files share helm/platform/
        f.write_text(f"# {name}\nkind: test\n")
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    server.requests = requests  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def nowhere_but(monkeypatch, tmp_path):
    """No named directory and no workspace copy: only the cache (in tmp_path) and the download."""
    monkeypatch.delenv("DYNAMO_LAB_UPSTREAM_DIR", raising=False)
    monkeypatch.setattr(upstream, "ROOT", tmp_path / "project")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_downloads_at_the_pinned_tag_then_uses_the_checked_cache(nowhere_but, mirror, monkeypatch):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", f"http://127.0.0.1:{mirror.server_address[1]}")
    first = upstream.locate()
    assert first.directory == upstream.cache_dir()
    assert sorted(mirror.requests) == sorted(f"/{upstream.TAG}/{p}" for p in upstream.FILES.values())
    sums = (first.directory / upstream.SUMS).read_text()
    assert all(name in sums for name in upstream.FILES)
    mirror.requests.clear()
    again = upstream.locate()
    assert again.directory == first.directory and mirror.requests == []  # from the cache


def test_a_cached_file_that_changed_is_refused(nowhere_but, mirror, monkeypatch):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", f"http://127.0.0.1:{mirror.server_address[1]}")
    found = upstream.locate()
    crd = found.file("crds/nvidia.com_dynamographdeployments.yaml")
    crd.write_text(crd.read_text() + "tampered: true\n")
    with pytest.raises(upstream.UpstreamUnavailable, match="no longer matches the sha256 recorded"):
        upstream.locate()


def test_no_source_at_all_says_what_failed(nowhere_but, monkeypatch):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", "http://127.0.0.1:9")  # discard port: refused
    with pytest.raises(upstream.UpstreamUnavailable, match="could not download http://127.0.0.1:9/"):
        upstream.locate()


def test_a_named_directory_comes_first_and_must_be_complete(nowhere_but, monkeypatch, tmp_path):
    named = tmp_path / "named"
    for name in upstream.FILES:
        (named / name).parent.mkdir(parents=True, exist_ok=True)
        (named / name).write_text("kind: test\n")
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_DIR", str(named))
    assert upstream.locate().directory == named
    (named / "helm/platform/values.yaml").unlink()
    with pytest.raises(upstream.UpstreamUnavailable, match="lacks some of"):
        upstream.locate()


def test_the_workspace_copy_is_used_when_present(nowhere_but, tmp_path):
    workspace = tmp_path / "shared" / "upstream" / "dynamo"
    for name in upstream.FILES:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("kind: test\n")
    assert upstream.locate().directory == workspace
    assert isinstance(upstream.locate().directory, Path)
