"""The Pulumi entry, started the way the Pulumi CLI starts it, and `python -m infra` outside it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

# Starts the program the way pulumi-language-python-exec does: cwd = project root, the exec script's
# own directory (not the cwd) first on sys.path, the runtime configured (here: mocks), then
# runpy.run_path('infra', run_name='__main__'). `infra` must come from the installed project.
PULUMI_LIKE = textwrap.dedent("""
    import asyncio, json, os, runpy, sys
    sys.path[:] = [p for p in sys.path if p != '']  # python -c adds the cwd; the exec script does not
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
    pulumi.runtime.set_all_config({(k if ':' in k else 'dynamo-lab:' + k):
                                   json.dumps(v) if isinstance(v, (dict, list)) else str(v)
                                   for k, v in doc.items()})
    assert 'infra' not in sys.modules
    runpy.run_path('infra', run_name='__main__')
    loop.run_until_complete(wait_for_rpcs())
    import infra
    print(json.dumps({'seen': Monitor.seen, 'infra': infra.__file__}))
""")


@pytest.mark.process
def test_pulumi_cli_style_start_registers_the_stack():
    proc = subprocess.run([sys.executable, "-c", PULUMI_LIKE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "kubernetes:helm.sh/v3:Release" in result["seen"]
    assert "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment" in result["seen"]
    assert result["infra"] == str(ROOT / "infra" / "__init__.py")


def test_the_entry_changes_no_import_path():
    tree = ast.parse((ROOT / "infra" / "__main__.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "path" not in attrs and "sys.path" not in names


@pytest.mark.process
def test_python_m_infra_outside_pulumi_points_to_the_lab_without_importing_it():
    # Run as `python -m infra` would be, then look at what it imported: the program never imports the lab.
    probe = ("import runpy, sys\n"
             "try:\n    runpy.run_module('infra', run_name='__main__', alter_sys=True)\n"
             "except SystemExit as exc:\n    print(repr(exc.code), file=sys.stderr)\n"
             "    print(sorted(m for m in sys.modules if m.startswith('dynamo_lab')))\n    raise\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1  # sys.exit(message)
    assert proc.stdout.strip() == "[]"
    assert "Traceback" not in proc.stderr
    assert "deploy a stack with `pulumi up --stack STACK`" in proc.stderr and "dynamo-lab COMMAND" in proc.stderr


@pytest.mark.process
def test_python_m_infra_lab_is_the_lab_command_line():
    proc = subprocess.run([sys.executable, "-m", "dynamo_lab", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: dynamo-lab")
