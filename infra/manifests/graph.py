"""Pure builder: a stack's DynamoGraphDeployment (nvidia.com/v1beta1) as a plain dict.

Shape from Dynamo's v1beta1 CRD and its vLLM examples (docs/sources.md): spec.components[] with
name, type (frontend|worker|prefill|decode), replicas and a podTemplate whose serving container is
named `main`. Also the helpers other builders share: node affinity (and its text) and the workers'
UCX env.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from infra import names, prefix_cache, units
from infra.config.schema import KvTransfer, NodeRequirement, StackConfig, WorkerGroup
from infra.manifests import BENCHMARK_JOB, JOB_LABEL, MODEL_PULL_JOB, kubectl, match_expressions, model_cache, security
from infra.resolved import ContextSource, ResolvedStack
from infra.sizing import GroupSizing, StackSizing

API_VERSION = "nvidia.com/v1beta1"
KIND = "DynamoGraphDeployment"
HF_TOKEN_SECRET = "hf-token"
FRONTEND_PORT = 8000  # dynamo.frontend's HTTP port (operator default)

COMPONENT_TYPE = {"agg": "worker", "prefill": "prefill", "decode": "decode"}
KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
# Workers publish KV cache events for the KV router (upstream disagg_router.yaml / agg_router.yaml):
# aggregated workers and prefill workers are the ones the router picks by KV overlap.
KV_EVENTS_CONFIG = {
    "publisher": "zmq",
    "topic": "kv-events",
    "endpoint": "tcp://*:20080",
    "enable_kv_cache_events": True,
}


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def kv_transfer_config(group: WorkerGroup) -> Optional[str]:
    if group.role == "agg":
        return None
    return _json({
        "kv_connector": group.kv_transfer.connector,
        "kv_role": KV_ROLE[group.role],
        "kv_buffer_device": group.kv_transfer.buffer_device,
    })


def worker_args(cfg: StackConfig, group: WorkerGroup, sized: GroupSizing) -> list[str]:
    args = ["--model", cfg.model.name, "--disaggregation-mode", group.role]
    transfer = kv_transfer_config(group)
    if transfer:
        args += ["--kv-transfer-config", transfer]
    if cfg.frontend.router_mode == "kv" and group.role in ("agg", "prefill"):
        args += ["--kv-events-config", _json(KV_EVENTS_CONFIG)]
    # Pin the KV pool so host and GPU memory are known exactly. The utilization fraction is this
    # worker's share of the GPU: vLLM refuses to start when free memory is below utilization x total
    # ("Free memory on device ... is less than desired GPU memory utilization"), which the default
    # 0.9 guarantees for every worker but the first on a shared GPU.
    args += ["--kv-cache-memory-bytes", str(sized.kv_cache_bytes),
             "--gpu-memory-utilization", f"{sized.gpu_memory_utilization:.2f}"]
    # The block size the sizing rests on (vLLM would otherwise take the attention backend's choice),
    # and a bounded context: without --max-model-len vLLM takes the model's whole context (Qwen3-0.6B:
    # 40,960 tokens, 4.375 GiB of KV) and exits when the pool cannot hold it. A --max-model-len in
    # extraArgs is the group's own (the sizing checked it), so it is not written twice.
    args += ["--block-size", str(prefix_cache.BLOCK_TOKENS)]
    if sized.max_model_len_source is not ContextSource.EXTRA_ARGS:
        args += ["--max-model-len", str(sized.max_model_len)]
    if cfg.model.revision is not None:
        args += ["--revision", cfg.model.revision]
    if group.tensor_parallel > 1:
        # The ranks split the heads (the sizing's per-GPU weights and pool); the pod requests as many GPUs.
        args += ["--tensor-parallel-size", str(group.tensor_parallel)]
    return args + list(group.extra_args)


def node_affinity(rules: list[NodeRequirement]) -> dict[str, Any]:
    """Required node affinity: one term whose match expressions are ANDed."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": match_expressions(rules)}]}}}


def describe_requirement(req: dict[str, Any]) -> str:
    """'nvidia.com/gpu.memory Gt 20000' (the docs' and the stack output's way of writing a rule)."""
    return f"{req['key']} {req['operator']} {','.join(req.get('values') or [])}".strip()


