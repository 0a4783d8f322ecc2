"""`workers`: the worker groups, their KV transfer and their engine flags."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, field_validator, model_validator

from infra import units
from infra.config import engine_flags
from infra.config.base import Section
from infra.config.fields import Bytes, Cpu, KeyProblem, UcxTls, dns_label

# vLLM 0.31.0 ships NixlPullConnector (alias NixlConnector: the decode side READs the KV) and
# NixlPushConnector (the prefill side WRITEs it), but Dynamo 1.6's vLLM component accepts only the
# name NixlConnector among the NIXL ones, and sets the NIXL side-channel host only for it
# (dynamo/vllm/kv_connector_protocols.py, dynamo/vllm/args.py; docs/sources.md).
UNSUPPORTED_CONNECTORS = {
    "NixlPullConnector": "it is vLLM's name for what Dynamo calls NixlConnector (the decode side pulls)",
    "NixlPushConnector": "the prefill side would push, a path vLLM 0.31.0 has but Dynamo 1.6 does not take",
}


def _supported_connector(name: Any) -> Any:
    # Before validation: whatever the stack file holds, so only text is looked up (a map or list is
    # unhashable); the Literal then refuses anything but NixlConnector.
    if isinstance(name, str) and name in UNSUPPORTED_CONNECTORS:
        raise ValueError(
            f"{name} is not a connector Dynamo 1.6 accepts: {UNSUPPORTED_CONNECTORS[name]}. Its vLLM "
            "component refuses it (\"Unsupported kv_connector\") at the first disaggregated request, while "
            "the workers report Ready. Write connector: NixlConnector (or remove the key: it is the default)"
        )
    return name


class KvTransfer(Section):
    connector: Annotated[Literal["NixlConnector"], BeforeValidator(_supported_connector)] = Field(
        "NixlConnector", description="vLLM's KV connector; prefill/decode only", json_schema_extra={
            "accepts": "`NixlConnector` only (the decode side READs the KV): Dynamo 1.6's vLLM component refuses "
                       "vLLM's other names, `NixlPullConnector` and `NixlPushConnector`, at the first request, so "
                       "they are refused here"})
    # cpu: NIXL moves KV through a host mirror of the KV pool. The only choice over TCP:
    # UCX segfaults copying GPU memory over TCP (uct_tcp_ep_am_bcopy, docs/sources.md).
    buffer_device: Literal["cpu", "cuda"] = Field("cpu", description="where NIXL moves the KV from: a host "
                                                  "mirror of the KV pool, or the GPU; `cuda` over a TCP-only "
                                                  "`ucxTls` is refused (UCX segfaults); a pair must agree")
    # tcp: UCX over the hosts' TCP stacks (the lab's 1GbE, no RDMA). rdma: UCX over RC verbs through
    # the RDMA device plugin's resource (docs/sizing.md, "Transports").
    transport: Literal["tcp", "rdma"] = Field("tcp", description="how the KV crosses between pods: `tcp` (UCX over "
                                              "TCP, the lab's) or `rdma` (UCX over RC verbs: each pod requests "
                                              "one of the GPU class's `rdmaResource`); a pair must agree")
    ucx_tls: UcxTls = Field("tcp,self", description="`UCX_TLS`", json_schema_extra={
        "accepts": "UCX transport names (`tcp`, `self`, `rc`, `cuda_copy`, ..., `^name` for all but), not empty; a "
                   "prefill/decode pair must share one that crosses pods, of the `transport` chosen",
        "default_text": "`tcp,self`; with `transport: rdma`, `rc,self` (`rc,cuda_copy,self` with `cuda` "
                        "buffers)"})
    ucx_rndv_thresh: str = Field("inf", pattern=r"^(inf|auto|\d+[kKmMgG]?[bB]?)$", description="`UCX_RNDV_THRESH`",
                                 json_schema_extra={"accepts": "`inf`, `auto` or a size"})

    @model_validator(mode="before")
    @classmethod
    def _rdma_tls(cls, data: Any) -> Any:
        # An RDMA transport's default UCX_TLS: RC verbs, plus CUDA copies where the buffers are GPU memory.
        if isinstance(data, dict) and data.get("transport") == "rdma" and "ucxTls" not in data:
            return {**data, "ucxTls": "rc,cuda_copy,self" if data.get("bufferDevice") == "cuda" else "rc,self"}
        return data

    @property
    def op(self) -> Literal["READ"]:
        """The NIXL operation that moves the KV through NixlConnector: the decode side READs it. (The
        probe can also measure WRITE, the push path Dynamo 1.6 does not take.)"""
        return "READ"


# The most workers a group, and a stack in all, may run: the sizing and preflight place each on its
# class's nodes one by one (at 4,096 over 1,024 nodes, seconds; 16 groups of 4,096, over a minute).
MAX_WORKERS = 4096


class WorkerGroup(Section):
    name: str = Field(max_length=40, description="names the graph component", json_schema_extra={
        "accepts": "a DNS label of at most 40 characters, unique, not `frontend`; `<graph>-<name>` must fit 63"})
    role: Literal["agg", "prefill", "decode"] = Field(
        description="`agg` is component type `worker`; a graph is either all `agg` or has both `prefill` and "
        "`decode`, and each side needs at least one replica in all")
    # A bound far beyond any cluster this project sizes; the sizing and preflight count per replica
    # (and refuse a stack of more workers in all: infra.validate).
    replicas: int = Field(ge=0, le=MAX_WORKERS, description=f"workers in this group; {MAX_WORKERS} at "
                          "most in all the stack's groups")
    gpu_class: str = Field(description="where the workers run", json_schema_extra={"accepts": "a key of `gpuClasses`"})
    tensor_parallel: int = Field(1, ge=1, description="GPUs per replica: vLLM `--tensor-parallel-size`, and as "
                                 "many whole GPUs (the class's resource) per pod", json_schema_extra={
                                     "accepts": "a count that divides the model's attention and KV heads, at most "
                                                "the class's `gpusPerNode`; above 1 only on a `sharing: whole` class; "
                                                "a prefill group's and a decode group's may differ where one divides "
                                                "the other (vLLM's NixlConnector; docs/beyond-the-lab.md)"})
    # Where the scheduler may put the replicas over the class's nodes: nothing (it may pack them on
    # one node), a topology spread constraint (maxSkew 1 per node), or required pod anti-affinity.
    spread: Literal["none", "even", "onePerNode"] = Field(
        "none", description="how the replicas spread over the class's nodes: `none` (the scheduler may put them all "
        "on one node, which the sizing assumes), `even` (a topology spread constraint: per node at most one more "
        "than on another), `onePerNode` (required pod anti-affinity: at most one per node)")
    kv_transfer: KvTransfer = Field(KvTransfer(), description="how the KV moves between prefill and decode workers")
    kv_cache_bytes: Optional[Bytes] = Field(None, description="vLLM `--kv-cache-memory-bytes`", json_schema_extra={
        "accepts": "memory, at least one sequence of the worker's `--max-model-len` plus the null block "
                   "({derived.smallestPool})",
        "default_text": "the GPU class's budget shared evenly among its workers"})
    cpu_request: Cpu = Field("2", description="each worker's CPU request",
                             json_schema_extra={"accepts": "CPU, at most `cpuLimit`"})
    cpu_limit: Optional[Cpu] = Field(None, description="each worker's CPU limit", json_schema_extra={
        "accepts": "CPU, at least `cpuRequest`", "default_text": "none"})
    memory_limit: Optional[Bytes] = Field(None, description="each worker's memory limit; unset: the floor as "
                                          "request and limit (Guaranteed memory)", json_schema_extra={
                                              "accepts": "memory, at least the floor",
                                              "default_text": "the host memory floor (docs/sizing.md)"})
    memory_request: Optional[Bytes] = Field(None, description="each worker's memory request", json_schema_extra={
        "accepts": "memory, at most the limit", "default_text": "= limit"})
    extra_args: list[str] = Field([], description="more `dynamo.vllm` flags, read as vLLM's and Dynamo's parsers "
                                  "read them (`_` for `-`, `--flag=value`, unambiguous prefixes, dotted JSON keys "
                                  "such as `--kv-transfer-config.kv_role`, aliases, whitespace in a value, the last "
                                  "repeat winning): flags dynamo-lab writes itself or that its sizing rests on "
                                  "(`--block-size`, `--kv-transfer-config`, `--kv-cache-memory-bytes`, "
                                  "`--gpu-memory-utilization`, `--revision`, `--dtype`, `--quantization`, "
                                  "`--cpu-offload-gb`, `--hf-token`, `-tp`, ...) are refused in any "
                                  "spelling (see \"Engine flags\" below); a "
                                  "`--max-model-len` here replaces `workload.maxModelLen` for this group and is "
                                  "checked the same way (a token count, at least `inputTokens` + `outputTokens`, "
                                  "within the model's context and the pool)",
                                  json_schema_extra={"accepts": "strings: a flag and its value as two elements, or "
                                                     "`--flag=value`"})

    @field_validator("name")
    @classmethod
    def _dns_label(cls, name: str) -> str:
        # It names the graph component, its Services and pods.
        return dns_label(name, max_length=40)

    @field_validator("extra_args")
    @classmethod
    def _no_managed_flags(cls, args: list[str]) -> list[str]:
        # Each element as vLLM's and Dynamo's parsers read it (engine_flags): every spelling of a
        # managed flag is refused, not only the one dynamo-lab writes, and a flag typed with its value
        # as one element, which vLLM would exit on.
        if (why := engine_flags.check(args)) is not None:
            raise ValueError(why)
        return args

    def extra_arg(self, flag: str) -> Optional[str]:
        """The value vLLM takes for `flag` from extraArgs, in any spelling its parser accepts (the
        last one given wins; engine_flags.value), if any."""
        return engine_flags.value(self.extra_args, flag)

    @model_validator(mode="after")
    def _cpu_request_within_limit(self) -> "WorkerGroup":
        if self.cpu_limit is not None and units.parse_cpu(self.cpu_request) > units.parse_cpu(self.cpu_limit):
            raise KeyProblem("cpuRequest",
                             f"cpuRequest {self.cpu_request} is above cpuLimit {self.cpu_limit}; Kubernetes "
                             f"rejects that. Lower cpuRequest to at most {self.cpu_limit}, or raise cpuLimit")
        return self

    @model_validator(mode="after")
    def _kv_transfer_only_disaggregated(self) -> "WorkerGroup":
        if self.role == "agg" and "kv_transfer" in self.model_fields_set:
            raise KeyProblem("kvTransfer", "kvTransfer applies to prefill and decode workers only; an agg worker "
                             "keeps its KV on its own GPU. Remove kvTransfer, or set role to prefill or decode")
        return self

    @property
    def rdma(self) -> bool:
        """Whether this worker moves its KV over RDMA (a prefill or decode group on transport rdma)."""
        return self.role in ("prefill", "decode") and self.kv_transfer.transport == "rdma"

    @property
    def cpu_buffers(self) -> bool:
        """Whether vLLM keeps a host mirror of this worker's KV pool (NixlConnector, cpu buffers)."""
        return self.role in ("prefill", "decode") and self.kv_transfer.buffer_device == "cpu"
