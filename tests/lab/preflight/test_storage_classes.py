"""Preflight and the model cache claim's StorageClass (`modelCache.mode: pvc`): a class the cluster
lacks, or no class where the cluster has no default, would leave the claim unbound and `pulumi up`
waiting five minutes before it fails; preflight refuses the stack first, naming the class asked for
and the classes found (the default marked), and says what to write instead."""

from __future__ import annotations

from typing import Optional

import pytest

from dynamo_lab.cli import main
from dynamo_lab.preflight import cluster_data, text
from dynamo_lab.preflight.run import check
from tests.helpers import loaded
from tests.lab.preflight.saved_lab import LAB, lab, preflight, problems, report_for, saved

DEFAULT = "storageclass.kubernetes.io/is-default-class"
CLAIM = "dynamo-lab-kv-routing/kv-routing-model-cache"


def storage_class(name: str, default: Optional[str] = None, mode: str = "WaitForFirstConsumer",
                  annotation: str = DEFAULT) -> dict:
    meta = {"name": name, **({"annotations": {annotation: default}} if default is not None else {})}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": mode}


def pvc(storage: Optional[str] = None):
    claim = {} if storage is None else {"storageClass": storage}
    return lambda c: c.update(modelCache={"mode": "pvc", "pvc": claim})


def with_classes(tmp_path, *classes: dict) -> str:
    return saved(tmp_path, lambda version, items: items.extend(classes))


def storage_row(report) -> Optional[tuple]:
    rows = [(c.ok, c.detail) for c in report.checks if c.name == "storage class"]
    return rows[0] if rows else None


def test_a_class_the_cluster_lacks_is_refused_with_the_classes_it_has_and_what_to_write(tmp_path):
    path = with_classes(tmp_path, storage_class("local-path", "true"), storage_class("fast", mode="Immediate"))
    report = report_for("kv-routing", path, pvc("nfs"))
    assert not report.fits
    (problem,) = report.problems
    assert (problem.where, problem.check) == ("modelCache.pvc.storageClass", "storage class")
    assert f"claim {CLAIM} asks for StorageClass 'nfs', which the cluster does not have" in problem.problem
    assert "(its classes: fast, local-path (default))" in problem.problem
    assert "`pulumi up` would wait 5 minutes for it and fail" in problem.problem
    assert problem.fix.startswith("Name one the cluster has (fast, local-path): `pulumi config set --path "
                                  "modelCache.pvc.storageClass fast --stack kv-routing`")
    assert ("remove the key to use the default class local-path: `pulumi config rm --path "
            "modelCache.pvc.storageClass --stack kv-routing`") in problem.fix
    assert storage_row(report)[0] is False


def test_the_text_report_shows_the_refusal_and_the_shipped_stack_needs_no_class(tmp_path, capsys):
    path = with_classes(tmp_path, storage_class("local-path"))
    report = report_for("kv-routing", path, pvc())
    out = text.text(report)
    assert "storage class       FAILS" in out
    assert "names no StorageClass (modelCache.pvc.storageClass unset) and the cluster has no default class " \
           "(its classes: local-path; none is annotated storageclass.kubernetes.io/is-default-class=true)" in out
    (fix,) = [f for p, f in problems(out) if p.startswith("modelCache.pvc.storageClass")]
    assert fix.startswith("Name a class: `pulumi config set --path modelCache.pvc.storageClass local-path --stack "
                          "kv-routing`; or make one the default: `kubectl patch storageclass local-path -p "
                          "'{\"metadata\": {\"annotations\": {\"storageclass.kubernetes.io/is-default-class\": "
                          "\"true\"}}}'`")
    assert out.rstrip().endswith("(1 problem); fix them before `pulumi up`.")
    # The shipped stack (nodeVolume: PersistentVolumes of its own, class "") against the same cluster.
    assert main(["preflight", "kv-routing", "--from", path]) == 0
    assert "storage class" not in capsys.readouterr().out


