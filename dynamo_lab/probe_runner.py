"""`dynamo-lab probe local`: run the NIXL probe payload on this machine, on loopback or a shaped link.

What moves is a `ProbePlan` (infra/manifests/transfer_probe.py, shared with the in-cluster probe):
by default the stack's connector op over the workers' block pattern and pools.
`--link loopback`: target and initiator on this host (the same-server path).
`--link RATE` (e.g. 1gbit): two network namespaces joined by a veth pair, both ends shaped with
`tc tbf` to RATE (the cross-server path). Needs root. The namespaces are always removed: on
success, on failure, on Ctrl-C, SIGTERM and SIGHUP, from the first `ip netns add` on; those a run
could not remove (SIGKILL, a crash) are found by their name, `dlprobe<pid>i|t` of a process that
no longer runs, and removed when the next shaped probe starts. Addresses are TEST-NET-1
(192.0.2.0/30), which exist only inside the two namespaces.

`--flows N` (N > 1): N transfers of one request's KV each, started together between the same two
endpoints, as N decode pulls from one prefill worker; the pattern is the payload's, and its
docstring says it (infra/payloads/kv_probe_flows.py). Here: the target is kv_probe.py's, started
with N x one transfer's bytes; the initiator is kv_probe_flows.py; `--flows 1` is the probe as it
was, kv_probe.py on both sides, no field added.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Iterator, Optional

from dynamo_lab import procs as _procs
from dynamo_lab.procs import free_port, signals_as_interrupt, signals_held
from infra import payloads, units
from infra.config.schema import KvTransfer, Model, SizingParameters, StackConfig
from infra.errors import UserError
from infra.manifests.graph import ucx_env
from infra.manifests.transfer_probe import ProbePlan, groups, stack_plan
from infra.sizing import StackSizing, kv_block_bytes, path_throughput

# The pools of a probe run without a stack: this many transfers' blocks per side.
POOL_TRANSFERS_WITHOUT_STACK = 4

PROBE = payloads.path("kv_probe.py")


# --- Several flows at once (`--flows`) ---------------------------------------------------------------

FLOWS_PROBE = payloads.path("kv_probe_flows.py")


def check_flows(plan: ProbePlan, flows: int) -> None:
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


def flows_args(plan: ProbePlan, flows: int, per_role: dict[str, list[str]]) -> dict[str, list[str]]:
    """The two sides' arguments for N flows: the target serves N transfers' blocks, the initiator moves
    one transfer's per flow."""
    target = list(per_role["target"])
    target[target.index("--bytes") + 1] = str(flows * plan.transfer(plan.target)["bytes"])
    return {"target": target, "initiator": per_role["initiator"] + ["--flows", str(flows)]}


FLOW_FIELDS = ("flows", "flow_bytes", "flow_seconds", "flow_seconds_median", "flow_seconds_min", "flow_seconds_max",
          "flow_seconds_median_by_flow", "flow_throughput_bytes_per_s", "flow_throughput_bytes_per_s_min",
          "flow_throughput_bytes_per_s_max")


def flow_fields(result: dict) -> dict:
    """The flows' figures for `--json`, beside the probe's own: there `bytes` is all N flows' and
    `seconds*` the time until the last flow is done, so `throughput_bytes_per_s` is the aggregate."""
    return {key: result[key] for key in FLOW_FIELDS}


def flow_lines(r: dict) -> list[str]:
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
NS_PREFIX = "dlprobe"
# A namespace this probe made: the prefix, the pid of the probe that made it, i(nitiator) or t(arget).
_OURS = re.compile(rf"^{NS_PREFIX}(\d+)[it]$")
TARGET_ADDR, INITIATOR_ADDR = "192.0.2.2", "192.0.2.1"


class ProbeError(UserError):
    pass


def _run(*cmd: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        raise ProbeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


def namespaces() -> list[str]:
    """This probe's network namespaces that exist now (none where iproute2 is absent)."""
    if shutil.which("ip") is None:
        return []
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(NS_PREFIX)]


def remove_namespaces(names: list[str]) -> None:
    for name in names:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False, timeout=30)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a number no pid reaches
        return False
    except PermissionError:  # another user's process
        pass
    return True


def leftovers() -> list[str]:
    """Namespaces an earlier shaped probe made and could not remove: named by a process that is gone."""
    return [n for n in namespaces() if (m := _OURS.match(n)) and not _running(int(m.group(1)))]