def describe_term(expressions: list[dict[str, Any]]) -> str:
    """A node selector term, its requirements joined by 'and' (they are ANDed)."""
    return " and ".join(describe_requirement(e) for e in expressions)


def _resources(cpu_request: str, cpu_limit: Optional[str], mem_request: int, mem_limit: int,
               devices: Optional[dict[str, int]] = None) -> dict[str, Any]:
    """Requests and limits; `devices`: extended resources (GPUs, an RDMA device) and their counts."""
    requests = {"cpu": cpu_request, "memory": units.quantity(mem_request)}
    limits: dict[str, Any] = {"memory": units.quantity(mem_limit)}
    if cpu_limit:
        limits["cpu"] = cpu_limit
    for resource, count in (devices or {}).items():
        requests[resource] = limits[resource] = str(count)
    return {"requests": requests, "limits": limits}


# The label the spread rules select a group's pods by, on its pod template.
GROUP_LABEL = "dynamo-lab/worker-group"
HOSTNAME = "kubernetes.io/hostname"


def spread_rules(stack: ResolvedStack, group: WorkerGroup) -> tuple[dict[str, Any], dict[str, Any]]:
    """The group's spread over its class's nodes, as (pod template labels, pod spec fields, an
    `affinity` among them merged with the node affinity): none,
    a topology spread constraint of maxSkew 1 per node (even), or required pod anti-affinity against
    its own pods per node (onePerNode). Both count only nodes the pod's node affinity selects."""
    if group.spread == "none":
        return {}, {}
    labels = {GROUP_LABEL: stack.service(group)}
    mine = {"matchLabels": labels}
    if group.spread == "even":
        return labels, {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOSTNAME,
                                                       "whenUnsatisfiable": "DoNotSchedule", "labelSelector": mine}]}
    return labels, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": mine, "topologyKey": HOSTNAME}]}}}


def ucx_env(kv: KvTransfer) -> dict[str, str]:
    """The UCX settings a disaggregated worker (and the probe standing in for it) runs with.
    The lab's: TCP-only UCX with rendezvous off, eager copies through the CPU buffers (docs/sources.md)."""
    return {"UCX_TLS": kv.ucx_tls, "UCX_RNDV_THRESH": kv.ucx_rndv_thresh}


def worker_env(group: WorkerGroup) -> list[dict[str, str]]:
    if group.role == "agg":
        return []
    return [{"name": k, "value": v} for k, v in ucx_env(group.kv_transfer).items()]


def with_hf_token(cfg: StackConfig, container: dict[str, Any]) -> dict[str, Any]:
    """`container`, reading the token Secret's HF_TOKEN when the stack has a token (appended last).
    Only for what downloads from the Hub: the pre-pull Jobs, the benchmark's tokenizer fetch, and
    workers that download the model themselves (no pre-pull); see `workers_download`."""
    if cfg.hf_token is not None:
        container["envFrom"] = [{"secretRef": {"name": HF_TOKEN_SECRET}}]
    return container


def workers_download(cfg: StackConfig) -> bool:
    """Whether the workers fetch the model from the Hub themselves: no cache, or one no pre-pull
    fills. Pre-pulled, they run with HF_HUB_OFFLINE=1 and never need the token."""
    return not model_cache.pre_pulled(cfg)


def _container(cfg: StackConfig, extra: dict[str, Any]) -> dict[str, Any]:
    return security.container({"name": "main", "image": cfg.image, **extra})


# The graph's pods keep their ServiceAccount token: Dynamo's Kubernetes discovery has every worker
# publish itself as a DynamoWorkerMetadata object and the frontend read them (the CRD
# nvidia.com_dynamoworkermetadatas.yaml), through the Role the operator grants the graph.
def _pod_spec(**fields: Any) -> dict[str, Any]:
    return {"securityContext": security.pod(), **fields}


def frontend_component(cfg: StackConfig) -> dict[str, Any]:
    fe = cfg.frontend
    main = _container(cfg, {
        "env": [{"name": "DYN_ROUTER_MODE", "value": fe.router_mode}],
        "resources": _resources(fe.cpu, None, fe.memory, fe.memory),
    })
    # No model cache and no token here: with Dynamo's self-hosted metadata (DYN_SELF_HOST_METADATA, on
    # by default) the frontend fetches the config and tokenizer from a worker over HTTP, never from
    # the Hub (lib/llm/src/local_model.rs).
    spec = _pod_spec(containers=[main])
    return {"name": "frontend", "type": "frontend", "replicas": fe.replicas, "podTemplate": {"spec": spec}}