@pytest.mark.parametrize("classes, asked, detail", [
    ([storage_class("local-path", "true")], None,
     "names no class and gets the cluster's default, local-path (provisioner rancher.io/local-path, "
     "WaitForFirstConsumer)"),
    ([storage_class("old", "true", annotation="storageclass.beta.kubernetes.io/is-default-class")], None,
     "gets the cluster's default, old"),
    ([storage_class("fast", mode="Immediate"), storage_class("slow", "false")], "fast",
     "asks for a class the cluster has: fast (provisioner rancher.io/local-path, Immediate)"),
])
def test_a_class_the_cluster_has_or_its_default_fits(tmp_path, classes, asked, detail):
    report = report_for("kv-routing", with_classes(tmp_path, *classes), pvc(asked))
    assert report.fits, report.problems
    ok, said = storage_row(report)
    assert ok is True and detail in said
    assert report.notes == []


def test_a_class_without_a_provisioner_fits_with_a_note_that_it_needs_a_volume_made_beforehand(tmp_path):
    manual = storage_class("manual", mode="Immediate")
    manual["provisioner"] = "kubernetes.io/no-provisioner"
    report = report_for("kv-routing", with_classes(tmp_path, manual), pvc("manual"))
    assert report.fits
    (note,) = report.notes
    assert note == ("modelCache.pvc.storageClass: StorageClass manual has no provisioner "
                    f"(kubernetes.io/no-provisioner): claim {CLAIM} binds only to a PersistentVolume of that class "
                    "made beforehand, with room for it and its access mode; preflight does not read PersistentVolumes")


def test_a_default_annotation_that_is_not_true_is_no_default(tmp_path):
    report = report_for("kv-routing", with_classes(tmp_path, storage_class("slow", "false")), pvc())
    assert not report.fits and "(its classes: slow; none is annotated" in report.problems[0].problem


def test_a_cluster_with_no_class_at_all_gets_the_node_directory_as_its_fix():
    version, items = lab()
    data = cluster_data.from_objects(version["serverVersion"], items, "cluster")  # live: none listed is none
    assert data.storage_classes == []
    for asked, said in ((None, "it has no StorageClass at all"), ("nfs", "(its classes: none)")):
        (problem,) = check(loaded("kv-routing", pvc(asked)), data).problems
        assert said in problem.problem
        assert "`pulumi config set --path modelCache.mode nodeVolume --stack kv-routing`" in problem.fix


def test_a_file_saved_without_storage_classes_is_read_and_says_it_could_not_check(capsys):
    data = cluster_data.read_file(str(LAB))  # the lab's file predates storageclasses in the command
    assert data.storage_classes is None
    report = check(loaded("kv-routing", pvc("nfs")), data)
    assert report.fits
    ok, detail = storage_row(report)
    assert ok is None and "holds no StorageClass (saved without them, or the cluster has none)" in detail
    (note,) = report.notes
    assert note.startswith("modelCache.pvc.storageClass: preflight could not check the class of claim "
                           f"{CLAIM} (nfs)") and "storageclasses -A -o json" in note
    assert "storage class       not checked" in text.text(report)


def test_an_empty_class_is_a_pre_made_volume_preflight_does_not_read(tmp_path):
    report = report_for("kv-routing", with_classes(tmp_path, storage_class("local-path", "true")), pvc(""))
    assert report.fits
    ok, detail = storage_row(report)
    assert ok is None and "binds only to a PersistentVolume without a class made beforehand" in detail


@pytest.mark.parametrize("mode", ["nodeVolume", "hostPath", "off"])
def test_modes_without_a_claim_to_provision_need_no_class(tmp_path, mode):
    report = report_for("kv-routing", with_classes(tmp_path, storage_class("x")),
                        lambda c: c.update(modelCache={"mode": mode}))
    assert report.fits and storage_row(report) is None


def test_an_existing_claim_needs_no_class(tmp_path):
    report = report_for("kv-routing", with_classes(tmp_path), lambda c: c.update(
        modelCache={"mode": "pvc", "pvc": {"claimName": "mine"}}))
    assert report.fits and storage_row(report) is None


def test_a_malformed_storage_class_is_one_line_and_exit_2(tmp_path, capsys):
    bad = storage_class("x")
    bad["provisioner"] = ["a"]
    code, out, err = preflight(capsys, "kv-routing", with_classes(tmp_path, bad))
    assert (code, out) == (2, "") and "StorageClass x: provisioner is a list, not a string" in err
