"""Where the conformance data comes from: a named directory, or a download at the pinned commit
into a cache (served here from loopback, never the internet); and, wherever it
comes from, each file must match the sha256 committed in dynamo_lab/upstream.py."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import threading
from pathlib import Path

import pytest

from dynamo_lab import upstream


def _content(name: str) -> bytes:
    return f"# {name}\nkind: test\n".encode()


@pytest.fixture
def mirror(tmp_path):
    """A loopback HTTP server laid out like the upstream repository at the pinned commit."""
    root = tmp_path / "mirror"
    for name, path in upstream.FILES.items():
        f = root / upstream.REF / path
        f.parent.mkdir(parents=True, exist_ok=True)  # two files share helm/platform/
        f.write_bytes(_content(name))
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    server.requests = requests  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    # A short poll: shutdown() waits for the loop's next look, half a second at serve_forever's default.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def pinned_to_the_test_files(monkeypatch):
    """The pins as they would be for the test files the mirror serves and the tests write."""
    monkeypatch.setattr(upstream, "SHA256", {n: hashlib.sha256(_content(n)).hexdigest() for n in upstream.FILES})


@pytest.fixture
def nowhere_but(monkeypatch, tmp_path):
    """No named directory: only the cache (in tmp_path) and the download."""
    monkeypatch.delenv("DYNAMO_LAB_UPSTREAM_DIR", raising=False)
    # Where the code once looked for a reference copy, beside the project: now no source.
    monkeypatch.setattr(upstream, "ROOT", tmp_path / "project", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _write(directory: Path) -> Path:
    for name in upstream.FILES:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(_content(name))
    return directory


def test_every_pinned_file_has_a_committed_sha256():
    assert set(upstream.SHA256) == set(upstream.FILES)
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in upstream.SHA256.values())
    assert re.fullmatch(r"[0-9a-f]{40}", upstream.REF)  # a commit: a tag can move


def test_a_download_that_differs_from_the_pin_is_refused_and_not_kept(nowhere_but, mirror, monkeypatch):
    # The mirror serves other bytes than the committed sha256 says: the first download must not be trusted.
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", mirror.url)
    with pytest.raises(upstream.UpstreamUnavailable, match="not the [0-9a-f]{64} pinned in dynamo_lab/upstream.py"):
        upstream.locate()
    assert not any(upstream.cache_dir().rglob("*.yaml"))
    with pytest.raises(upstream.UpstreamUnavailable, match="pinned in dynamo_lab/upstream.py"):
        upstream.locate()  # and again: nothing of it was cached as good


def test_downloads_at_the_pinned_commit_then_uses_the_checked_cache(nowhere_but, mirror, monkeypatch,
                                                                    pinned_to_the_test_files):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", mirror.url)
    first = upstream.locate()
    assert first.directory == upstream.cache_dir()
    assert sorted(mirror.requests) == sorted(f"/{upstream.REF}/{p}" for p in upstream.FILES.values())
    mirror.requests.clear()
    again = upstream.locate()
    assert again.directory == first.directory and mirror.requests == []  # from the cache


def test_a_cached_file_that_changed_is_refused(nowhere_but, mirror, monkeypatch, pinned_to_the_test_files):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", mirror.url)
    found = upstream.locate()
    crd = found.file("crds/nvidia.com_dynamographdeployments.yaml")
    crd.write_text(crd.read_text() + "tampered: true\n")
    with pytest.raises(upstream.UpstreamUnavailable, match="pinned in dynamo_lab/upstream.py.*delete .* to download"):
        upstream.locate()


def test_no_source_at_all_says_what_failed(nowhere_but, monkeypatch):
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", "http://127.0.0.1:9")  # discard port: refused
    with pytest.raises(upstream.UpstreamUnavailable, match="could not download http://127.0.0.1:9/"):
        upstream.locate()


def test_a_named_directory_comes_first_and_must_be_complete_and_pinned(nowhere_but, monkeypatch, tmp_path,
                                                                      pinned_to_the_test_files):
    named = _write(tmp_path / "named")
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_DIR", str(named))
    assert upstream.locate().directory == named
    (named / "helm/platform/Chart.yaml").write_text("version: 9.9.9\n")
    with pytest.raises(upstream.UpstreamUnavailable, match="Chart.yaml has sha256 .* pinned"):
        upstream.locate()
    (named / "helm/platform/values.yaml").unlink()
    with pytest.raises(upstream.UpstreamUnavailable, match="lacks some of"):
        upstream.locate()


def test_a_directory_beside_the_project_is_not_a_source(nowhere_but, monkeypatch, tmp_path,
                                                        pinned_to_the_test_files):
    # A user's checkout has nothing beside it: only the variable and the download are sources, so
    # every machine finds the files the same way (CI names its reference copy in the variable).
    _write(tmp_path / "shared" / "upstream" / "dynamo")
    monkeypatch.setenv("DYNAMO_LAB_UPSTREAM_URL", "http://127.0.0.1:9")
    with pytest.raises(upstream.UpstreamUnavailable, match="could not download http://127.0.0.1:9/"):
        upstream.locate()
