"""The stack file's schema: pydantic models holding every default of the project, and nowhere else.

A stack file holds only what differs from these defaults. Keys are camelCase, as Pulumi config
keys usually are (`dynamo-lab:workers`, `memoryLimit`, ...); unknown keys are errors, never ignored.
Checks that need one value live on the models; checks across keys live in `config.checks`, and
`config.load` turns raw Pulumi config into a `StackConfig` or a `ConfigError`.

Each field's `description` is what the key means to a user, and its `json_schema_extra` says what
the type cannot: `accepts` (the values taken, where the type and its constraints say less) and
`default_text` (a default filled per stack or by the code, in words). docs/configuration.md's
reference is generated from them (`python3 dev.py config-reference`, infra/lab/config_reference.py);
the `#` comments say why, for whoever changes the code.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from infra import units
from infra.catalogue import (
    BUILTIN_MODELS,
    DEFAULT_GPU_CLASSES,
    DEFAULT_MODEL,
    DYNAMO_RELEASE,
    SAME_NODE_BYTES_PER_SECOND,
    SERVING_IMAGE,
)
from infra.config import engine_flags
from infra.config.fields import (
    Bytes,
    Cidr,
    Cpu,
    DnsLabel,
    ExactRelease,
    LabelKey,
    LinkRate,
    OperatorImage,
    OptionalDnsLabel,
    ResourceName,
    Throughput,
    UcxTls,
    dns_label,
    label_value,
    node_path,
    vllm_int,
)
from infra.prefix_cache import BLOCK_TOKENS, blocks

PROJECT = "dynamo-lab"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True)


# --- GPU classes --------------------------------------------------------------------------------


class NodeRequirement(_Model):
    """One `matchExpressions` entry of a required node affinity term (ANDed with the others)."""

    key: LabelKey = Field(description="the node label the requirement tests",
                          json_schema_extra={"accepts": "a label key (`[prefix/]name`, e.g. `nvidia.com/gpu.memory`)"})
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="how the label is tested, as in a node affinity's `matchExpressions`")
    values: list[str] = Field([], description="the values the operator compares the label with", json_schema_extra={
        "accepts": "label values: at least one for `In`/`NotIn`, none for `Exists`/`DoesNotExist`, exactly one "
                   "integer for `Gt`/`Lt` (e.g. `[\"20000\"]`)"})

    @model_validator(mode="after")
    def _values_fit_operator(self) -> "NodeRequirement":
        # Same rules as the API server's node selector validation.
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values; remove `values`")
        if self.operator in ("In", "NotIn"):
            if not self.values:
                raise ValueError(f"operator {self.operator} needs at least one value")
            for value in self.values:
                label_value(value)
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1 or not re.fullmatch(r"-?\d+", self.values[0]):
                raise ValueError(
                    f"operator {self.operator} needs exactly one integer value, e.g. values: ['20000']"
                )
        return self


class GpuClass(_Model):
    """A kind of GPU node. The lab has one node with one GPU per class; all workers of a class share it."""

    memory: Bytes = Field(description="the GPU memory one card of this class has (as GPU feature discovery "
                          "reports it)")
    # With one physical GPU and several workers, the NVIDIA device plugin must advertise
    # time-sliced replicas of this resource (docs/sources.md, "Several workers on one GPU").
    resource: ResourceName = Field("nvidia.com/gpu", description="the extended resource each worker requests one "
                                   "unit of", json_schema_extra={"accepts": "an extended resource name (e.g. "
                                   "`nvidia.com/gpu.shared` for renamed time-sliced replicas)"})
    node_selector: list[NodeRequirement] = Field(min_length=1, description="the nodes of this class: a required node "
                                                 "affinity, its requirements ANDed", json_schema_extra={
                                                     "accepts": "a list of node requirements (below), at least one"})
    # Fraction of GPU memory no worker may plan to use (driver, display, fragmentation).
    memory_reserve: float = Field(0.10, ge=0.0, lt=1.0, description="the fraction of GPU memory no worker may plan "
                                  "to use (driver, display, fragmentation)")
    # ESTIMATE: sustained prefill TFLOP/s of one worker; only used for the prefill-time estimate.
    effective_tflops: float = Field(gt=0, description="ESTIMATE: sustained prefill TFLOP/s of one worker; only the "
                                    "prefill-time estimate uses it")


# --- Platform, model, image, frontend -----------------------------------------------------------

# Top-level chart keys that Dynamo 1.4+ removed; setting them makes the chart fail (docs/sources.md).
REMOVED_CHART_KEYS = {
    "grove": "global.grove.install / global.grove.enabled",
    "nats": "global.nats.install",
    "etcd": "global.etcd.install",
    "kai-scheduler": "global.kai-scheduler.install / global.kai-scheduler.enabled",
}


class Platform(_Model):
    manage: bool = Field(True, description="install the Dynamo platform chart in this stack")
    chart: str = Field("dynamo-platform", description="the platform chart's name",
                       json_schema_extra={"accepts": "a chart name"})
    chart_repo: str = Field("https://helm.ngc.nvidia.com/nvidia/ai-dynamo", description="the chart's repository",
                            json_schema_extra={"accepts": "an `https://` or `oci://` URL"})
    # One exact release: a range would let Helm install whatever is newest.
    version: ExactRelease = Field(DYNAMO_RELEASE, description="the chart version", json_schema_extra={
        "accepts": f"one exact release (`{DYNAMO_RELEASE}`); ranges such as `1.6`, `^1.6.2`, `>=1.6.0` are refused"})
    namespace: DnsLabel = Field("dynamo-system", description="the namespace the platform is installed in")
    # Helm release names are DNS labels of at most 53 characters.
    release_name: DnsLabel = Field("dynamo-platform", max_length=53, description="the Helm release's name")
    timeout_seconds: int = Field(900, gt=0, description="how long Helm waits for the platform to be ready")
    # Extra chart values, merged over the ones dynamo-lab sets (which keep Grove and KAI off).
    values: dict[str, Any] = Field({}, description="extra chart values (Grove and KAI stay off; the removed "
                                   "top-level `grove.enabled`, `nats.enabled`, `etcd.enabled`, "
                                   "`kai-scheduler.enabled` are refused)", json_schema_extra={"accepts": "a map"})

    @field_validator("chart_repo")
    @classmethod
    def _repository_url(cls, url: str) -> str:
        if not re.match(r"^(https?|oci)://[^\s/]+", url):
            raise ValueError(f"{url!r} is not a chart repository URL; write e.g. "
                             "https://helm.ngc.nvidia.com/nvidia/ai-dynamo")
        return url

    @field_validator("values")
    @classmethod
    def _no_removed_keys(cls, values: dict[str, Any]) -> dict[str, Any]:
        for key, replacement in REMOVED_CHART_KEYS.items():
            if isinstance(values.get(key), dict) and "enabled" in values[key]:
                raise ValueError(
                    f"`{key}.enabled` was removed from the dynamo-platform chart and makes it fail; "
                    f"use {replacement} instead"
                )
        return values


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1}


# A Hugging Face revision that cannot move: a full commit hash (a branch or tag name can).
COMMIT_HASH = r"^[0-9a-f]{40}$"


class Model(_Model):
    name: str = Field(DEFAULT_MODEL, description="the served model; one that is not built in also needs `layers`, "
                      "`kvHeads`, `headDim` and `parameters`", json_schema_extra={"accepts": "a Hugging Face model id"})
    layers: Optional[int] = Field(None, gt=0, description="the model's layers (config.json `num_hidden_layers`)",
                                  json_schema_extra={"default_text": "(required)"})
    kv_heads: Optional[int] = Field(None, gt=0, description="its KV heads (config.json `num_key_value_heads`)",
                                    json_schema_extra={"default_text": "(required)"})
    head_dim: Optional[int] = Field(None, gt=0, description="its head dimension (config.json `head_dim`, not "
                                    "`hidden_size` / `num_attention_heads`)",
                                    json_schema_extra={"default_text": "(required)"})
    hidden_size: Optional[int] = Field(None, gt=0, description="its hidden size (config.json `hidden_size`); only "
                                       "the local twin's model files use it", json_schema_extra={
                                           "default_text": "`attentionHeads` x `headDim`"})
    attention_heads: Optional[int] = Field(None, gt=0, description="its attention heads (config.json "
                                           "`num_attention_heads`); only the local twin's model files use it",
                                           json_schema_extra={"default_text": "`kvHeads`"})
    dtype: Literal["bfloat16", "float16", "float32", "fp8"] = Field(
        "bfloat16", description="the weights' and the KV cache's data type (the sizing's bytes per value)")
    parameters: Optional[int] = Field(None, gt=0, description="its parameter count",
                                      json_schema_extra={"default_text": "(required)"})
    # Parameters the checkpoint files hold (tied weights may be stored twice). None: `parameters`.
    checkpoint_parameters: Optional[int] = Field(
        None, gt=0, description="the parameters stored in the checkpoint files (tied weights may be stored twice); "
        "with `tokenizerBytes`, what the model takes on disk, which sizes the model cache",
        json_schema_extra={"default_text": "`parameters`"})
    # Config and tokenizer files beside the weights. ESTIMATE for models that are not built in.
    tokenizer_bytes: Bytes = Field(units.parse_memory("64Mi"), description="the config and tokenizer files beside "
                                   "the weights (an ESTIMATE for models that are not built in); they size the model "
                                   "cache")
    # config.json's max_position_embeddings; None: unknown, so a context length is not checked against it.
    max_position_embeddings: Optional[int] = Field(None, gt=0, description="the model's context (config.json "
                                                   "`max_position_embeddings`); a longer `workload.maxModelLen` or "
                                                   "`--max-model-len` is refused")
    # The Hub commit the pre-pull downloads and the workers load (vLLM --revision). None: the
    # model's `main` branch, whatever it points at when a pod starts.
    revision: Optional[str] = Field(None, description="the Hub commit the pre-pull downloads and every worker loads "
                                    "(`--revision`); the built-in figures were read at this commit", json_schema_extra={
                                        "accepts": "a full 40-character commit hash (a branch or tag can move, and "
                                                   "is refused)", "default_text": "unset (the `main` branch)"})

    @field_validator("revision")
    @classmethod
    def _immutable_revision(cls, revision: Optional[str]) -> Optional[str]:
        if revision is not None and not re.fullmatch(COMMIT_HASH, revision):
            raise ValueError(
                f"{revision!r} is not a full commit hash; a branch or tag can move, and a moved one downloads "
                "other files into the shared cache than the sizing counted. Write the 40-character commit from "
                "the model's Hub page (Files and versions, History), e.g. "
                "c1899de289a04d12100db370d81485cdf75e47ca"
            )
        return revision

    @model_validator(mode="before")
    @classmethod
    def _fill_builtin(cls, data: Any) -> Any:
        if isinstance(data, dict):
            name = data.get("name", DEFAULT_MODEL)
            if name in BUILTIN_MODELS:
                return {**BUILTIN_MODELS[name], **data}
        return data

    @model_validator(mode="after")
    def _geometry_complete(self) -> "Model":
        needed = {"layers": self.layers, "kvHeads": self.kv_heads, "headDim": self.head_dim,
                  "parameters": self.parameters}
        missing = [k for k, v in needed.items() if v is None]
        if missing:
            raise ValueError(
                f"model {self.name!r} is not built in ({', '.join(BUILTIN_MODELS)}), so its geometry "
                f"must be given: missing {', '.join(missing)} (copy num_hidden_layers, "
                "num_key_value_heads and head_dim from its config.json, and its parameter count)"
            )
        return self

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def stored_parameters(self) -> int:
        """Parameters in the checkpoint files: what the weights take on disk, in `dtype`."""
        return self.checkpoint_parameters or self.parameters


class Frontend(_Model):
    router_mode: Literal["kv", "round-robin", "random"] = Field("kv", description="`DYN_ROUTER_MODE`: how the "
                                                                "frontend picks a worker")
    replicas: int = Field(1, ge=1, description="frontend pods")
    cpu: Cpu = Field("1", description="each frontend pod's CPU")
    memory: Bytes = Field(units.parse_memory("2Gi"), description="each frontend pod's memory")


# The longest name derived from the graph's: `<graph>-kv-probe-initiator-<10 hex>` (a Job, whose
# name must fit a 63-character label).
GRAPH_NAME_MAX = 63 - len("-kv-probe-initiator-") - 10


PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")


class FrontendSource(_Model):
    """Where requests to the frontend's port may come from, besides the graph namespace: one
    namespace (all its pods) or one address range."""

    namespace: OptionalDnsLabel = Field(None, description="a namespace whose pods may reach the frontend")
    cidr: Optional[Cidr] = Field(None, description="an address range that may reach the frontend (a load "
                                 "balancer's, a node's)", json_schema_extra={"accepts": "a CIDR"})

    @model_validator(mode="after")
    def _one_of(self) -> "FrontendSource":
        if (self.namespace is None) == (self.cidr is None):
            raise ValueError("give exactly one of namespace or cidr, e.g. {namespace: monitoring} or "
                             "{cidr: 192.168.1.0/24}")
        return self


class Graph(_Model):
    # None: the stack name, so each variant's graph is recognisable in `kubectl get dgd`.
    name: OptionalDnsLabel = Field(None, description="the DynamoGraphDeployment's name", json_schema_extra={
        "accepts": f"a DNS label starting with a letter, at most {GRAPH_NAME_MAX} characters (names derived from "
                   "it must fit 63)", "default_text": "the stack name"})
    # None: dynamo-lab-<stack>. One namespace per stack: stacks that share a cluster never
    # declare the same Namespace object.
    namespace: OptionalDnsLabel = Field(None, description="its namespace (one per stack, so stacks sharing a "
                                        "cluster never declare the same object)", json_schema_extra={
                                            "accepts": "a DNS label, not `platform.namespace`",
                                            "default_text": "`dynamo-lab-<stack>`"})
    # How long `pulumi up` waits for the graph's Ready condition (every component ready) before it
    # fails. A first deploy pulls the serving image and loads the model on every worker.
    ready_timeout_seconds: int = Field(1800, gt=0, description="how long `pulumi up` waits for the graph's Ready "
                                       "condition before it fails (`pulumi.com/timeoutSeconds`)")
    # NetworkPolicies in the graph namespace: deny ingress by default, allow it from the namespace's
    # own pods and to the frontend's HTTP port. Off by default: they take effect only where the
    # cluster's network plugin enforces NetworkPolicy, and the lab's has not been checked.
    network_policy: bool = Field(False, description="NetworkPolicies for ingress and egress: every flow the graph "
                                 "makes and nothing else (docs/security.md)")
    # With networkPolicy: who else may reach the frontend's port (the namespace always may).
    frontend_sources: list[FrontendSource] = Field([], description="`networkPolicy`: who may reach the "
                                                   "frontend's port 8000 besides the graph namespace (its "
                                                   "workers and the benchmark)", json_schema_extra={
                                                       "accepts": "`[{namespace: NAME}]` or `[{cidr: CIDR}]` "
                                                                  "entries"})
    # The API server's endpoints, as pods reach them after the Service's address is translated; a
    # stack file cannot know them, so by default the private ranges a lab's control plane lives in
    # (RFC 1918, shared address space, IPv6 unique local): never the Internet.
    api_server_cidrs: list[Cidr] = Field(list(PRIVATE_RANGES), description="`networkPolicy`: the API server's "
                                         "addresses (`kubectl get endpointslices -n default -l "
                                         "kubernetes.io/service-name=kubernetes`), which the frontend and workers "
                                         "reach on 443 and 6443 for Dynamo's discovery; write yours to narrow them",
                                         json_schema_extra={"accepts": "CIDRs"})
    # NetworkPolicy names no host: the Hub (and PyPI, for the benchmark's AIPerf) are address ranges.
    download_cidrs: list[Cidr] = Field(["0.0.0.0/0", "::/0"], description="`networkPolicy`: the addresses the "
                                       "pods that download (pre-pull Jobs, the benchmark; workers without a "
                                       "pre-pull) reach on 443: the Hub, PyPI, or your mirror's range",
                                       json_schema_extra={"accepts": "CIDRs"})

    @field_validator("api_server_cidrs", "download_cidrs")
    @classmethod
    def _some_range(cls, cidrs: list[str]) -> list[str]:
        # A NetworkPolicy rule whose `to` is empty matches every destination.
        if not cidrs:
            raise ValueError("an empty list would be a NetworkPolicy rule with no `to`, which Kubernetes reads as "
                             "every address. Write at least one CIDR, e.g. 192.168.1.10/32, or remove the key")
        return cidrs

    @field_validator("name")
    @classmethod
    def _starts_with_a_letter(cls, name: Optional[str]) -> Optional[str]:
        # The operator names the frontend's Service `<graph>-frontend`; Service names start with a letter.
        if name is not None and not name[0].isalpha():
            raise ValueError(f"{name!r} starts with a digit; the graph's Services are named after it and a "
                             "Service name must start with a letter")
        if name is not None and len(name) > GRAPH_NAME_MAX:
            raise ValueError(f"{name!r} is {len(name)} characters; names derived from it (the probe's Job "
                             f"`<graph>-kv-probe-initiator-<digest>`) must fit 63, so it can have at most "
                             f"{GRAPH_NAME_MAX}. Write a shorter name")
        return name


# --- Workers ------------------------------------------------------------------------------------


# vLLM 0.31.0 ships NixlPullConnector (alias NixlConnector: the decode side READs the KV) and
# NixlPushConnector (the prefill side WRITEs it), but Dynamo 1.6's vLLM component accepts only the
# name NixlConnector among the NIXL ones, and sets the NIXL side-channel host only for it
# (dynamo/vllm/kv_connector_protocols.py, dynamo/vllm/args.py; docs/sources.md).
UNSUPPORTED_CONNECTORS = {
    "NixlPullConnector": "it is vLLM's name for what Dynamo calls NixlConnector (the decode side pulls)",
    "NixlPushConnector": "the prefill side would push, a path vLLM 0.31.0 has but Dynamo 1.6 does not take",
}


def _supported_connector(name: Any) -> Any:
    if name in UNSUPPORTED_CONNECTORS:
        raise ValueError(
            f"{name} is not a connector Dynamo 1.6 accepts: {UNSUPPORTED_CONNECTORS[name]}. Its vLLM "
            "component refuses it (\"Unsupported kv_connector\") at the first disaggregated request, while "
            "the workers report Ready. Write connector: NixlConnector (or remove the key: it is the default)"
        )
    return name


class KvTransfer(_Model):
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
    ucx_tls: UcxTls = Field("tcp,self", description="`UCX_TLS`", json_schema_extra={
        "accepts": "UCX transport names (`tcp`, `self`, `rc`, `cuda_copy`, ..., `^name` for all but), not empty; a "
                   "prefill/decode pair must share one that crosses pods"})
    ucx_rndv_thresh: str = Field("inf", pattern=r"^(inf|auto|\d+[kKmMgG]?[bB]?)$", description="`UCX_RNDV_THRESH`",
                                 json_schema_extra={"accepts": "`inf`, `auto` or a size"})

    @property
    def op(self) -> Literal["READ"]:
        """The NIXL operation that moves the KV through NixlConnector: the decode side READs it. (The
        probe can also measure WRITE, the push path Dynamo 1.6 does not take.)"""
        return "READ"


class WorkerGroup(_Model):
    name: str = Field(max_length=40, description="names the graph component", json_schema_extra={
        "accepts": "a DNS label of at most 40 characters, unique, not `frontend`; `<graph>-<name>` must fit 63"})
    role: Literal["agg", "prefill", "decode"] = Field(
        description="`agg` is component type `worker`; a graph is either all `agg` or has both `prefill` and "
        "`decode`, and each side needs at least one replica in all")
    replicas: int = Field(ge=0, description="workers in this group")
    gpu_class: str = Field(description="where the workers run", json_schema_extra={"accepts": "a key of `gpuClasses`"})
    kv_transfer: KvTransfer = Field(KvTransfer(), description="how the KV moves between prefill and decode workers")
    # vLLM --kv-cache-memory-bytes. None: the GPU class's memory shared among its workers.
    kv_cache_bytes: Optional[Bytes] = Field(None, description="vLLM `--kv-cache-memory-bytes`", json_schema_extra={
        "accepts": "memory, at least one sequence of the worker's `--max-model-len` plus the null block (2,448 "
                   "tokens: 154 blocks of 1.75Mi, 270Mi)",
        "default_text": "the GPU class's budget shared evenly among its workers"})
    cpu_request: Cpu = Field("2", description="each worker's CPU request",
                             json_schema_extra={"accepts": "CPU, at most `cpuLimit`"})
    cpu_limit: Optional[Cpu] = Field(None, description="each worker's CPU limit", json_schema_extra={
        "accepts": "CPU, at least `cpuRequest`", "default_text": "none"})
    # None: the host memory floor from the sizing, as request and limit (Guaranteed QoS).
    memory_limit: Optional[Bytes] = Field(None, description="each worker's memory limit; unset: the floor as "
                                          "request and limit (Guaranteed memory)", json_schema_extra={
                                              "accepts": "memory, at least the floor",
                                              "default_text": "the host memory floor (docs/sizing.md)"})
    # None: equal to the limit.
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
            raise ValueError(f"cpuRequest {self.cpu_request} is above cpuLimit {self.cpu_limit}; Kubernetes "
                             f"rejects that. Lower cpuRequest to at most {self.cpu_limit}, or raise cpuLimit")
        return self

    @model_validator(mode="after")
    def _kv_transfer_only_disaggregated(self) -> "WorkerGroup":
        if self.role == "agg" and "kv_transfer" in self.model_fields_set:
            raise ValueError(
                "kvTransfer applies to prefill and decode workers only; an agg worker keeps its KV "
                "on its own GPU. Remove kvTransfer, or set role to prefill or decode"
            )
        return self

    @property
    def cpu_buffers(self) -> bool:
        """Whether vLLM keeps a host mirror of this worker's KV pool (NixlConnector, cpu buffers)."""
        return self.role in ("prefill", "decode") and self.kv_transfer.buffer_device == "cpu"


