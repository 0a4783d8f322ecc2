"""The cluster tier, for a clone: a local Kubernetes control plane with the lab's GPU nodes simulated
by kwok (harness.py; `dynamo-lab local-cluster up|down|status`), and the pinned tools it and the real
Pulumi engine need, found or built from their Go modules (tools.py; `python3 dev.py
cluster-tools`). Tools the Go module proxy does not serve are reported as unavailable, not replaced.

Standard library only (PyYAML only to apply CRD files): dev.py runs `tools` with the Python that
runs dev.py, before any environment exists.
"""
