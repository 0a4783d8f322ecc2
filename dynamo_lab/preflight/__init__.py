"""`dynamo-lab preflight STACK`: will this stack fit this cluster? Answered from the cluster itself.

cluster_data reads the cluster (live, read-only, with the stack's own context; or saved kubectl
output); pods lists the pods the stack places (from the program's own manifests); classes, fit
and ownership compare the two, run runs them all into one report, and text words it. selectors
and versions are the Kubernetes and Helm rules they rest on, implemented exactly (resource
quantities are parsed by infra.units.parse_quantity).
"""