def worker_component(stack: ResolvedStack, group: WorkerGroup, sized: GroupSizing) -> dict[str, Any]:
    cfg = stack.config
    gpu = cfg.gpu_classes[group.gpu_class]
    main = _container(cfg, {
        "command": ["python3", "-m", "dynamo.vllm"],
        "args": worker_args(cfg, group, sized),
        "resources": _resources(group.cpu_request, group.cpu_limit, sized.memory_request_bytes,
                                sized.memory_limit_bytes, stack.placement.devices(group)),
    })
    if workers_download(cfg):
        with_hf_token(cfg, main)
    labels, spread = spread_rules(stack, group)
    affinity = {**node_affinity(gpu.node_selector), **spread.pop("affinity", {})}
    spec = _pod_spec(affinity=affinity, containers=[main], **spread)
    env = worker_env(group)
    if model_cache.enabled(cfg):
        env += model_cache.env(cfg)
        # Read-only once the pre-pull filled it: no worker can change the files another one loads.
        main["volumeMounts"] = [model_cache.mount(read_only=model_cache.pre_pulled(cfg))]
        spec["volumes"] = [model_cache.volume(stack, group.gpu_class)]
    if env:
        main["env"] = env
    template: dict[str, Any] = {"metadata": {"labels": labels}, "spec": spec} if labels else {"spec": spec}
    return {"name": group.name, "type": COMPONENT_TYPE[group.role], "replicas": group.replicas,
            "podTemplate": template}


def deployment(stack: ResolvedStack, sizing: StackSizing) -> dict[str, Any]:
    """The DynamoGraphDeployment: the frontend and one component per worker group."""
    cfg = stack.config
    components = [frontend_component(cfg)]
    components += [worker_component(stack, g, sizing.group(g.name)) for g in cfg.workers]
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": cfg.graph.name, "namespace": cfg.graph.namespace,
                         "annotations": ready_annotations(cfg)},
            "spec": {"components": components}}


def ready_annotations(cfg: StackConfig) -> dict[str, str]:
    """`pulumi up` waits for the graph to serve: pulumi-kubernetes awaits a custom resource only with
    `pulumi.com/waitFor`, and the operator sets the Ready condition once every component is ready
    (the CRD's printer column `.status.conditions[?(@.type=="Ready")]`). Without it, an OOMKill, an
    image that cannot be pulled or a pod that never schedules would still end in "update succeeded"."""
    return {"pulumi.com/waitFor": "condition=Ready", "pulumi.com/timeoutSeconds": str(cfg.graph.ready_timeout_seconds)}


# Labels the operator puts on the graph's pods (deploy/operator's consts: KubeLabelDynamoComponentType,
# KubeLabelDynamoGraphDeploymentName).
COMPONENT_TYPE_LABEL = "nvidia.com/dynamo-component-type"
GRAPH_NAME_LABEL = "nvidia.com/dynamo-graph-deployment-name"


