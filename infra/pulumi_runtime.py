"""The one home of the Pulumi SDK internals this project touches (checked against pulumi 3.272.0).

The public Pulumi API can neither list every config key a stack sets (needed to refuse unknown
keys) nor run a program in-process under mocks while recording what it registers. The private
pieces that can live here, so an SDK upgrade has one module to check:

- `under_pulumi_cli()`, `raw_config()`, `is_secret()`: what the Pulumi CLI handed the program;
- `run_with_mocks()`: runs a program function under `pulumi.runtime` mocks on an event loop this
  module creates and closes, and records every registration, without the source positions the SDK
  takes for the engine (`_get_stack_trace`), which no mock reads.

The event loops are owned here because the SDK makes its own: `MockMonitor.RegisterResource` runs
on the SDK's worker threads and gives each thread a fresh loop that nobody closes
(`pulumi/runtime/sync_await.py`, `_ensure_event_loop`). Garbage-collected at interpreter exit, such
a loop printed "Exception ignored in BaseEventLoop.__del__ ... Invalid file descriptor: -1" after
about one successful run in 20. This module creates those thread loops itself and closes them when
the run ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pulumi
from pulumi.runtime import config as _config
from pulumi.runtime import resource as _resource
from pulumi.runtime import settings as _settings
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import wait_for_rpcs


def under_pulumi_cli() -> bool:
    """True when the Pulumi CLI started this process (a resource monitor is configured)."""
    return _settings.get_monitor() is not None


def raw_config() -> dict[str, str]:
    """Every config key the Pulumi CLI passed in, all namespaces: `<namespace>:<key>` -> text."""
    values = dict(_config.get_config_env())
    values.update(_config.CONFIG.get())
    return {k: str(v) for k, v in values.items()}


def is_secret(key: str) -> bool:
    """Whether the stack stores `key` (`<namespace>:<key>`) as a secret (`pulumi config set --secret`)."""
    return pulumi.runtime.is_config_secret(key)


@dataclass
class Registration:
    """One resource registration, as the mock monitor received it."""

    type: str
    name: str
    inputs: dict[str, Any]
    urn: str
    parent: str
    dependencies: list[str]
    custom: bool
    # The provider reference (`<provider urn>::<id>`) of a custom resource; empty: the default provider.
    provider: str


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class _RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks, record: list[Registration]):
        super().__init__(mocks)
        self.record = record
        self.thread_loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def _thread_loop(self) -> None:
        # Give this worker thread a loop we own, so the SDK does not make one nobody closes.
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
            if not loop.is_closed():
                return
        except RuntimeError:
            pass
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        with self._lock:
            self.thread_loops.append(loop)

    def RegisterResource(self, request):
        if threading.current_thread() is not threading.main_thread():
            self._thread_loop()
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            state = self.resources[response.urn].state if response.urn in self.resources else {}
            self.record.append(Registration(
                type=request.type, name=request.name, inputs=normalize(state), urn=response.urn,
                parent=request.parent, dependencies=list(request.dependencies), custom=request.custom,
                provider=request.provider))
        return response


@contextlib.contextmanager
def _offline_kube_env() -> Iterator[None]:
    # pulumi_kubernetes reads KUBECONFIG / PULUMI_K8S_* when a provider is built; an offline run
    # must not depend on whatever cluster this shell points at.
    saved = {k: os.environ.pop(k) for k in list(os.environ)
             if k == "KUBECONFIG" or k.startswith("PULUMI_K8S_") or k == "PULUMI_CONFIG"}
    try:
        yield
    finally:
        os.environ.update(saved)


@contextlib.contextmanager
def _no_source_positions() -> Iterator[None]:
    # Every resource constructor asks _get_stack_trace for the frames above it, each made a file://
    # URI (pulumi/runtime/resource.py, register_resource, 3.272.0), so the engine can show where in
    # the program a resource was declared. MockMonitor.RegisterResource never reads them, and they
    # were about a sixth of a run's time (more under a deep caller: pytest). An SDK without the
    # function runs as before (test_pulumi_runtime checks the pinned one has it).
    saved = getattr(_resource, "_get_stack_trace", None)
    if saved is None:
        yield
        return
    _resource._get_stack_trace = source_pb2.StackTrace  # an empty trace: no source position
    try:
        yield
    finally:
        _resource._get_stack_trace = saved


def normalize(value: Any) -> Any:
    """The mocks hand back ints inside untyped maps as floats (docs/sources.md): make them ints
    again, once, as each registration is recorded."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


async def _resolve(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        return await _resolve(await value.future())
    if isinstance(value, dict):
        return {k: await _resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [await _resolve(v) for v in value]
    return value


def run_with_mocks(program: Callable[[], Any], *, project: str, stack: str, config: dict[str, str],
                   secret_keys: list[str], record: list[Registration]) -> Any:
    """Run `program` for `stack` under mocks; return its resolved return value.

    Every registration is appended to `record` as it happens, so a caller still has them when the
    program raises (a rejected stack file must have registered nothing).
    """
    loop = asyncio.new_event_loop()
    # The SDK hands each registration to the loop's default executor (run_in_executor(None, ...),
    # pulumi/runtime/resource.py, 3.272.0), by default a pool of up to min(32, cores + 4) threads
    # started afresh for each run, contending for the GIL with the loop that feeds them. One thread
    # does the same calls in the order the SDK makes them: a run of the shipped stacks took about a
    # quarter less CPU and a fifth less time (34-39 ms against 46-52 ms a run, 2 cores).
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    asyncio.set_event_loop(loop)
    monitor = _RecordingMonitor(_Mocks(), record)
    try:
        with _offline_kube_env(), _no_source_positions():
            # A fresh root Stack per run: earlier runs in this process must not leak resources.
            _settings.reset_options()
            pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False,
                                     monitor=monitor)
            pulumi.runtime.set_all_config(dict(config), list(secret_keys))
            outputs = program()
            resolved = loop.run_until_complete(_resolve(outputs))
            loop.run_until_complete(wait_for_rpcs())
        return resolved
    finally:
        # A rejected program leaves the root Stack's registration pending: cancel it cleanly.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        loop.close()
        for thread_loop in monitor.thread_loops:
            thread_loop.close()