# --- Workload and sizing parameters -------------------------------------------------------------


class Workload(_Model):
    """The requests a variant is sized for; the defaults are the lab's (docs/lab.md)."""

    # 2,371 input tokens on average: a shared prefix of 2,000 (one of `prefix_types` prefixes) and
    # 371 unique tokens.
    input_tokens: int = Field(2371, gt=0, description="average input tokens per request (the lab's)")
    prefix_tokens: int = Field(2000, ge=0, description="the shared prefix within them (the rest is unique per "
                               "request)", json_schema_extra={"accepts": ">= 0, less than `inputTokens`"})
    # Distinct shared prefixes the requests draw from: the more, the fewer prefix-cache hits. 24 is
    # the lab's hardest cell, so a stack is sized for its worst case.
    prefix_types: int = Field(24, gt=0, description="distinct prefixes the requests draw from; more means fewer "
                              "prefix-cache hits (24: the lab's hardest cell)")
    output_tokens: int = Field(64, gt=0, description="output tokens per request")
    # The concurrency this variant is sized for; the lab ran 4 and 8.
    concurrency: int = Field(8, gt=0, description="the concurrency the variant is sized for (the lab ran 4 and 8)")
    # The longest sequence (prompt + output) a worker serves, vLLM --max-model-len, written for every
    # worker. vLLM refuses to start unless the KV pool holds one sequence this long, and without the
    # flag it is the model's whole context (Qwen3-0.6B: 40,960 tokens, 4.375 GiB of KV, more than any
    # pool here). None: inputTokens + outputTokens rounded up to a 16-token block. A worker's
    # `--max-model-len` in extraArgs is honoured instead, and checked the same way.
    max_model_len: Optional[int] = Field(
        None, gt=0, description="every worker's `--max-model-len`; each worker's KV pool must hold one sequence "
        "this long plus vLLM's null block, or vLLM refuses to start (without the flag vLLM takes the model's "
        "40,960 tokens, 4.375 GiB of KV, more than any shipped pool)", json_schema_extra={
            "accepts": "at least `inputTokens` + `outputTokens`, at most the model's context",
            "default_text": "`inputTokens` + `outputTokens`, rounded up to a 16-token block "
                            "(`{workload.derivedMaxModelLen}`)"})

    @model_validator(mode="after")
    def _prefix_within_input(self) -> "Workload":
        if self.prefix_tokens >= self.input_tokens:
            raise ValueError(f"prefixTokens {self.prefix_tokens} is not less than inputTokens {self.input_tokens}: "
                             "the shared prefix is part of each request's input, beside its unique tokens. Lower "
                             f"prefixTokens below {self.input_tokens}, or raise inputTokens")
        return self

    @property
    def unique_tokens(self) -> int:
        return self.input_tokens - self.prefix_tokens

    @property
    def derived_max_model_len(self) -> int:
        """The context when none is given: the sized requests (input + output) rounded up to a block."""
        return blocks(self.input_tokens + self.output_tokens) * BLOCK_TOKENS


