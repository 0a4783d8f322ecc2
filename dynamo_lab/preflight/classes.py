"""GPU classes to nodes: each class with workers selects its nodes (as many as its `nodes` plans;
fewer or more is weighed in `node_count`), and no two classes the same node. When a class selects
none, the problem says why each GPU node fails its selector and which label would make it match."""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from dynamo_lab.preflight import selectors
from dynamo_lab.preflight.cluster_data import ClusterData, Node
from dynamo_lab.preflight.report import ClassRow, Problem, Report
from infra.catalogue import GPU_MEMORY_LABEL
from infra.config.schema import GpuClass, StackConfig
from infra.manifests import model_cache
from infra.manifests.graph import describe_term, match_expressions
from infra.resolved import ResolvedStack
from infra.sizing import StackSizing

NVIDIA_SMI_MEMORY = "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits"


def class_expressions(cls: GpuClass) -> list[dict]:
    return match_expressions(cls.node_selector)


def _gpu_nodes(data: ClusterData) -> list[Node]:
    return [n for n in data.nodes if any(k.startswith("nvidia.com/gpu") and v > 0 for k, v in n.allocatable.items())]


def _label_value(req: dict) -> str:
    """A value that satisfies `req` for a label the node lacks (the GPU memory label: its real MiB)."""
    op, values = req["operator"], req.get("values") or []
    if req["key"] == GPU_MEMORY_LABEL and op in ("Gt", "Lt"):
        return f"<its GPU memory in MiB: {NVIDIA_SMI_MEMORY}>"
    if op == "In":
        return values[0]
    if op in ("Gt", "Lt"):
        return str(int(values[0]) + (1 if op == "Gt" else -1))
    return ""


def _no_node(name: str, expr: list[dict], candidates: list[Node]) -> Problem:
    reasons, commands, mismatched = [], [], []
    for node in candidates:
        failing = [e for e in expr if not selectors.matches(e, node.labels)]
        reasons.append(f"{node.name} {'; '.join(selectors.why_not(e, node.labels) for e in failing)}")
        for e in failing:
            if e["key"] not in node.labels and e["operator"] in ("In", "Exists", "Gt", "Lt"):
                commands.append(f"kubectl label node {node.name} {e['key']}={_label_value(e)}")
            else:
                mismatched.append(node.name)
    rule = describe_term(expr)
    looked = f" GPU nodes not taken by another class: {', '.join(reasons)}." if reasons else (
        " No node advertises an nvidia.com/gpu resource: is the NVIDIA device plugin installed?")
    fixes = []
    if commands:
        gfd = (f"GPU feature discovery sets {GPU_MEMORY_LABEL} (MiB) on every GPU node; without it, "
               if any(f" {GPU_MEMORY_LABEL}=" in c for c in commands) else "")
        fixes.append(f"label the node that holds the {name} GPU: {gfd}{' / '.join(commands)}")
    if mismatched or not commands:
        fixes.append(f"change gpuClasses.{name}.nodeSelector to match that node (docs/configuration.md, 'GPU classes')")
    fix = "; or ".join(fixes)
    return Problem(f"gpuClasses.{name}", "node selector",
                   f"no node matches {rule}, so its workers would stay Pending.{looked}", fix[0].upper() + fix[1:])


def place(cfg: StackConfig, sizing: StackSizing, data: ClusterData, report: Report) -> dict[str, list[Node]]:
    """Each used GPU class's nodes (any number: the packing places its workers over them, and
    `node_count` compares them with gpuClasses.<name>.nodes); problems for classes with none, and
    for two classes on one node."""
    # The sizing lists only classes with workers; the others count 0.
    workers: dict[str, int] = defaultdict(int, {fit.gpu_class: fit.workers for fit in sizing.gpus})
    matched = {name: [n for n in data.nodes if selectors.term_matches(class_expressions(cls), n.labels)]
               for name, cls in cfg.gpu_classes.items()}
    placed = {name: nodes for name, nodes in matched.items() if workers[name] and nodes}
    failed = set()
    for name in (c for c in cfg.gpu_classes if workers[c]):
        if not matched[name]:
            taken = {n.name for nodes in placed.values() for n in nodes}
            candidates = [n for n in _gpu_nodes(data) if n.name not in taken]
            report.problems.append(_no_node(name, class_expressions(cfg.gpu_classes[name]), candidates))
            failed.add(name)
    by_node: dict[str, list[str]] = defaultdict(list)
    for name, nodes in placed.items():
        for node in nodes:
            by_node[node.name].append(name)
    for node_name, shared in by_node.items():
        if len(shared) > 1:
            report.problems.append(Problem(
                "gpuClasses", "node selector",
                f"{' and '.join(shared)} all select node {node_name}; the sizing plans one GPU per class, so "
                "their workers would share a GPU whose memory it never checked for all of them",
                "Make the classes' nodeSelectors match different nodes (docs/configuration.md, 'GPU classes')"))
            failed.update(shared)
    for name, cls in cfg.gpu_classes.items():
        rule = describe_term(class_expressions(cls))
        report.classes.append(ClassRow(name, rule, workers[name], [n.name for n in matched[name]],
                                       not workers[name] or name not in failed, cls.nodes))
    return {name: nodes for name, nodes in placed.items() if name not in failed}


