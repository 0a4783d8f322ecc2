"""`probe local --flows N`: N transfers of one request's KV each, started together between the same
two endpoints, as N decode pulls from one prefill worker (infra/payloads/kv_probe_flows.py says how).

The target is kv_probe.py's, holding the N transfers' blocks (N x one transfer's whole blocks); the
initiator is kv_probe_flows.py, one agent with N transfer requests. `--flows 1` is the probe as it
was: kv_probe.py on both sides, no field added.
"""

from __future__ import annotations

from infra import payloads, units
from infra.errors import UserError
from infra.manifests.transfer_probe import ProbePlan

PROBE = payloads.path("kv_probe_flows.py")


def check(plan: ProbePlan, flows: int) -> None:
    """Refuse what N flows cannot move: one contiguous region, or pools smaller than N transfers."""
    if flows == 1:
        return
    if plan.pattern != "blocks":
        raise UserError(f"--flows {flows} needs --pattern blocks: each flow moves its own request's blocks "
                        "(one contiguous region has no blocks to share out)")
    blocks = plan.transfer(plan.initiator)["blocks"]
    for side in ("source", "destination"):
        pool = plan.pool_blocks[side]
        if pool < flows * blocks:
            raise UserError(f"--flows {flows}: {flows} transfers of {blocks} blocks need {flows * blocks} blocks "
                            f"per layer in each pool; the {side} pool holds {pool} ({plan.pool_basis}). Use "
                            f"at most {pool // blocks} flows, or fewer --tokens")


def args(plan: ProbePlan, flows: int, per_role: dict[str, list[str]]) -> dict[str, list[str]]:
    """The two sides' arguments for N flows: the target serves N transfers' blocks, the initiator moves
    one transfer's per flow."""
    target = list(per_role["target"])
    target[target.index("--bytes") + 1] = str(flows * plan.transfer(plan.target)["bytes"])
    return {"target": target, "initiator": per_role["initiator"] + ["--flows", str(flows)]}


FIELDS = ("flows", "flow_bytes", "flow_seconds", "flow_seconds_median", "flow_seconds_min", "flow_seconds_max",
          "flow_seconds_median_by_flow", "flow_throughput_bytes_per_s", "flow_throughput_bytes_per_s_min",
          "flow_throughput_bytes_per_s_max")


def fields(result: dict) -> dict:
    """The flows' figures for `--json`, beside the probe's own: there `bytes` is all N flows' and
    `seconds*` the time until the last flow is done, so `throughput_bytes_per_s` is the aggregate."""
    return {key: result[key] for key in FIELDS}


def lines(r: dict) -> list[str]:
    """The text's lines for N flows (none for one)."""
    if r.get("flows", 1) == 1:
        return []
    return [
        f"  flows    : {r['flows']} at once, {units.human_si(r['flow_bytes'])} each (its own blocks and NIXL "
        f"transfer, one agent pair); each done in median {r['flow_seconds_median']:.3f} s (min "
        f"{r['flow_seconds_min']:.3f}, max {r['flow_seconds_max']:.3f}), "
        f"{units.human_si(r['flow_throughput_bytes_per_s'])}/s per flow "
        f"({units.human_si(r['flow_throughput_bytes_per_s_min'])}-"
        f"{units.human_si(r['flow_throughput_bytes_per_s_max'])}/s)",
        f"  all {r['flows']} done: median {r['seconds_median']:.3f} s, aggregate "
        f"{units.human_si(r['throughput_bytes_per_s'])}/s",
    ]