class Link(_Model):
    rate: LinkRate = Field(units.parse_rate_bits("1gbit"), description="the cross-node link's rate")
    # 1GbE carries 110-117 MB/s of payload in practice (docs/lab.md): 0.92 x 125 MB/s = 115 MB/s.
    # The probe over a veth shaped to 1 Gbit/s (2026-11-30) moved the workers' block READs and
    # WRITEs at 118-121 MB/s, one contiguous region at 115-121 MB/s: the link decides, not the op
    # or pattern, and 115 MB/s stays within 5% (docs/measurements.md).
    efficiency: float = Field(0.92, gt=0, le=1, description="the fraction of the link rate KV transfers get: "
                              "0.92 x 125 MB/s = 115 MB/s")


class MeasuredThroughput(_Model):
    from_group: str = Field(description="the path's prefill group",
                            json_schema_extra={"accepts": "a prefill group of `workers`"})
    to_group: str = Field(description="the path's decode group",
                          json_schema_extra={"accepts": "a decode group of `workers`"})
    bytes_per_second: Throughput = Field(description="the throughput measured on that path (e.g. by the probe)")


class SizingParameters(_Model):
    # Host RSS of a vLLM worker before any KV mirror: the limit that held for aggregated workers.
    vllm_base_memory: Bytes = Field(units.parse_memory("3584Mi"), description="host RSS of a vLLM worker without "
                                    "a KV mirror")
    # Headroom over the KV host mirror for per-layer copy temporaries and NIXL/UCX internals.
    host_headroom_percent: float = Field(10, ge=0, le=100, description="headroom over the KV mirror for copy "
                                         "temporaries and NIXL/UCX")
    # ESTIMATE: CUDA context, activations and runtime buffers of one vLLM worker beyond weights + KV.
    gpu_overhead_per_worker: Bytes = Field(units.parse_memory("1536Mi"), description="ESTIMATE: CUDA context, "
                                           "activations, runtime buffers per worker")
    # Same-node transfer throughput. None: SAME_NODE_BYTES_PER_SECOND for the stack's NIXL op (READ
    # or WRITE, from kvTransfer.connector); a value here overrides both.
    same_node_bytes_per_second: Optional[Throughput] = Field(
        None, description="same-node KV transfer throughput (NIXL over host TCP); unset, a development machine's "
        "measurement (an ESTIMATE for the lab; [measurements.md](measurements.md)) until "
        "`sizing.measured` holds the lab's own", json_schema_extra={
            "default_text": f"unset: `{units.format_bytes(SAME_NODE_BYTES_PER_SECOND['READ'])}`, the block READ "
                            "NixlConnector makes"})
    link: Link = Field(Link(), description="the cross-node link")
    measured: list[MeasuredThroughput] = Field([], description="a measured throughput replaces the default for "
                                               "that path", json_schema_extra={
                                                   "accepts": "`[{fromGroup, toGroup, bytesPerSecond}]`; one entry "
                                                              "per path"})


