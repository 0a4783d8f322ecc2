"""The two entries of infra/__main__.py: the Pulumi CLI's runpy start, and `python -m infra`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

# Starts the program the way pulumi-language-python-exec does: cwd = project root, the root NOT on
# sys.path, runpy.run_path('infra', run_name='__main__') after the runtime is configured (mocks).
PULUMI_LIKE = textwrap.dedent("""
    import asyncio, json, os, runpy, sys
    root = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ('', root)]
    import pulumi, yaml
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.stack import wait_for_rpcs

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return args.name + '-id', dict(args.inputs)
        def call(self, args):
            return {}

    class Monitor(MockMonitor):
        seen = []
        def RegisterResource(self, request):
            Monitor.seen.append(request.type)
            return super().RegisterResource(request)

    loop = asyncio.new_event_loop(); asyncio.set_event_loop(loop)
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project='dynamo-lab', stack='cross-server', preview=False,
                             monitor=Monitor(mocks))
    doc = yaml.safe_load(open('Pulumi.cross-server.yaml'))['config']
    pulumi.runtime.set_all_config({k: json.dumps(v) if isinstance(v, (dict, list)) else str(v)
                                   for k, v in doc.items()})
    assert 'infra' not in sys.modules
    runpy.run_path('infra', run_name='__main__')
    loop.run_until_complete(wait_for_rpcs())
    print(json.dumps(Monitor.seen))
""")


def test_pulumi_cli_style_start_registers_the_stack():
    proc = subprocess.run([sys.executable, "-c", PULUMI_LIKE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "kubernetes:helm.sh/v3:Release" in seen
    assert "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment" in seen


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "infra", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_render_json_lists_registrations_in_order():
    proc = _cli("render", "cross-server", "--json")
    assert proc.returncode == 0, proc.stderr
    regs = json.loads(proc.stdout)
    types = [r["type"] for r in regs]
    assert types.index("kubernetes:helm.sh/v3:Release") < types.index(
        "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment")
    assert all(set(r) == {"type", "name", "inputs"} for r in regs)


def test_render_yaml_labels_the_helm_release():
    proc = _cli("render", "kv-routing")
    assert proc.returncode == 0, proc.stderr
    assert "# Helm release, installed by Pulumi's helm.v3.Release (not a Kubernetes object)" in proc.stdout
    assert "kind: DynamoGraphDeployment" in proc.stdout


def test_render_of_a_bad_stack_file_prints_only_the_error(tmp_path):
    # A copy of the project with one misspelled key; the CLI reads the stack files of the project
    # it is run in, as the Pulumi CLI does.
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "infra").symlink_to(ROOT / "infra")
    text = (ROOT / "Pulumi.cross-server.yaml").read_text()
    assert "      replicas: 2\n" in text
    (tmp_path / "Pulumi.cross-server.yaml").write_text(text.replace("      replicas: 2\n", "      replica: 2\n"))
    proc = _cli("render", "cross-server", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(
        "Pulumi.cross-server.yaml: workers.decode.replica: unknown key `replica`; did you mean `replicas`?")


def test_unknown_stack_is_a_clear_error():
    proc = _cli("render", "no-such-stack")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no stack file Pulumi.no-such-stack.yaml" in proc.stderr
    assert "cross-server" in proc.stderr


def test_sizing_json_has_the_documented_keys():
    proc = _cli("sizing", "cross-server", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["kv_bytes_per_token"] == 114688
    assert abs(data["kv_bytes_per_request"] - 2371 * 114688) <= 0.01 * 2371 * 114688
    for g in data["groups"]:
        assert {"name", "role", "gpu_class", "kv_cache_bytes", "host_memory_floor_bytes",
                "memory_limit_bytes"} <= set(g)
    (t,) = data["transfers"]
    assert {"from_group", "to_group", "bytes_per_request", "throughput_bytes_per_s",
            "seconds_per_request"} <= set(t)
    assert 2.2 <= t["seconds_per_request"] <= 2.6