def _remove_leftovers() -> None:
    found = leftovers()
    if found:
        remove_namespaces(found)
        still = [n for n in found if n in namespaces()]
        print(f"probe: removed network namespaces an earlier probe left behind: "
              f"{', '.join(n for n in found if n not in still) or 'none'}"
              + (f"; could not remove {', '.join(still)}" if still else ""), file=sys.stderr, flush=True)


def _check_root() -> None:
    if os.geteuid() != 0:
        raise ProbeError("a shaped link needs root: the probe creates two network namespaces and a "
                         "veth pair (ip netns, tc). Run it as root, or use --link loopback")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ProbeError(f"`{tool}` not found: install iproute2")


@contextlib.contextmanager
def shaped_pair(rate_bits: int) -> Iterator[tuple[str, str]]:
    """Two namespaces (initiator, target) joined by a veth pair shaped to `rate_bits` each way."""
    _check_root()
    _remove_leftovers()
    tag = str(os.getpid())  # veth names stay within 15 characters: dlp + at most 7 digits + i
    ns_i, ns_t = f"{NS_PREFIX}{tag}i", f"{NS_PREFIX}{tag}t"
    veth_i, veth_t = f"dlp{tag}i", f"dlp{tag}t"
    # tbf needs a bucket of at least rate/HZ; 4 ms of the rate is ample and keeps bursts small.
    burst = max(rate_bits // 8 // 250, 64 * 1024)
    try:
        _run("ip", "netns", "add", ns_i)
        _run("ip", "netns", "add", ns_t)
        _run("ip", "link", "add", veth_i, "netns", ns_i, "type", "veth", "peer", "name", veth_t, "netns", ns_t)
        for ns, dev, addr in ((ns_i, veth_i, INITIATOR_ADDR), (ns_t, veth_t, TARGET_ADDR)):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{rate_bits}bit",
                 "burst", str(burst), "latency", "50ms")
        _wait_link_up([(ns_i, veth_i), (ns_t, veth_t)])
        yield ns_i, ns_t
    finally:
        # Signals are held until the namespaces are gone and recorded: a second Ctrl-C, or the
        # SIGINT the terminal also sent the `ip` children, takes effect after.
        with signals_held():
            existing = namespaces()
            made = [n for n in (ns_i, ns_t) if n in existing]
            remove_namespaces(made)
            existing = namespaces()
            left = [n for n in made if n in existing]
            if set(made) - set(left):
                _procs.cleaned(f"removed network namespaces {', '.join(n for n in made if n not in left)}")
            for name in left:
                _procs.left_behind(f"network namespace {name} (as root: ip netns del {name})")
            if left:
                print(f"probe: could not remove network namespaces {', '.join(left)}; as root: "
                      + "; ".join(f"ip netns del {n}" for n in left), file=sys.stderr, flush=True)


def _wait_link_up(links: list[tuple[str, str]], seconds: float = 10) -> None:
    # UCX connects as soon as the initiator loads the target's metadata; a veth that is not yet
    # up makes that fail (NIXL_ERR_BACKEND), so wait for carrier on both ends first.
    deadline = time.monotonic() + seconds
    for ns, dev in links:
        while "LOWER_UP" not in subprocess.run(["ip", "-n", ns, "link", "show", "dev", dev],
                                               capture_output=True, text=True, check=False).stdout:
            if time.monotonic() > deadline:
                raise ProbeError(f"{dev} in {ns} did not come up within {seconds:.0f} s")
            time.sleep(0.05)


def _python(script=PROBE) -> list[str]:
    return [sys.executable, str(script)]


def plan_from_stack(cfg: StackConfig, sizing: StackSizing, op: Optional[str], pattern: str,
                    tokens: Optional[int]) -> ProbePlan:
    """The stack's probe (its connector's op unless `op`), moving `tokens` tokens' KV (default: one
    average request, workload.inputTokens)."""
    return stack_plan(cfg, sizing, op, pattern, None if tokens is None else tokens * sizing.kv_bytes_per_token)


def plan_from_bytes(nbytes: int, op: Optional[str], pattern: str) -> ProbePlan:
    """No stack: the default connector's op (NixlConnector: READ) and the default model's geometry."""
    model = Model()
    per_block = model.layers * kv_block_bytes(model)
    count = POOL_TRANSFERS_WITHOUT_STACK * math.ceil(nbytes / per_block)
    return ProbePlan(op or KvTransfer().op, pattern, nbytes, model.layers, kv_block_bytes(model),
                     {"source": count, "destination": count},
                     f"{POOL_TRANSFERS_WITHOUT_STACK} transfers' blocks per side, no stack given")