# How long a finished probe or benchmark Job stays, with its pods and their logs, which hold its
# result (read with the stack outputs probeLogs and benchLogs): a day to collect it, then the
# TTL-after-finished controller deletes them (Kubernetes, "Automatic Cleanup for Finished Jobs").
FINISHED_JOB_TTL = 86400
# How long the benchmark waits for the frontend to list the model: workers may still be loading it.
BENCH_READY_WAIT_SECONDS = 1800


class Probe(_Model):
    """In-cluster KV-transfer probe (infra/payloads/kv_probe.py) deployed next to the graph; off by default."""

    enabled: bool = Field(False, description="deploy the in-cluster KV-transfer probe (docs/probe.md)",
                          json_schema_extra={"accepts": "true/false (disaggregated stacks only)"})
    # None: the first prefill group / the first decode group.
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
    # The Jobs, their pods and so their logs (the result) are deleted this long after they end.
    ttl_seconds_after_finished: int = Field(FINISHED_JOB_TTL, ge=0, description="how long the probe Jobs, their "
                                            "pods and logs (the result, `probeLogs`) stay after they end "
                                            "(`ttlSecondsAfterFinished`); read the result before")


class Benchmark(_Model):
    """The sweep: defaults are the lab's matrix (prefix types x concurrency, 3 runs per point)."""

    prefix_types: list[int] = Field([2, 7, 12, 24], min_length=1, description="the sweep's prefix types (the "
                                    "lab's matrix)", json_schema_extra={"accepts": "a list of positive integers"})
    concurrency: list[int] = Field([4, 8], min_length=1, description="the sweep's concurrencies (the lab's "
                                   "matrix)", json_schema_extra={"accepts": "a list of positive integers"})
    runs: int = Field(3, ge=1, description="measured runs per point of the matrix")
    # Each run's requests: a shared prefix (one of `prefix_types`) + a unique part, and the output.
    # None: the workload's (config.load fills them in), so the sweep measures what the stack is sized for.
    prefix_tokens: Optional[int] = Field(None, ge=0, description="each run's requests: the shared prefix",
                                         json_schema_extra={"default_text": "the workload's "
                                                            "(`{workload.prefixTokens}`)"})
    unique_tokens: Optional[int] = Field(None, gt=0, description="each run's requests: the unique part",
                                         json_schema_extra={"default_text": "the workload's, `inputTokens` - "
                                                            "`prefixTokens` (`{workload.uniqueTokens}`)"})
    output_tokens: Optional[int] = Field(None, gt=0, description="each run's requests: the output tokens",
                                         json_schema_extra={"default_text": "the workload's "
                                                            "(`{workload.outputTokens}`)"})
    # Requests per run = this x concurrency.
    requests_per_concurrency: int = Field(8, gt=0, description="requests per run = this x concurrency")
    # In the cluster: a Job running AIPerf against the frontend (opt-in).
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
    # and every dependency by hash; config.checks refuses another (a hash-pinned lock holds one).
    aiperf_version: str = Field("0.13.0", pattern=r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$",
                                description="the AIPerf release the Job installs, hash-pinned with its "
                                "dependencies (infra/payloads/aiperf-requirements.txt; `python3 dev.py lock-bench`)",
                                json_schema_extra={"accepts": "the version the requirements pin (0.13.0)"})
    # Where the Job runs (required node affinity); none: anywhere. It requests no GPU.
    node_selector: list[NodeRequirement] = Field([], description="where the benchmark Job runs (a required node "
                                                 "affinity; it requests no GPU); none: anywhere",
                                                 json_schema_extra={"accepts": "node requirements (below)"})
    # AIPerf tokenizes with the served model's tokenizer (downloaded in the cluster).
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


