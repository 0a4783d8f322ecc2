"""The one placement decision (infra/placement/decide.py): where each pod lands or why it lands
nowhere, for the stack's nominal nodes (Placement) and a cluster's real ones (preflight's adapter;
tests/lab/preflight/test_packing.py holds the two to one another)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from infra.errors import ConfigError
from infra.placement.decide import Host, Pod, Why, in_order, place
from tests.helpers import loaded

GPU = "nvidia.com/gpu"


def hosts(n: int, gpus: int, **extra) -> list[Host]:
    return [Host(f"n{k}", {GPU: Fraction(gpus)}, domain=f"n{k}", **extra) for k in range(n)]


def pods(group: str, replicas: int, gpus: int = 1, spread="none", on=("n0", "n1")) -> list[Pod]:
    return [Pod(f"{group}-{i}", group, {GPU: Fraction(gpus)}, frozenset(on), spread) for i in range(replicas)]


def per_host(decision) -> dict[str, list[str]]:
    return {h: [p.name for p in ps] for h, ps in decision.placed.items()}


def test_a_pod_lands_where_its_gpus_fit_and_else_nowhere_with_each_hosts_reason():
    d = place(hosts(2, 4), pods("a", 3, gpus=2) + [Pod("x", "x", {GPU: Fraction(2)}, frozenset({"n1"}))])
    assert per_host(d) == {"n0": ["a-0", "a-2"], "n1": ["a-1", "x"]}
    d = place(hosts(2, 4), pods("a", 5, gpus=2))
    assert list(d.pending) == ["a-4"]
    assert d.pending["a-4"] == {"n0": (Why("short", GPU),), "n1": (Why("short", GPU),)}


def test_larger_gpu_asks_land_first_and_equal_asks_keep_the_given_order():
    small, big = pods("small", 2), pods("big", 1, gpus=3)
    assert [p.name for p in in_order(small + big)] == ["big-0", "small-0", "small-1"]
    # First fit of the largest: big takes n0's three GPUs, the small ones share n1 and the last GPU.
    d = place(hosts(2, 3), small + big)
    assert per_host(d) == {"n0": ["big-0"], "n1": ["small-0", "small-1"]}


def test_an_even_spread_counts_a_closed_host_as_a_domain():
    # nodeTaintsPolicy Ignore: the cordoned host holds the fewest at 0, so the open one takes one.
    cordoned = [hosts(2, 8)[0], Host("n1", {GPU: Fraction(8)}, closed="cordoned", domain="n1")]
    d = place(cordoned, pods("a", 3, spread="even"))
    assert per_host(d) == {"n0": ["a-0"], "n1": []}
    assert d.pending["a-1"] == {"n0": (Why("spread"),), "n1": (Why("closed", "cordoned"),)}


def test_one_per_node_and_a_host_without_a_domain():
    d = place(hosts(2, 8), pods("a", 3, spread="onePerNode"))
    assert per_host(d) == {"n0": ["a-0"], "n1": ["a-1"]}
    assert d.pending["a-2"] == {"n0": (Why("one per node"),), "n1": (Why("one per node"),)}
    nameless = [Host("n0", {GPU: Fraction(8)}), Host("n1", {GPU: Fraction(8)}, domain="n1")]
    assert per_host(place(nameless, pods("a", 1, spread="even"))) == {"n0": [], "n1": ["a-0"]}
    only_n0 = place(nameless, pods("a", 1, spread="even", on=("n0",)))
    assert only_n0.pending["a-0"] == {"n0": (Why("no domain"),), "n1": (Why("not selected"),)}


def test_least_allocated_spreads_pods_without_a_spread_and_ties_go_to_the_first_host():
    cpu = [Host(f"n{k}", {"cpu": Fraction(8), GPU: Fraction(8)}) for k in range(2)]
    d = place(cpu, [Pod(f"a-{i}", "a", {"cpu": Fraction(1)}, frozenset({"n0", "n1"})) for i in range(3)])
    assert per_host(d) == {"n0": ["a-0", "a-2"], "n1": ["a-1"]}


def test_the_sizing_refuses_pods_their_spread_leaves_without_a_node_though_the_gpus_add_up():
    # 2 nodes x 3 GPUs: a TP 2 pod takes 2 of one node's; four spread evenly cannot then keep within
    # one of each other per node (2 + 2 on one node's last GPU and the other's three), though 2 + 4 = 6.
    def edit(c):
        c["gpuClasses"]["gpu-80gb"].update(gpusPerNode=3)
        c["model"] = {"name": "Qwen/Qwen3-0.6B"}
        c["workers"] = [
            {"name": "big", "role": "agg", "replicas": 1, "gpuClass": "gpu-80gb", "tensorParallel": 2},
            {"name": "small", "role": "agg", "replicas": 4, "gpuClass": "gpu-80gb", "spread": "even"}]
    with pytest.raises(ConfigError) as info:
        loaded("two-node-rdma", edit)
    msg = str(info.value)
    assert "its workers need 6 whole GPUs (1 x big (2 GPUs each), 4 x small (1 GPU each, spread even))" in msg
    assert "so small-3 would stay Pending" in msg and "or loosen a spread" in msg


class CountedReads(dict):
    """A host's allocatable that counts the look-ups the decision makes of it."""

    reads = 0

    def get(self, key, default=None):
        CountedReads.reads += 1
        return super().get(key, default)


