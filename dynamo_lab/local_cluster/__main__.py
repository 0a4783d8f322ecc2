"""`dynamo-lab local-cluster up|down|status`: the local lab cluster (harness.py), for a shell.

`up` finds or builds the control plane tools (tools.py), starts the cluster in its own network
and PID namespaces, and returns once the two simulated GPU nodes are Ready; the cluster keeps
running until `down`. It prints the kubeconfig to use (KUBECONFIG=...).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dynamo_lab import flags
from dynamo_lab.local_cluster import harness, root_paths, tools


def default_state() -> Path:
    return tools.cache_root(os.environ).parent / "cluster" / "default"


def _bins() -> dict[str, Path]:
    results = tools.ensure(["kubernetes", "etcd", "kwok"], log=lambda m: print(f"cluster-tools: {m}", flush=True))
    bins = tools.bin_dirs(results)
    missing = [n for n in ("kubernetes", "etcd", "kwok") if n not in bins]
    if missing:
        sys.exit(f"local-cluster: missing {', '.join(missing)} (see above)")
    return bins


def main(argv=None) -> int:
    p = flags.Parser(prog="dynamo-lab local-cluster", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--state", type=Path, default=default_state(), help="the cluster's directory (default: %(default)s)")
    p.add_argument("--crds", type=Path, help="a directory of CRD YAML files to apply once it is up")
    p.add_argument("--keep", action="store_true", help="down: keep the directory (logs) instead of removing it")
    a = p.parse_args(argv)
    if a.action == "up":
        try:
            h = harness.up(a.state, _bins(), a.crds, attached=False)
        except harness.LocalClusterError as e:
            print(f"error: dynamo-lab local-cluster up: {e}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={h.kubeconfig}")
        if a.crds is None:
            print("local-cluster: no CRDs applied. The v1.6.2 Dynamo CRDs come with the operator's Go module, which "
                  "the module proxy does not serve (see `dev.py cluster-tools`). The DynamoGraphDeployment CRD "
                  "the tests apply is the one dynamo_lab/upstream.py pins, from Dynamo's 1.5.0 development line "
                  "at upstream commit 2a6da14c, not the v1.6.2 release: pass a directory holding it with "
                  "--crds DIR", file=sys.stderr)
        return 0
    if a.action == "status":
        print(json.dumps(harness.status_of(a.state).to_json(), indent=2))
        return 0
    killed = harness.stop(a.state)
    left = harness.leftovers(a.state)
    for k in killed:
        print(f"local-cluster: had to kill {k}", file=sys.stderr)
    if left:
        print("local-cluster: still running:\n  " + "\n  ".join(left), file=sys.stderr)
        return 1
    if a.state.exists() and not a.keep:
        try:  # never through a link, as root never under what another user could change (root_paths)
            root_paths.remove_tree(a.state, root_paths.trusted_uid())
        except root_paths.Refused as e:
            print(f"error: dynamo-lab local-cluster down: stopped, but not removing {a.state}: {e}", file=sys.stderr)
            return 2
    print("local-cluster: down; nothing left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