# --- Model cache --------------------------------------------------------------------------------


class ModelCacheClaim(_Model):
    """The PersistentVolumeClaim of `modelCache.mode: pvc`: an existing one, or one dynamo-lab creates."""

    # An existing claim in the graph namespace: dynamo-lab creates none and cannot see its size.
    claim_name: OptionalDnsLabel = Field(None, description="an existing claim in the graph namespace; unset: "
                                         "dynamo-lab creates `<graph>-model-cache`")
    # A new claim, named <graph>-model-cache. None: the cluster's default StorageClass.
    storage_class: Optional[str] = Field(None, description="the StorageClass of the claim dynamo-lab creates",
                                         json_schema_extra={"accepts": "a name (refused beside `claimName`)",
                                                            "default_text": "the cluster's default class"})
    size: Bytes = Field(units.parse_memory("10Gi"), description="the size of the claim dynamo-lab creates",
                        json_schema_extra={"accepts": "memory, at least the model's disk size (refused beside "
                                           "`claimName`)"})
    # What the claim allows (for an existing claim: what it was created with). ReadWriteMany is
    # what Dynamo's model-caching guide uses; ReadWriteOnce lets one node mount it.
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = Field(
        "ReadWriteMany", description="the claim's access mode; for an existing claim, the mode it was created "
        "with", json_schema_extra={"accepts": "`ReadWriteMany`, or `ReadWriteOnce` when all workers run on one "
                                   "node"})

    @model_validator(mode="after")
    def _new_claim_keys_only_for_a_new_claim(self) -> "ModelCacheClaim":
        given = [alias for name, alias in (("storage_class", "storageClass"), ("size", "size"))
                 if name in self.model_fields_set]
        if self.claim_name is not None and given:
            verb = "describes" if len(given) == 1 else "describe"
            raise ValueError(
                f"{' and '.join(given)} {verb} a claim dynamo-lab creates, but claimName names an "
                f"existing one, which it does not change. Remove {' and '.join(given)}, or remove "
                "claimName to have a claim created"
            )
        return self


