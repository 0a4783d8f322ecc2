"""Talking to the local cluster's API server: requests with the admin token (warnings kept), waiting
until a check passes, and applying CRD files. `LocalClusterError` is every failure of the cluster tier's
harness, in words.

Standard library only, but for PyYAML when CRD files are applied.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional, Sequence


class LocalClusterError(RuntimeError):
    pass


# The query that makes the API server refuse a field it does not know (a misspelling, a field of
# another version) instead of dropping it with a warning, its default ("Warn").
STRICT = "fieldValidation=Strict"
_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def warning_texts(values: Sequence[str]) -> list[str]:
    """The texts of `Warning` response headers (RFC 7234: `299 - "text"`, quotes escaped)."""
    out = []
    for value in values:
        m = _WARNING.match(value)
        out.append(re.sub(r"\\(.)", r"\1", m.group(1)) if m else value.strip())
    return out


class Api:
    def __init__(self, server: str, token: str, ca: Optional[Path]):
        self.server, self.token, self.ca = server.rstrip("/"), token, ca
        self._ctx: Optional[ssl.SSLContext] = None
        # The API server's warnings: of the last call, and of every call, each "METHOD PATH: text".
        self.last_warnings: list[str] = []
        self.warnings: list[str] = []

    @property
    def ctx(self) -> ssl.SSLContext:
        """Made on first use: the apiserver writes its certificate when it starts."""
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=str(self.ca))
        return self._ctx

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type,
                                              "Accept": "application/json"})
        self.last_warnings = []
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as r:
                self._warned(method, path, r.headers)
                raw = r.read()
                return r.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
        except urllib.error.HTTPError as e:
            self._warned(method, path, e.headers)
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def _warned(self, method: str, path: str, headers) -> None:
        texts = warning_texts(headers.get_all("Warning") or []) if headers is not None else []
        self.last_warnings = [f"{method} {path}: {t}" for t in texts]
        self.warnings.extend(self.last_warnings)

    def create(self, collection: str, obj: dict) -> int:
        """POST `obj`, every field checked (fieldValidation=Strict); 409 (it exists) is not an error."""
        code, body = self.call("POST", f"{collection}?{STRICT}", obj)
        if code not in (200, 201, 409):
            raise LocalClusterError(f"POST {collection} {obj['metadata']['name']}: {code} {body}")
        return code


def wait_until(what: str, check: Callable[[], bool], timeout: float, proc: Optional[subprocess.Popen] = None,
               log: Optional[Path] = None) -> None:
    """Until `check()` is true; LocalClusterError (with the log's tail) if `proc` exits first, or after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise LocalClusterError(f"{what}: exited with {proc.returncode} before it was ready:\n{tail}")
        try:
            if check():
                return
        except (OSError, LocalClusterError, ValueError) as e:
            last = e
        time.sleep(0.25)
    raise LocalClusterError(f"{what}: not ready after {timeout:.0f} s ({last})")


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


def apply_crds(api: Api, crd_dir: Path) -> list[str]:
    """Create every CustomResourceDefinition in `crd_dir`'s YAML files; returns their names once each
    is Established."""
    import yaml  # PyYAML: the CRDs are YAML files

    names = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                names.append(doc["metadata"]["name"])
    for name in names:
        def established(name=name):
            code, body = api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return code == 200 and any(c["type"] == "Established" and c["status"] == "True"
                                       # conditions is null until the controller first writes it
                                       for c in (body.get("status") or {}).get("conditions") or [])
        wait_until(f"CRD {name}", established, 60)
    return names