def plan_for(stack: Optional[str], nbytes: Optional[int], op: Optional[str], pattern: str,
             tokens: Optional[int]) -> tuple[ProbePlan, SizingParameters, KvTransfer]:
    """`probe local`'s transfer, and the sizing parameters and UCX settings its prediction takes:
    Pulumi.<stack>.yaml's (plan_from_stack), or with no stack `nbytes` of the default model's."""
    if stack:
        from dynamo_lab import stack_files

        loaded = stack_files.load(stack)
        cfg = loaded.config
        return plan_from_stack(cfg, loaded.sizing, op, pattern, tokens), cfg.sizing, stack_kv(cfg)
    if tokens is not None:
        raise UserError("--tokens needs --stack (the stack gives the KV bytes per token); "
                        "with --bytes give the bytes")
    return plan_from_bytes(nbytes, op, pattern), SizingParameters(), KvTransfer()


def stack_kv(cfg: StackConfig) -> KvTransfer:
    """The UCX settings of the probed path: its source (prefill) group's kvTransfer."""
    return groups(cfg)[0].kv_transfer


def measure(link: str, plan: ProbePlan, repeats: int, timeout: float, kv: KvTransfer, flows: int = 1) -> dict:
    """Run target and initiator as separate processes; return the initiator's result. With `flows` > 1
    the initiator is kv_probe_flows.py, moving that many transfers at once (`--flows`, above)."""
    env = {**os.environ, **ucx_env(kv)}
    args = {role: plan.args(side) + ["--timeout", str(timeout)]
            for role, side in (("target", plan.target), ("initiator", plan.initiator))}
    initiator = _python()
    if flows > 1:
        args, initiator = flows_args(plan, flows, args), _python(FLOWS_PROBE)
    if link == "loopback":
        port = free_port()
        return _pair(_python() + ["target", "--bind", "127.0.0.1"],
                     initiator + ["initiator", "--connect", f"127.0.0.1:{port}"],
                     port, args, repeats, timeout, env)
    rate = units.parse_rate_bits(link)
    with signals_as_interrupt(), shaped_pair(rate) as (ns_i, ns_t):
        return _pair(["ip", "netns", "exec", ns_t] + _python() + ["target", "--bind", TARGET_ADDR],
                     ["ip", "netns", "exec", ns_i] + initiator + ["initiator", "--connect", f"{TARGET_ADDR}:5555"],
                     5555, args, repeats, timeout, env)


def cores() -> dict[str, Optional[int]]:
    """The CPU each endpoint is pinned to: two different ones, as two worker pods on one node run on
    different cores. Left to the scheduler, the two could share a core on a 2-core machine, and a
    loopback READ then ran up to a third faster, run by run (docs/measurements.md)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {"initiator": cpus[0], "target": cpus[-1]} if len(cpus) >= 2 else {"initiator": None, "target": None}


def _pinned(cpu: Optional[int]):
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def _pair(target_cmd, initiator_cmd, port, args, repeats, timeout, env) -> dict:
    procs: list[subprocess.Popen] = []
    pins = cores()
    with signals_as_interrupt():
        try:
            procs.append(subprocess.Popen(target_cmd + ["--port", str(port)] + args["target"], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          preexec_fn=_pinned(pins["target"])))
            initiator = subprocess.Popen(initiator_cmd + ["--repeats", str(repeats)] + args["initiator"], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         preexec_fn=_pinned(pins["initiator"]))
            procs.append(initiator)
            try:
                out, err = initiator.communicate(timeout=timeout + 30)
            except subprocess.TimeoutExpired:
                raise ProbeError(f"the probe did not finish within {timeout + 30:.0f} s") from None
            if initiator.returncode != 0:
                target_err = procs[0].stderr.read() if procs[0].poll() is not None else ""
                raise ProbeError(f"probe initiator failed:\n{_tail(err)}\n{_tail(target_err)}".strip())
            return {**json.loads(out.strip().splitlines()[-1]), "cpus": pins}
        finally:
            with signals_held():
                for proc in procs:
                    if proc.poll() is None:
                        proc.terminate()
                        try:
                            proc.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                if procs:
                    _procs.cleaned(f"stopped the probe's {' and '.join(('target', 'initiator')[:len(procs)])} "
                                   f"process{'es' if len(procs) > 1 else ''}")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


def prediction(link: str, sizing: SizingParameters, op: str) -> tuple[float, str]:
    """The sizing's throughput for this path and op: what `dynamo-lab sizing` would use (one rule)."""
    if link == "loopback":
        bps, words, _ = path_throughput(sizing, "same-node", op)
        return bps, words
    shaped = sizing.link.model_copy(update={"rate": units.parse_rate_bits(link)})
    bps, words, _ = path_throughput(sizing, "cross-node", op, shaped)
    return bps, f"{words} (sizing.link)"