# Where the cluster's DNS runs: CoreDNS's Service and pods keep kube-dns's labels in kubeadm, k3s
# and RKE2 (k8s-app=kube-dns in kube-system).
DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
# The API server as pods reach it: the `kubernetes` Service's 443, translated to the endpoints'
# port (6443 for kubeadm, k3s and RKE2) before the policy sees it.
API_SERVER_PORTS = [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
HTTPS = [{"protocol": "TCP", "port": 443}]


def _namespace_peer(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def _ip_peers(cidrs: list[str]) -> list[dict[str, Any]]:
    return [{"ipBlock": {"cidr": cidr}} for cidr in cidrs]


def network_policies(cfg: StackConfig) -> list[dict[str, Any]]:
    """graph.networkPolicy: every pod of the graph namespace is denied all ingress and egress, then
    given the flows the graph makes (tests/infra/manifests/test_network_flows.py lists them):
      - within the namespace, both ways: frontend to workers (requests, KV events, metadata), the
        workers' NIXL side channel and UCX transfers, the probe's sides, the benchmark to the frontend;
      - DNS, for every pod;
      - the API server, for the frontend and workers (Dynamo's Kubernetes discovery);
      - the platform's namespace, for the frontend and workers (its services, e.g. NATS or etcd when
        platform.values installs them);
      - HTTPS to graph.downloadCidrs for what downloads: the pre-pull Jobs, the benchmark (AIPerf
        from PyPI, the tokenizer from the Hub), and the workers only when no pre-pull fills their cache;
      - the frontend's port from graph.frontendSources, beside the namespace.
    `kubectl port-forward` reaches a pod inside its own network namespace, which no policy governs."""
    if not cfg.graph.network_policy:
        return []
    g = cfg.graph
    ns, name = g.namespace, g.name

    def policy(suffix: str, selector: dict[str, Any], ingress: Optional[list[dict[str, Any]]] = None,
               egress: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"podSelector": selector, "policyTypes": []}
        for kind, rules in (("Ingress", ingress), ("Egress", egress)):
            if rules is not None:
                spec["policyTypes"].append(kind)
                spec[kind.lower()] = rules
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": names.network_policy(name, suffix), "namespace": ns}, "spec": spec}

    graph_pods = {"matchLabels": {GRAPH_NAME_LABEL: name}}  # the operator's label on frontend and workers
    frontend = {"matchLabels": {COMPONENT_TYPE_LABEL: "frontend", GRAPH_NAME_LABEL: name}}
    downloaders = [{"matchExpressions": [{"key": JOB_LABEL, "operator": "In",
                                          "values": [MODEL_PULL_JOB, BENCHMARK_JOB]}]}]
    if workers_download(cfg):
        downloaders.append({"matchExpressions": [
            {"key": GRAPH_NAME_LABEL, "operator": "In", "values": [name]},
            {"key": COMPONENT_TYPE_LABEL, "operator": "In", "values": sorted(set(COMPONENT_TYPE.values()))}]})
    sources = [{"podSelector": {}}] + [_namespace_peer(s.namespace) if s.namespace else {"ipBlock": {"cidr": s.cidr}}
                                       for s in g.frontend_sources]
    policies = [
        policy("default-deny", {}, ingress=[], egress=[]),
        policy("within-namespace", {}, ingress=[{"from": [{"podSelector": {}}]}],
               egress=[{"to": [{"podSelector": {}}]}]),
        policy("dns", {}, egress=[{"to": [DNS_PEER], "ports": DNS_PORTS}]),
        policy("api-server", graph_pods, egress=[{"to": _ip_peers(g.api_server_cidrs), "ports": API_SERVER_PORTS}]),
        policy("platform", graph_pods, egress=[{"to": [_namespace_peer(cfg.platform.namespace)]}]),
        policy("frontend-http", frontend, ingress=[{"from": sources,
                                                    "ports": [{"protocol": "TCP", "port": FRONTEND_PORT}]}]),
    ]
    policies += [policy(f"downloads{'-' + str(i) if i else ''}", selector,
                        egress=[{"to": _ip_peers(g.download_cidrs), "ports": HTTPS}])
                 for i, selector in enumerate(downloaders)]
    return policies


def frontend_service(cfg: StackConfig) -> str:
    # The operator names a component's Service <graph>-<component> (Dynamo docs port-forward examples).
    return names.service(cfg.graph.name, "frontend")


def frontend_url(cfg: StackConfig) -> str:
    return f"http://{frontend_service(cfg)}.{cfg.graph.namespace}.svc.cluster.local:{FRONTEND_PORT}"


def port_forward_command(cfg: StackConfig) -> str:
    return (f"{kubectl(cfg.target)} port-forward -n {cfg.graph.namespace} svc/{frontend_service(cfg)} "
            f"{FRONTEND_PORT}:{FRONTEND_PORT}")


def placement(cfg: StackConfig) -> dict[str, str]:
    out = {}
    for g in cfg.workers:
        rule = describe_term(match_expressions(cfg.gpu_classes[g.gpu_class].node_selector))
        out[g.name] = f"{g.replicas} x {g.role} on {g.gpu_class} ({rule})"
    return out