class PrePull(_Model):
    """Job(s) that download the model into the cache, once per cache location, before the workers start."""

    enabled: bool = Field(True, description="download the model into each cache with a Job before the workers "
                          "start")
    # The whole Job, pulling the serving image on the node included.
    timeout_seconds: int = Field(1800, gt=0, description="the pre-pull Job's deadline, image pull included")


# Where a node keeps data of its own: the default cache's root and the usual mount points of data
# disks. A cache lies under one of them unless modelCache.allowedRoots says otherwise.
DATA_ROOTS = ("/var/lib/dynamo-lab", "/srv", "/data", "/mnt")
# A stack's node cache is `<hostPath>/dynamo-lab-cache.<graph namespace>`: the last component names
# this project, so that whatever namespace a stack picks (a DNS label: `bin`, `sudo`, `cron`), the
# directory the pre-pull makes group-writable is one no other software uses, never the node's own
# that shares the namespace's name under a widened allowedRoot (/home/ubuntu/bin, /var/lib/sudo,
# /var/spool/cron). A `.` cannot appear in a namespace, so no stack's namespace alone is such a
# name and two stacks' namespaces never give one directory. The prefix and a namespace's 63
# characters at most make 80, far under the 255 of a file name (Linux NAME_MAX).
NODE_CACHE_PREFIX = "dynamo-lab-cache."