def measure_against_sizing(link: str, plan: ProbePlan, repeats: int, timeout: float, sizing: SizingParameters,
                           kv: KvTransfer, stack: Optional[str], flows: int = 1) -> dict:
    """Measure the transfer, and put the sizing's prediction for the same bytes, path and op beside it
    (with `flows` > 1: all the flows' bytes, and the flows' own figures after the rest)."""
    if link != "loopback":
        try:
            units.parse_rate_bits(link)
        except ValueError as exc:
            raise ProbeError(f"--link: {exc}, or loopback") from None
    check_flows(plan, flows)
    result = measure(link, plan, repeats, timeout, kv, flows)
    bps, basis = prediction(link, sizing, plan.op)
    moved = result["bytes"]
    predicted = moved / bps
    return {
        "stack": stack, "link": link, "op": result["op"], "pattern": result["pattern"],
        "initiator": plan.initiator, "bytes": moved, "descriptors": result["descriptors"],
        "descriptor_bytes": result["descriptor_bytes"], "blocks": result["blocks"], "block_bytes": plan.block_bytes,
        "layers": plan.layers, "source_pool_bytes": plan.transfer("source")["pool_bytes"],
        "destination_pool_bytes": plan.transfer("destination")["pool_bytes"], "pool_basis": plan.pool_basis,
        "repeats": repeats, "seconds": result["seconds"],
        "seconds_min": result["seconds_min"], "seconds_median": result["seconds_median"],
        "seconds_max": result["seconds_max"], "warmup_seconds": result["warmup_seconds"],
        "throughput_bytes_per_s": result["throughput_bytes_per_s"], "intact": result["intact"],
        "predicted_seconds": predicted, "predicted_throughput_bytes_per_s": bps,
        "prediction_basis": basis, "measured_over_predicted": result["seconds_median"] / predicted,
        "nixl_module": result["nixl_module"], "ucx_tls": result["ucx_tls"],
        "ucx_rndv_thresh": result["ucx_rndv_thresh"], "cpus": result["cpus"],
        **(flow_fields(result) if flows > 1 else {}),
    }


def _what(r: dict) -> str:
    who = {"source": "the prefill-like side", "destination": "the decode-like side"}[r["initiator"]]
    if r["pattern"] == "contiguous":
        shape = "one contiguous descriptor"
    else:
        shape = (f"{r['descriptors']:,} descriptors of {units.human(r['descriptor_bytes'])} "
                 f"({r['blocks']} blocks x {r['layers']} layers) scattered in registered pools")
    return (f"  {r['op']} by {who}, {shape}; source pool {units.human(r['source_pool_bytes'])}, destination "
            f"{units.human(r['destination_pool_bytes'])}; {r['pool_basis']}")


def text(r: dict) -> str:
    return "\n".join([
        f"NIXL/UCX probe over {r['link']}: {r['bytes']:,} B ({units.human_si(r['bytes'])}), "
        f"{r['repeats']} timed transfers after 1 warm-up ({r['warmup_seconds']:.2f} s, discarded)"
        + ("" if r["cpus"]["initiator"] is None else
           f"; initiator on CPU {r['cpus']['initiator']}, target on CPU {r['cpus']['target']}"),
        _what(r),
        f"  measured : median {r['seconds_median']:.3f} s (min {r['seconds_min']:.3f}, max "
        f"{r['seconds_max']:.3f}), {units.human_si(r['throughput_bytes_per_s'])}/s, "
        f"bytes intact: {'yes' if r['intact'] else 'NO'}",
        *flow_lines(r),
        f"  predicted: {r['predicted_seconds']:.3f} s at "
        f"{units.human_si(r['predicted_throughput_bytes_per_s'])}/s; {r['prediction_basis']}",
        f"  measured / predicted = {r['measured_over_predicted']:.2f}",
    ])