def node_count(stack: ResolvedStack, name: str, nodes: list[Node], trouble: list[str], report: Report) -> bool:
    """The class's nodes against the `nodes` it declares, which the sizing planned for.
    Fewer: a problem where it leaves workers Pending or more on one GPU than planned (`trouble`:
    what the packing found, in words), else a note. More: a note, since the sizing planned for
    fewer (per-GPU sharing can only be lower: all on one node with spread none, ceil(replicas /
    nodes) with spread even, which is no lower for more nodes). With the model cache on each node
    (pre_pull_problem), any other count of the nodes that take pods is a problem. False: the class's
    problem is reported here, so the nodes' own GPU-sharing problems are not repeated."""
    cls = stack.config.gpu_classes[name]
    # A cordoned or tainted one counts: it is the class's, and its own problem says to uncordon it.
    declared, have = cls.nodes, len(nodes)
    names = ", ".join(n.name for n in nodes) or "none"
    key = f"gpuClasses.{name}.nodes"
    pulls = pre_pull_problem(stack, name, nodes)
    if have < declared:
        what = (f"plans {declared} nodes ({key}) and its node selector matches {have} "
                f"({names}), so the sizing's per-GPU plan assumed nodes that are not there")
        if trouble or pulls:
            words = (f": {'; '.join(trouble)}" if trouble else "") + (f". {pulls.problem}" if pulls else "")
            report.problems.append(Problem(
                f"gpuClasses.{name}", "nodes", what + words,
                f"Plan for the nodes you have: {key}: {have} (`python3 dev.py sizing {stack.name}` then plans "
                f"the workers over {have}), or run fewer replicas, or add nodes the selector matches"))
            return not trouble
        report.notes.append(f"gpuClasses.{name}: {what}; its workers still fit (the sizing planned every worker "
                            f"that may share one GPU). Write {key}: {have} to plan for them")
        return True
    if pulls:
        report.problems.append(pulls)
        return True
    if have > declared:
        even = [g for g in stack.placement.active_on(name) if g.spread == "even"]
        bound = "".join(f"; {g.name}'s spread even bound ceil({g.replicas}/{declared}) = "
                        f"{stack.placement.most_per_node(g)} per node is a safe upper bound of the "
                        f"ceil({g.replicas}/{have}) the scheduler keeps to" for g in even)
        report.notes.append(f"gpuClasses.{name}: its node selector matches {have} nodes ({names}), more "
                            f"than the {declared} it plans ({key}): the sizing planned the sharing of each GPU for "
                            f"{declared}, so it may be lower here, never higher{bound}. Write {key}: {have} to "
                            "plan for them all")
    return True


def pre_pull_problem(stack: ResolvedStack, name: str, nodes: list[Node]) -> Optional[Problem]:
    """With the model cache a directory on each node (modelCache.mode nodeVolume or hostPath) and
    pre-pulled, the class's pre-pull Job runs exactly `nodes` pods, one a node (required pod
    anti-affinity; infra/manifests/model_pull.py), and the workers start with HF_HUB_OFFLINE=1. More
    nodes that take pods: a worker may land on one no pre-pull filled and crash-loop. Fewer: a pre-pull
    pod stays Pending and `pulumi up` fails at the Job's deadline. None: as many, or no such cache."""
    cfg = stack.config
    if not (model_cache.on_nodes(cfg) and model_cache.pre_pulled(cfg)):
        return None
    declared = cfg.gpu_classes[name].nodes
    takers = [n for n in nodes if not (n.unschedulable or n.taints)]
    if len(takers) == declared:
        return None
    key, mode, many = f"gpuClasses.{name}.nodes", cfg.model_cache.mode, len(takers)
    cache = (f"the model cache is a directory on each node (modelCache.mode {mode}), and the pre-pull Job fills "
             f"{declared} node{'s' if declared > 1 else ''} ({key}; one pod a node)")
    if many > declared:
        return Problem(
            f"gpuClasses.{name}", "nodes",
            f"its node selector matches {many} nodes that take pods ({', '.join(n.name for n in takers)}), more "
            f"than the {declared} it plans: {cache}, so a worker the scheduler puts on another node finds no model "
            "there and, started with HF_HUB_OFFLINE=1, crash-loops",
            f"Plan for them all: {key}: {many} (the pre-pull then fills each, and `python3 dev.py sizing "
            f"{stack.name}` plans the workers over {many}); or narrow gpuClasses.{name}.nodeSelector to {declared} "
            f"node{'s' if declared > 1 else ''}")
    idle = [n.name for n in nodes if n not in takers]
    off = f" ({', '.join(idle)} cordoned or tainted)" if idle else ""
    fix = f"Plan for the nodes that take pods: {key}: {many}"
    if idle:
        fix = f"Make {', '.join(idle)} schedulable (kubectl uncordon NODE, or remove its taint), or p{fix[1:]}"
    return Problem(
        f"gpuClasses.{name}", "nodes",
        f"{cache[0].upper()}{cache[1:]}, and {many} of its nodes take pods{off}: {declared - many} pre-pull "
        "pod(s) would stay Pending and `pulumi up` would fail at the Job's deadline "
        "(modelCache.prePull.timeoutSeconds)", fix)
