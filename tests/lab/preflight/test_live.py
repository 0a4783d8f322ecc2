"""The live read: the official Kubernetes client, the stack's own context, GET requests only.

Two loopback HTTP servers stand in for API servers: the stack's context (`dynamo-lab`, as the
stack files name it) points at one that answers the preflight's eight calls from the lab's saved
data; the kubeconfig's current context points at a decoy, which must never be asked anything.
"""

from __future__ import annotations

import http.server
import json
import threading
from urllib.parse import urlsplit

import pytest
import yaml

from dynamo_lab.cli import main
from dynamo_lab.preflight import cluster_data
from infra.config.schema import ClusterTarget
from tests.lab.preflight.saved_lab import lab

LISTS = {
    "/api/v1/nodes": "Node",
    "/api/v1/namespaces": "Namespace",
    "/apis/apps/v1/deployments": "Deployment",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": "CustomResourceDefinition",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    "/apis/storage.k8s.io/v1/storageclasses": "StorageClass",
}


class FakeApiServer(http.server.ThreadingHTTPServer):
    """Answers GET /version and the seven lists from the lab's data, as an API server does (list items
    without kind); records every request; refuses anything that is not a GET."""

    def __init__(self, status: int = 200):
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Authorization header)
        self.status = status
        version, items = lab()
        self.answers = {"/version": version["serverVersion"]}
        for path, kind in LISTS.items():
            self.answers[path] = {"kind": kind + "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                  "items": [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")}
                                            for i in items if i["kind"] == kind]}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                path = urlsplit(self.path).path.rstrip("/")
                server.requests.append((self.command, path, self.headers.get("Authorization", "")))
                body, code = server.answers.get(path), server.status
                if self.command != "GET" or body is None:
                    body, code = {"kind": "Status", "status": "Failure", "code": 405}, 405
                data = json.dumps(body if code == 200 else {"kind": "Status", "code": code}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def servers():
    made: list[FakeApiServer] = []

    def make(status: int = 200) -> FakeApiServer:
        made.append(FakeApiServer(status))
        return made[-1]

    yield make
    for s in made:
        s.shutdown()
        s.server_close()


def kubeconfig(tmp_path, lab_url: str, decoy_url: str):
    """A kubeconfig whose current context is NOT the stack's."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "decoy",
           "clusters": [{"name": "lab", "cluster": {"server": lab_url}},
                        {"name": "other", "cluster": {"server": decoy_url}}],
           "users": [{"name": "lab-reader", "user": {"token": "lab-token"}},
                     {"name": "other-admin", "user": {"token": "other-token"}}],
           "contexts": [{"name": "dynamo-lab", "context": {"cluster": "lab", "user": "lab-reader"}},
                        {"name": "decoy", "context": {"cluster": "other", "user": "other-admin"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_preflight_reads_the_stacks_own_context_with_gets_only(servers, tmp_path, monkeypatch, capsys):
    api, decoy = servers(), servers()
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, api.url, decoy.url)))
    code = main(["preflight", "cross-server"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith(f"Preflight cross-server: cluster context 'dynamo-lab' of {tmp_path / 'kubeconfig'}, "
                          "Kubernetes v1.34.1")
    assert "Verdict: cross-server fits this cluster." in out
    assert decoy.requests == []
    assert {method for method, _, _ in api.requests} == {"GET"}
    assert sorted(path for _, path, _ in api.requests) == sorted(["/version", *LISTS])
    assert {auth for _, _, auth in api.requests} == {"Bearer lab-token"}


def test_the_stacks_kubeconfig_key_comes_before_KUBECONFIG(servers, tmp_path, monkeypatch):
    api, decoy = servers(), servers()
    path = kubeconfig(tmp_path, api.url, decoy.url)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "not-this-one"))
    data = cluster_data.read_live(ClusterTarget(context="dynamo-lab", kubeconfig=str(path)))
    assert sorted(n.name for n in data.nodes) == ["gpu-laptop", "gpu-server"]
    assert data.namespaces["kube-system"]["kind"] == "Namespace"  # kinds added, as kubectl does
    assert decoy.requests == [] and len(api.requests) == 8


def test_an_unreachable_cluster_is_exit_2_in_one_line(servers, tmp_path, monkeypatch, capsys):
    decoy = servers()
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, "http://127.0.0.1:9", decoy.url)))  # refused
    code = main(["preflight", "cross-server"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: dynamo-lab preflight: could not read the cluster (context 'dynamo-lab' of ")
    assert "Connection refused" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_refused_read_says_what_access_it_needs(servers, tmp_path, monkeypatch, capsys):
    api, decoy = servers(status=403), servers()
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, api.url, decoy.url)))
    assert main(["preflight", "cross-server"]) == 2
    err = capsys.readouterr().err
    assert "HTTP 403" in err
    assert "needs get/list on nodes, namespaces, deployments, CRDs, webhook configurations and storage classes" in err


def test_a_kubeconfig_without_the_stacks_context_is_exit_2(tmp_path, monkeypatch, capsys):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "other",
                                    "clusters": [], "users": [], "contexts": [
                                        {"name": "other", "context": {"cluster": "x", "user": "y"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert main(["preflight", "cross-server"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: dynamo-lab preflight: cannot use context 'dynamo-lab' of {path}: ")
    assert err.count("\n") == 1
    assert err.rstrip().endswith("its contexts: other (pulumi config set kubernetes:context <context> --stack "
                                 "<stack>)")


def test_no_kubeconfig_at_all_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    assert main(["preflight", "cross-server"]) == 2
    assert capsys.readouterr().err.startswith(f"error: dynamo-lab preflight: no kubeconfig at {tmp_path / 'absent'}: "
                                              "set kubernetes:kubeconfig in the stack file")