class ModelCache(_Model):
    """Where the workers' Hugging Face cache lives, so the model is fetched once per node, not per pod."""

    # The lab has two GPU nodes and no storage both can mount, so each node keeps its own copy in a
    # directory, which outlives `pulumi destroy`. nodeVolume (the default) reaches it through a
    # PersistentVolume per node that the stack creates, so the graph's pods mount only claims and its
    # namespace can enforce Pod Security baseline; hostPath mounts the directory into the pods, which
    # only a privileged namespace allows. off: every worker pod downloads the model; pvc: a
    # PersistentVolumeClaim. (YAML 1.1 readers turn an unquoted `off` into false: read false as off.)
    mode: Annotated[Literal["off", "nodeVolume", "hostPath", "pvc"],
                    BeforeValidator(lambda v: "off" if v is False else v)] = Field(
        "nodeVolume", description="where the workers' Hugging Face cache lives: a directory on each GPU node "
        "through a PersistentVolume per node (`nodeVolume`) or mounted directly (`hostPath`, needs a privileged "
        "namespace), a PersistentVolumeClaim (`pvc`), or nowhere (`off`: each pod downloads the model); see "
        "docs/model-cache.md",
        json_schema_extra={"accepts": "`nodeVolume`, `hostPath`, `pvc`, `off` (or `false`)"})
    # The directory on every GPU node that runs workers (absolute).
    host_path: str = Field("/var/lib/dynamo-lab/hf-cache", description="`nodeVolume` and `hostPath`: the directory "
                           "on each GPU node under which each stack keeps its own cache, `<hostPath>/dynamo-lab-cache."
                           "<graph namespace>`", json_schema_extra={
                               "accepts": "an absolute path without `..`; `<hostPath>/dynamo-lab-cache.<graph "
                                          "namespace>`, normalized, must lie under `allowedRoots` and outside "
                                          "the node's system, kubelet, container-runtime and CNI directories (see "
                                          "docs/model-cache.md)"})
    # The node directory is judged whole, after <hostPath>/dynamo-lab-cache.<namespace> is joined and
    # normalized (config.checks): it must lie under one of these, and never in a directory of the
    # node's system, kubelet, container runtime or network plugin, whatever this list says.
    allowed_roots: list[str] = Field(
        list(DATA_ROOTS), description="`nodeVolume` and `hostPath`: the node directories a cache may lie under; "
        "add one to widen them (a system, kubelet, container-runtime or CNI directory stays refused)",
        json_schema_extra={"accepts": "absolute paths without `..`"})
    pvc: ModelCacheClaim = Field(ModelCacheClaim(), description="the claim of `mode: pvc`")
    pre_pull: PrePull = Field(PrePull(), description="the Job(s) that download the model into the cache")