class CountedHosts(frozenset):
    """A pod's hosts that count the questions the decision asks of them (is this host one?)."""

    asked = 0

    def __contains__(self, name):
        CountedHosts.asked += 1
        return super().__contains__(name)


def counted_hosts(prefix: str, n: int, gpus: int) -> list[Host]:
    return [Host(f"{prefix}{k}", CountedReads({GPU: Fraction(gpus)}), domain=f"{prefix}{k}") for k in range(n)]


def test_a_pod_is_tried_only_on_the_hosts_its_selector_picks():
    # A stack's classes are disjoint sets of nodes: a pod of one class is never a candidate on
    # another's, so trying it there is work alone (the sizing places every replica of every class:
    # at the schema's bounds, 4,096 pods beside other classes' 1,024 nodes each).
    mine, theirs = counted_hosts("a", 2, 25), counted_hosts("b", 500, 8)
    on = CountedHosts({"a0", "a1"})
    CountedHosts.asked = 0
    d = place(mine + theirs, [Pod(f"a-{i}", "a", {GPU: Fraction(1)}, on, "even") for i in range(50)])
    assert not d.pending and [len(ps) for ps in d.placed.values()][:2] == [25, 25]
    assert CountedHosts.asked <= 502 + 50 * 2 * 2  # each host asked once, then a few per pod of its own two


def test_pods_of_a_group_that_land_nowhere_cost_one_look_at_the_hosts_not_one_each():
    # Once a group's pod finds no host, the next of that group finds none either until a pod lands:
    # the decision says so without trying every host again.
    hosts_ = counted_hosts("n", 100, 1)
    group = pods("a", 1000, on=tuple(h.name for h in hosts_))
    CountedReads.reads = 0
    d = place(hosts_, group)
    assert len(d.pending) == 900
    assert d.pending["a-999"] == {h.name: (Why("short", GPU),) for h in hosts_}
    assert CountedReads.reads < 100 * 100 * 3  # not the 900 x 100 a look per pending pod would take


def test_the_sizing_names_a_few_of_many_pods_that_would_stay_pending_and_counts_the_rest():
    # 40 pods of 8 GPUs on 2 nodes x 8 GPUs: 38 stay Pending, and one refusal naming all 38 (at the
    # schema's bounds, thousands) would bury the fix.
    def edit(c):
        c["workers"] = [{"name": "big", "role": "agg", "replicas": 40, "gpuClass": "gpu-80gb", "tensorParallel": 8}]
    with pytest.raises(ConfigError) as info:
        loaded("two-node-rdma", edit)
    msg = str(info.value)
    assert "so 38 of the 40 pods (big-2, big-3, big-4 and 35 more) would stay Pending" in msg
    assert "big-5" not in msg


def test_the_sizing_refuses_pods_that_fit_only_if_the_larger_are_created_first():
    # 4 TP 2 prefill pods and a TP 8 decode pod on 2 nodes x 8 GPUs fit when the decode pod comes
    # first (8 + 4 x 2). The operator creates each group's pods in no fixed order, and where the
    # prefill's reach the scheduler first the least allocated node takes each in turn, 2 + 2: no node
    # is left with 8 GPUs, and the decode pod stays Pending.
    def edit(c):
        c["workers"][0].update(replicas=4, tensorParallel=2, spread="none")
        c["workers"][1].update(replicas=1, tensorParallel=8, spread="none")
    with pytest.raises(ConfigError) as info:
        loaded("two-node-rdma", edit)
    msg = str(info.value)
    assert ("gpuClasses.gpu-80gb: its workers need 16 whole GPUs (4 x prefill (2 GPUs each), 1 x decode (8 GPUs "
            "each)), and each pod's GPUs must be on one node: 2 nodes x 8 GPUs (nodes, gpusPerNode) hold them only "
            "if the larger pods reach the scheduler first, and the operator creates each group's pods in no fixed "
            "order: where the smaller come first, the scheduler spreads them over the nodes (the least allocated "
            "first) and decode-0 would stay Pending.") in msg
    assert "classes of their own nodes" in msg
    # Spread evenly, 2 TP 1 prefill pods a node leave each node 6 GPUs whichever comes first: the TP 4
    # decode pod fits either way.
    def even(c):
        c["workers"][0].update(replicas=4, tensorParallel=1)
        c["workers"][1].update(replicas=1, tensorParallel=4)
    assert loaded("two-node-rdma", even).resolved.placement.whole_gpus_fit("gpu-80gb")


def test_a_hosts_room_and_score_are_worked_out_once_a_run_of_alike_pods_not_once_a_pod():
    # What a host has left and its load change only when a pod lands there: 1,000 alike pods over 100
    # hosts look at each host about once, then again only at the one each pod took (preflight on a
    # 1,024-node saved cluster took 49 s of Fraction arithmetic for 4,096 pods).
    hosts_ = [Host(f"n{k}", CountedReads({"cpu": Fraction(64), "memory": Fraction(2**40), GPU: Fraction(16)}),
                   domain=f"n{k}") for k in range(100)]
    group = [Pod(f"a-{i}", "a", {"cpu": Fraction(1), "memory": Fraction(2**30), GPU: Fraction(1)},
                 frozenset(h.name for h in hosts_)) for i in range(1000)]
    CountedReads.reads = 0
    d = place(hosts_, group)
    assert not d.pending and {len(ps) for ps in d.placed.values()} == {10}  # least allocated: 10 a host
    assert CountedReads.reads < 20 * 1000  # not the 100 x 1,000 x 3 a look at each host a pod would take
