"""`probe` and `benchmark`: the in-cluster KV-transfer probe and the benchmark sweep, both Jobs."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator

from infra import units
from infra.config.base import Section
from infra.config.fields import Bytes
from infra.config.gpu_classes import NodeRequirement

# How long a finished probe or benchmark Job stays, with its pods and their logs, which hold its
# result (read with the stack outputs probeLogs and benchLogs): a day to collect it, then the
# TTL-after-finished controller deletes them (Kubernetes, "Automatic Cleanup for Finished Jobs").
FINISHED_JOB_TTL = 86400
# How long the benchmark waits for the frontend to list the model: workers may still be loading it.
BENCH_READY_WAIT_SECONDS = 1800


class Probe(Section):
    """In-cluster KV-transfer probe (infra/payloads/kv_probe.py) deployed next to the graph; off by default."""

    enabled: bool = Field(False, description="deploy the in-cluster KV-transfer probe (docs/probe.md)",
                          json_schema_extra={"accepts": "true/false (disaggregated stacks only)"})
    from_group: Optional[str] = Field(None, description="the prefill side of the path the probe measures",
                                      json_schema_extra={"accepts": "a prefill group of `workers`",
                                                         "default_text": "the first prefill group"})
    to_group: Optional[str] = Field(None, description="the decode side of the path the probe measures",
                                    json_schema_extra={"accepts": "a decode group of `workers`",
                                                       "default_text": "the first decode group"})
    repeats: int = Field(5, ge=1, description="timed transfers the probe makes after its warm-up")
    # Each side registers a host pool laid out like its worker's KV pool, this size at most (never
    # less than one transfer); the Job's memory limit is the pool plus 1Gi.
    max_pool_bytes: Bytes = Field(units.parse_memory("4Gi"), description="the largest KV pool each probe side "
                                  "registers (otherwise its worker's `kvCacheBytes`, and never less than one "
                                  "request's blocks); each Job's memory is its pool + 1Gi")
    port: int = Field(5555, ge=1024, le=65535, description="the port the probe's sides talk on")
    timeout_seconds: int = Field(600, gt=0, description="the probe Jobs' deadline (`activeDeadlineSeconds`, and "
                                 "the probe's own wait for its other side)")
    ttl_seconds_after_finished: int = Field(FINISHED_JOB_TTL, ge=0, description="how long the probe Jobs, their "
                                            "pods and logs (the result, `probeLogs`) stay after they end "
                                            "(`ttlSecondsAfterFinished`); read the result before")


class Benchmark(Section):
    """The sweep: defaults are the lab's matrix (prefix types x concurrency, 3 runs per point)."""

    prefix_types: list[int] = Field([2, 7, 12, 24], min_length=1, description="the sweep's prefix types (the "
                                    "lab's matrix)", json_schema_extra={"accepts": "a list of positive integers"})
    concurrency: list[int] = Field([4, 8], min_length=1, description="the sweep's concurrencies (the lab's "
                                   "matrix)", json_schema_extra={"accepts": "a list of positive integers"})
    runs: int = Field(3, ge=1, description="measured runs per point of the matrix")
    # Each run's requests: a shared prefix (one of `prefix_types`) + a unique part, and the output.
    # None: the workload's (the resolved stack fills them in), so the sweep measures what the stack is sized for.
    prefix_tokens: Optional[int] = Field(None, ge=0, description="each run's requests: the shared prefix",
                                         json_schema_extra={"default_text": "the workload's "
                                                            "(`{workload.prefixTokens}`)"})
    unique_tokens: Optional[int] = Field(None, gt=0, description="each run's requests: the unique part",
                                         json_schema_extra={"default_text": "the workload's, `inputTokens` - "
                                                            "`prefixTokens` (`{workload.uniqueTokens}`)"})
    output_tokens: Optional[int] = Field(None, gt=0, description="each run's requests: the output tokens",
                                         json_schema_extra={"default_text": "the workload's "
                                                            "(`{workload.outputTokens}`)"})
    requests_per_concurrency: int = Field(8, gt=0, description="requests per run = this x concurrency")
    enabled: bool = Field(False, description="run the benchmark in the cluster: a Job running AIPerf against the "
                          "frontend")
    # The whole Job: AIPerf's install, the wait for the frontend (BENCH_READY_WAIT_SECONDS) and the
    # sweep (the lab's 24 runs of 32-64 requests take minutes).
    timeout_seconds: int = Field(7200, description="the benchmark Job's deadline "
                                 "(`activeDeadlineSeconds`): AIPerf's install, the wait for the frontend (up to "
                                 f"{BENCH_READY_WAIT_SECONDS} s) and the sweep", json_schema_extra={
                                     "accepts": f"seconds, more than {BENCH_READY_WAIT_SECONDS} (the wait for the "
                                                "frontend)"})
    ttl_seconds_after_finished: int = Field(FINISHED_JOB_TTL, ge=0, description="how long the benchmark Job, its "
                                            "pod and log (the results, `benchLogs`) stay after it ends "
                                            "(`ttlSecondsAfterFinished`); collect the results before")
    image: str = Field("python:3.11-slim", description="the benchmark Job's image",
                       json_schema_extra={"accepts": "an image"})
    # The AIPerf release the Job installs, from infra/payloads/aiperf-requirements.txt, which pins it
    # and every dependency by hash; infra.validate refuses another (a hash-pinned lock holds one).
    aiperf_version: str = Field("0.13.0", pattern=r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$",
                                description="the AIPerf release the Job installs, hash-pinned with its "
                                "dependencies (infra/payloads/aiperf-requirements.txt; `python3 dev.py lock-bench`)",
                                json_schema_extra={"accepts": "the version the requirements pin (0.13.0)"})
    node_selector: list[NodeRequirement] = Field([], description="where the benchmark Job runs (a required node "
                                                 "affinity; it requests no GPU); none: anywhere",
                                                 json_schema_extra={"accepts": "node requirements (below)"})
    tokenizer: Optional[str] = Field(None, description="the tokenizer AIPerf counts tokens with (downloaded in the "
                                     "cluster)", json_schema_extra={"accepts": "a model id",
                                                                    "default_text": "`model.name`"})

    @field_validator("timeout_seconds")
    @classmethod
    def _beyond_the_ready_wait(cls, seconds: int) -> int:
        if seconds <= BENCH_READY_WAIT_SECONDS:
            raise ValueError(f"{seconds} s ends the Job within its wait for the frontend to list the model (up to "
                             f"{BENCH_READY_WAIT_SECONDS} s: the workers may still be loading it), before any run. "
                             f"Write more than {BENCH_READY_WAIT_SECONDS}, e.g. 7200 (the default)")
        return seconds

    @field_validator("prefix_types", "concurrency")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v <= 0 for v in values):
            raise ValueError(f"{values} must hold positive integers only")
        return values