# --- The cluster --------------------------------------------------------------------------------


class ClusterTarget(_Model):
    """The cluster a stack deploys to, from Pulumi's own keys `kubernetes:context` and
    `kubernetes:kubeconfig` (not `dynamo-lab:*`): every Kubernetes resource and the Helm release
    use one explicit provider built from them, never the default provider."""

    context: str = Field(min_length=1, description="the kubeconfig context of the cluster this stack deploys to",
                         json_schema_extra={"accepts": "a context name"})
    # A kubeconfig file; None: the usual lookup (KUBECONFIG, then ~/.kube/config).
    kubeconfig: Optional[str] = Field(None, description="the kubeconfig file to read it from; its contents are "
                                      "refused", json_schema_extra={
                                          "accepts": "a file path",
                                          "default_text": "the usual lookup (`KUBECONFIG`, then `~/.kube/config`)"})

    @field_validator("kubeconfig")
    @classmethod
    def _a_path(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and ("\n" in value or value.lstrip().startswith(("apiVersion", "{"))):
            raise ValueError("write the path of a kubeconfig file, not its contents (contents would sit in "
                             "the stack file in plain text), e.g. kubernetes:kubeconfig: ~/.kube/lab.yaml")
        return value


# --- The whole stack ----------------------------------------------------------------------------

# Where a worker's context length (vLLM --max-model-len) comes from.
ContextSource = Literal["extraArgs", "workload.maxModelLen", "derived"]


class StackConfig(_Model):
    gpu_classes: dict[str, GpuClass] = Field(
        default_factory=lambda: {k: GpuClass.model_validate(v) for k, v in DEFAULT_GPU_CLASSES.items()},
        description="the kinds of GPU node, by name; replaces the defaults (\"GPU classes and node placement\", below) "
        "when set", json_schema_extra={"accepts": "a map of name to a GPU class"},
    )
    platform: Platform = Field(Platform(), description="the Dynamo platform chart")
    model: Model = Field(Model(), description="the served model")
    image: OperatorImage = Field(SERVING_IMAGE, description="every container's image", json_schema_extra={
        "accepts": "an image whose tag is a semantic version, with an optional leading `v` (the Dynamo operator's "
                   "rule)"})
    frontend: Frontend = Field(Frontend(), description="the frontend pods")
    graph: Graph = Field(Graph(), description="the DynamoGraphDeployment")
    workers: list[WorkerGroup] = Field(min_length=1, description="the worker groups",
                                       json_schema_extra={"accepts": "a list of worker groups (below)"})
    workload: Workload = Field(Workload(), description="the requests the variant is sized for")
    sizing: SizingParameters = Field(SizingParameters(), description="the sizing's parameters")
    probe: Probe = Field(Probe(), description="the in-cluster KV-transfer probe")
    benchmark: Benchmark = Field(Benchmark(), description="the benchmark sweep")
    model_cache: ModelCache = Field(ModelCache(), description="the workers' Hugging Face cache")
    hf_token: Optional[SecretStr] = Field(None, description="Hugging Face token; only the pods that download from "
                                          "the Hub read it (docs/security.md)", json_schema_extra={
        "accepts": "a Pulumi secret only: `pulumi config set --secret hfToken ... --stack STACK`; a plain-text "
                   "token is refused (and never shown)"})
    # Filled by config.load from the kubernetes:* keys (it refuses a `dynamo-lab:cluster` key).
    cluster: Optional[ClusterTarget] = Field(None, description="the cluster the stack deploys to, from the "
                                             "`kubernetes:*` keys")

    @property
    def worker_nodes(self) -> list[str]:
        """The GPU classes that run workers (replicas > 0), in order: one node each in this project."""
        return list(dict.fromkeys(g.gpu_class for g in self.workers if g.replicas > 0))

    @property
    def model_cache_claim(self) -> str:
        """The model cache's claim: the one named, else the one dynamo-lab creates, <graph>-model-cache."""
        return self.model_cache.pvc.claim_name or f"{self.graph.name}-model-cache"

    def context_length(self, group: WorkerGroup) -> tuple[int, ContextSource]:
        """The group's vLLM --max-model-len and where it comes from: the group's extraArgs, else
        workload.maxModelLen, else the sized requests (inputTokens + outputTokens) rounded up to a
        whole block. `config.checks` refuses an extraArgs value that is not a token count."""
        given = group.extra_arg("--max-model-len")
        if given is not None:
            tokens = vllm_int(given)
            if tokens is None:
                raise ValueError(f"--max-model-len {given!r} is not a token count")
            return tokens, "extraArgs"
        if self.workload.max_model_len is not None:
            return self.workload.max_model_len, "workload.maxModelLen"
        return self.workload.derived_max_model_len, "derived"

    @property
    def node_cache_directory(self) -> str:
        """The directory on each GPU node that a node cache (nodeVolume, hostPath) really is: the
        stack's own `<modelCache.hostPath>/dynamo-lab-cache.<graph namespace>` (NODE_CACHE_PREFIX),
        normalized (fields.node_path), the path the PersistentVolume or the pods' hostPath and the
        pre-pull's root step use."""
        return node_path(f"{self.model_cache.host_path}/{NODE_CACHE_PREFIX}{self.graph.namespace}")

    @property
    def creates_model_cache_claim(self) -> bool:
        """Whether dynamo-lab creates the model cache's claim: a pvc cache with no claimName given."""
        return self.model_cache.mode == "pvc" and self.model_cache.pvc.claim_name is None
