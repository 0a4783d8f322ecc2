"""The model cache claim's StorageClass against the cluster's (`modelCache.mode: pvc` with a claim
dynamo-lab creates). A claim whose class the cluster lacks, or that names none where the cluster
has no default class, never binds: `pulumi up` waits for it (five minutes) and fails, and the
pre-pull Job and the workers that mount it stay Pending. Other modes need no class: nodeVolume's
claims bind to the stack's own PersistentVolumes (class ""), hostPath and off have no claim, and
an existing claim (`claimName`) is bound already or not the stack's to create.

A class is the default when its `storageclass.kubernetes.io/is-default-class` annotation is
"true" (the beta annotation too, which Kubernetes still honours); with several, Kubernetes gives a
new claim the newest of them.
"""

from __future__ import annotations

from typing import Any

from dynamo_lab.preflight.cluster_data import RESAVE, ClusterData
from dynamo_lab.preflight.report import Check, Problem, Report
from infra.resolved import ResolvedStack

KEY = "modelCache.pvc.storageClass"
DEFAULT_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                       "storageclass.beta.kubernetes.io/is-default-class")
NAME = "storage class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # local and static volumes: made by hand, never provisioned


def is_default(storage_class: dict[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(a) == "true" for a in DEFAULT_ANNOTATIONS)


def _name(storage_class: dict[str, Any]) -> str:
    return (storage_class.get("metadata") or {}).get("name", "?")


def _describe(storage_class: dict[str, Any]) -> str:
    """`local-path (provisioner rancher.io/local-path, WaitForFirstConsumer)`."""
    binding = storage_class.get("volumeBindingMode") or "Immediate"
    return f"{_name(storage_class)} (provisioner {storage_class.get('provisioner', '?')}, {binding})"


def found(classes: list[dict[str, Any]]) -> str:
    """The cluster's classes in words, the default marked: `fast, standard (default)`, or `none`."""
    return ", ".join(f"{_name(c)}{' (default)' if is_default(c) else ''}" for c in
                     sorted(classes, key=_name)) or "none"


def _newest_default(classes: list[dict[str, Any]]) -> dict[str, Any]:
    defaults = [c for c in classes if is_default(c)]
    return max(defaults, key=lambda c: ((c.get("metadata") or {}).get("creationTimestamp") or "", _name(c)))


def _accepted(storage_class: dict[str, Any], claim: str, how: str, report: Report) -> None:
    """The class the claim gets; one without a provisioner makes no volume, which is worth a note."""
    report.checks.append(Check(NAME, True, f"claim {claim} {how} {_describe(storage_class)}"))
    if storage_class.get("provisioner") == NO_PROVISIONER:
        report.notes.append(
            f"{KEY}: StorageClass {_name(storage_class)} has no provisioner ({NO_PROVISIONER}): claim {claim} "
            "binds only to a PersistentVolume of that class made beforehand, with room for it and its access "
            "mode; preflight does not read PersistentVolumes")


def storage_class_check(resolved: ResolvedStack, data: ClusterData, report: Report) -> None:
    if not resolved.creates_model_cache_claim:
        return
    stack = resolved.name
    asked = resolved.config.model_cache.pvc.storage_class
    claim = f"{resolved.namespace}/{resolved.model_cache_claim}"
    if asked == "":
        report.checks.append(Check(NAME, None, f"claim {claim} asks for no class ({KEY}: \"\"): it binds only to "
                                               "a PersistentVolume without a class made beforehand, which "
                                               "preflight does not read"))
        return
    classes = data.storage_classes
    if classes is None:
        report.checks.append(Check(NAME, None, f"{data.source} holds no StorageClass (saved without them, or the "
                                               "cluster has none)"))
        report.notes.append(
            f"{KEY}: preflight could not check the class of claim {claim} ({asked or 'the default class'}): the "
            f"saved data holds no StorageClass. To check it, {RESAVE}")
        return
    set_it = f"`pulumi config set --path {KEY} <class> --stack {stack}`"
    no_class_at_all = ("The cluster has no StorageClass: install a provisioner and its class and name it: "
                       f"{set_it}; or keep the cache in a directory on each GPU node, which needs none: "
                       f"`pulumi config set --path modelCache.mode nodeVolume --stack {stack}`")
    by_name = {_name(c): c for c in classes}
    names = sorted(by_name)
    if asked is not None:
        if asked in by_name:
            _accepted(by_name[asked], claim, "asks for a class the cluster has:", report)
            return
        detail = f"claim {claim} asks for {asked}, which the cluster lacks (its classes: {found(classes)})"
        problem = (f"the model cache claim {claim} asks for StorageClass {asked!r}, which the cluster does not have "
                   f"(its classes: {found(classes)}): the claim would never bind, `pulumi up` would wait 5 minutes "
                   "for it and fail, and the pre-pull Job and the workers would stay Pending")
        fix = no_class_at_all
        if classes:
            fix = f"Name one the cluster has ({', '.join(names)}): {set_it.replace('<class>', names[0])}"
            if any(is_default(c) for c in classes):
                fix += (f"; or remove the key to use the default class {_name(_newest_default(classes))}: "
                        f"`pulumi config rm --path {KEY} --stack {stack}`")
            fix += f"; or create StorageClass {asked} on the cluster"
    else:
        if any(is_default(c) for c in classes):
            _accepted(_newest_default(classes), claim, "names no class and gets the cluster's default,", report)
            return
        detail = f"claim {claim} names no class and the cluster has no default (its classes: {found(classes)})"
        which = (f"its classes: {found(classes)}; none is annotated {DEFAULT_ANNOTATIONS[0]}=true" if classes
                 else "it has no StorageClass at all")
        problem = (f"the model cache claim {claim} names no StorageClass ({KEY} unset) and the cluster has no "
                   f"default class ({which}): no provisioner makes its volume, so `pulumi up` would wait 5 "
                   "minutes for it and fail, and the pre-pull Job and the workers would stay Pending")
        fix = no_class_at_all
        if classes:
            fix = (f"Name a class: {set_it.replace('<class>', names[0])}; or make one the default: `kubectl patch "
                   f"storageclass {names[0]} -p '{{\"metadata\": {{\"annotations\": {{\"{DEFAULT_ANNOTATIONS[0]}\": "
                   "\"true\"}}}'`")
        fix += (f"; for a PersistentVolume without a class made beforehand: `pulumi config set --path {KEY} '' "
                f"--stack {stack}`")
    report.checks.append(Check(NAME, False, detail))
    report.problems.append(Problem(KEY, NAME, problem, fix))
