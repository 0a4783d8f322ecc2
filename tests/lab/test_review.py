"""Golden renders and the offline `diff` command."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess

import pytest
import yaml

from dynamo_lab import render, review, stack_files
from infra import catalogue
from tests.helpers import ROOT, STACKS, run_cli

GOLDENS = pytest.mark.parametrize("stack", [*STACKS, *catalogue.EXAMPLE_STACKS])
VARIANT = pytest.mark.parametrize("variant", [None, *review.VARIANTS])


def _stale(golden) -> str:
    return f"{golden.name} is stale: run `python3 dev.py golden`, review the diff, commit it"


@GOLDENS
@VARIANT
def test_golden_render_is_current(stack, variant):
    # What the golden holds, read back (libyaml's parser, where PyYAML has it): every document, its
    # keys in their order and every value, and every comment line, against the program's run now.
    # The text is PyYAML's dump of exactly these, so it is the same unless only its formatting moved,
    # which the slow tier's byte-for-byte comparison below sees; dumping a variant's 400 KB here
    # cost the fast tier about 4 s.
    golden = review.golden_path(ROOT, stack, variant)
    assert golden.is_file(), "run: python3 dev.py golden"
    text = golden.read_text()
    run = review.rendered(stack, variant=variant)
    comments = (render.header(run) + "".join(head for head, _ in render.documents(run))).splitlines()
    assert [line for line in text.splitlines() if line.startswith("#")] == comments, _stale(golden)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    held = [json.dumps(d) for d in yaml.load_all(text, Loader=loader) if d is not None]
    assert held == [json.dumps(doc) for _, doc in render.documents(run)], _stale(golden)


@pytest.mark.slow  # the dump of every golden, 400 KB a variant: the fast tier compares what they hold
@GOLDENS
@VARIANT
def test_golden_render_is_current_byte_for_byte(stack, variant):
    golden = review.golden_path(ROOT, stack, variant)
    assert review.render_yaml(stack, variant=variant) == golden.read_text(), _stale(golden)


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def _project_template(tmp_path_factory):
    """The project (code + stack files) committed on main in a git repo, made once per test process:
    its copies below cost no git process (nine repos made from scratch were 27 git runs)."""
    repo = tmp_path_factory.mktemp("review") / "repo"
    repo.mkdir()
    for package in ("infra", "dynamo_lab"):
        shutil.copytree(ROOT / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    # The project file and the stacks it ships, not whatever else is beside them: the tests below ask
    # for the exact stacks diffed, and a user's own stack file in the checkout would be one more.
    for name in ("Pulumi.yaml", *(f"Pulumi.{s}.yaml" for s in (*STACKS, *catalogue.EXAMPLE_STACKS))):
        shutil.copy(ROOT / name, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    _git(repo, "repack", "-a", "-d", "-q")  # one pack, not a file per object, for each copy to copy
    return repo


@pytest.fixture
def project_repo(_project_template, tmp_path):
    """A throwaway git repo holding the project (code + stack files), committed on main: each test's
    own copy, free to change."""
    return shutil.copytree(_project_template, tmp_path / "repo", symlinks=True)


def _diff(repo, *args):
    """`dynamo-lab diff ARGS` in the repo (in this process: the repo's code is the running code, so
    the working tree, and a base with the same code, render here)."""
    return run_cli("diff", *args, cwd=repo)


def test_diff_without_changes_exits_0(project_repo):
    proc = _diff(project_repo)
    assert proc.returncode == 0, proc.stderr
    assert "cross-server: 0 added, 0 changed, 0 removed" in proc.stdout
    assert "---" not in proc.stdout


def test_diff_shows_exactly_one_changed_worker_flag(project_repo):
    stack_file = project_repo / "Pulumi.cross-server.yaml"
    text = stack_file.read_text()
    stack_file.write_text(text.replace("      kvCacheBytes: 4Gi\n",
                                       "      kvCacheBytes: 4Gi\n      extraArgs: [--max-num-seqs, '16']\n"))
    proc = _diff(project_repo, "cross-server")
    assert proc.returncode == 1, proc.stderr
    changed = [line for line in proc.stdout.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["+          - --max-num-seqs", "+          - '16'"]
    assert proc.stdout.rstrip().endswith("cross-server: 0 added, 1 changed, 0 removed")


def test_diff_reports_added_stacks_and_bad_refs(project_repo):
    shutil.copy(project_repo / "Pulumi.kv-routing.yaml", project_repo / "Pulumi.kv-copy.yaml")
    proc = _diff(project_repo, "kv-copy")
    assert proc.returncode == 1
    assert "kv-copy: 10 added, 0 changed, 0 removed" in proc.stdout  # incl. 2 pre-pull Jobs, 2 node volumes, 2 claims
    bad = _diff(project_repo, "--base", "no-such-ref")
    assert bad.returncode == 2
    assert "no-such-ref" in bad.stderr


@pytest.mark.process
def test_a_base_with_other_code_renders_with_its_own_code(project_repo):
    # The base's program labels namespaces differently; the working tree has the code that runs.
    manifests = project_repo / "infra" / "manifests" / "__init__.py"
    original = manifests.read_text()
    assert 'STACK_LABEL = "dynamo-lab/stack"' in original
    manifests.write_text(original.replace('STACK_LABEL = "dynamo-lab/stack"', 'STACK_LABEL = "dynamo-lab/old-stack"'))
    _git(project_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "old label")
    manifests.write_text(original)
    _git(project_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "new label")
    proc = _diff(project_repo, "--base", "HEAD~1", "cross-server")
    assert proc.returncode == 1, proc.stderr
    changed = [line[0] + line[1:].strip() for line in proc.stdout.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-dynamo-lab/old-stack: cross-server", "+dynamo-lab/stack: cross-server"] * 2


def _commit(repo, message):
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def _broken_stack_files(repo) -> dict[str, str]:
    """Two stack files of a user's beside the shipped ones, each refused: one with a misspelled key,
    one half written (cut off mid-list, as an editor's crash leaves one); each name with the line
    its refusal must be."""
    text = (repo / "Pulumi.kv-routing.yaml").read_text()
    assert "  dynamo-lab:workers:\n" in text
    (repo / "Pulumi.mine-typo.yaml").write_text(text.replace("  dynamo-lab:workers:\n", "  dynamo-lab:wrokers:\n"))
    half = text[:text.index("  dynamo-lab:workers:\n")] + "  dynamo-lab:workers: [\n"
    (repo / "Pulumi.mine-half.yaml").write_text(half)
    return {"mine-typo": "Pulumi.mine-typo.yaml: wrokers: unknown key `dynamo-lab:wrokers`; did you mean "
                         "`dynamo-lab:workers`?",
            "mine-half": "Pulumi.mine-half.yaml: not valid YAML at line "}


def test_a_broken_stack_file_is_named_once_and_every_other_stack_is_still_diffed(project_repo):
    broken = _broken_stack_files(project_repo)
    cross = project_repo / "Pulumi.cross-server.yaml"
    cross.write_text(cross.read_text().replace("      kvCacheBytes: 4Gi\n",
                                               "      kvCacheBytes: 4Gi\n      extraArgs: [--max-num-seqs, '16']\n"))
    proc = _diff(project_repo)  # no stack named: every stack file in the directory
    assert proc.returncode == 2, proc.stderr
    # The good stacks are diffed all the same: the changed one's diff, a summary line of each.
    assert "+          - --max-num-seqs" in proc.stdout
    good = [*STACKS, *catalogue.EXAMPLE_STACKS]
    for stack in good:
        changed = 1 if stack == "cross-server" else 0
        assert f"{stack}: 0 added, {changed} changed, 0 removed" in proc.stdout.splitlines()
    for stack in broken:
        assert f"{stack}: not diffed (its error, on stderr, says why)" in proc.stdout.splitlines()
    # Each broken file named with its key, why and the fix, once; one prefix a line, the one every
    # command's refusal has; nothing of the good stacks.
    lines = proc.stderr.splitlines()
    prefix = "error: dynamo-lab diff: "
    assert all(line.startswith(prefix) and line.count("error:") == 1 and line.count("dynamo-lab diff") == 1
               for line in lines), proc.stderr
    assert len(lines) == len(set(lines)) == 2, proc.stderr  # each file's one problem, said once
    for stack, why in broken.items():
        assert [line for line in lines if f"Pulumi.{stack}.yaml" in line][0].startswith(prefix + why), proc.stderr
    # As `render` refuses the same file, word for word, but for the command's name.
    typo = run_cli("render", "mine-typo", cwd=project_repo)
    assert typo.returncode == 2
    assert typo.stderr.replace("dynamo-lab render: ", "dynamo-lab diff: ") in proc.stderr
    # Named, the same: the good one diffed, the broken and a stack no tree has each refused.
    named = _diff(project_repo, "mine-typo", "same-server", "no-such-stack")
    assert named.returncode == 2, named.stderr
    assert "same-server: 0 added, 0 changed, 0 removed" in named.stdout.splitlines()
    said = named.stderr.splitlines()
    assert said[0].startswith(prefix + broken["mine-typo"]) and len(said) == 2, named.stderr
    assert said[1].startswith(prefix + "no stack file Pulumi.no-such-stack.yaml in "), named.stderr


@pytest.mark.process
def test_a_refs_broken_stack_file_the_change_mends_or_deletes_is_diffed_against_nothing(project_repo):
    # The base renders in a process of its own (other code), whose refusal carries `render`'s prefix:
    # diff says it once, its own, naming the ref the file is refused at, and does not fail the change
    # that mends it (a pull request's check would report the fix as broken).
    broken = _broken_stack_files(project_repo)
    _commit(project_repo, "a user's files")
    package = project_repo / "infra" / "__init__.py"
    package.write_text(package.read_text() + "\n# moved\n")
    _commit(project_repo, "other code")
    why = broken["mine-typo"].replace("Pulumi.mine-typo.yaml: ", "Pulumi.mine-typo.yaml at HEAD~1: ")
    # Mended: the working tree's file renders; everything it deploys is new against nothing.
    shutil.copy(project_repo / "Pulumi.kv-routing.yaml", project_repo / "Pulumi.mine-typo.yaml")
    fixed = _diff(project_repo, "--base", "HEAD~1", "mine-typo")
    assert fixed.returncode == 1, fixed.stderr
    said = fixed.stdout.splitlines()
    at = said.index("mine-typo: 10 added, 0 changed, 0 removed "
                    "(against nothing: its file at HEAD~1 is refused, as follows)")
    assert said[at + 1].startswith("  " + why) and said[at + 2:] == [], fixed.stdout
    assert fixed.stderr == "", fixed.stderr
    # Deleted: nothing deployed before or after, and the ref's problem still said.
    (project_repo / "Pulumi.mine-typo.yaml").unlink()
    gone = _diff(project_repo, "--base", "HEAD~1", "mine-typo")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.splitlines()[0] == ("mine-typo: 0 added, 0 changed, 0 removed "
                                           "(against nothing: its file at HEAD~1 is refused, as follows)")
    assert gone.stdout.splitlines()[1].startswith("  " + why) and gone.stderr == "", gone.stdout
    # Still broken in the working tree, differently: both trees' problems, each once, and exit 2.
    (project_repo / "Pulumi.mine-typo.yaml").write_text(
        (project_repo / "Pulumi.kv-routing.yaml").read_text().replace("  dynamo-lab:workers:\n",
                                                                      "  dynamo-lab:wrkers:\n"))
    both = _diff(project_repo, "--base", "HEAD~1", "mine-typo")
    assert both.returncode == 2, both.stderr
    assert both.stdout == "mine-typo: not diffed (its error, on stderr, says why)\n"
    lines = both.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: dynamo-lab diff: " + why), both.stderr
    assert lines[1].startswith("error: dynamo-lab diff: Pulumi.mine-typo.yaml: wrkers: unknown key"), both.stderr


@pytest.mark.process
def test_a_ref_whose_own_code_fails_is_trouble_not_a_stack_file_the_change_mends(project_repo):
    # The ref's code crashing (a traceback, not render's refusal: exit 1, say an SDK the change
    # upgrades that the ref's code cannot import) says nothing of its stack files: diffing every
    # stack against nothing would report all it deploys as added, exit 1, where nothing was diffed.
    main = project_repo / "dynamo_lab" / "__main__.py"
    original = main.read_text()
    main.write_text('raise RuntimeError("the ref cannot run here")\n' + original)
    _commit(project_repo, "code that cannot run")
    main.write_text(original)
    _commit(project_repo, "code that runs")
    proc = _diff(project_repo, "--base", "HEAD~1", "cross-server")
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == "cross-server: not diffed (its error, on stderr, says why)\n", proc.stdout
    assert proc.stderr.startswith("error: dynamo-lab diff: Pulumi.cross-server.yaml at HEAD~1: `python -m "
                                  "dynamo_lab render cross-server` (the ref's own code) failed with exit 1: "
                                  "RuntimeError: the ref cannot run here"), proc.stderr


def _advised_stack(repo) -> str:
    """A user's own stack file beside the shipped ones, as `advise --write` makes one (docs/advise.md),
    added after the repo's commit; its name, one no stack file of the checkout has (the checkout may
    hold a Pulumi.advised.yaml of its user's, committed into the repo with the rest)."""
    name = next(n for n in ("advised", *(f"advised-{i}" for i in range(1, 100)))
                if not (repo / f"Pulumi.{n}.yaml").exists())
    shutil.copy(repo / "Pulumi.kv-routing.yaml", repo / f"Pulumi.{name}.yaml")
    return name


@pytest.fixture
def rendered(monkeypatch):
    """Rendering recorded instead of done (which stacks are rendered is what these tests ask; the
    renders themselves are the tests above): each stack renders as one ConfigMap holding its file."""
    seen: list[str] = []

    def render_yaml(stack, root=None, variant=None):
        seen.append(stack)
        return yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": f"{stack}-{variant}"},
                               "data": {"file": (root / f"Pulumi.{stack}.yaml").read_text()}})

    monkeypatch.setattr(review, "render_yaml", render_yaml)
    monkeypatch.setattr(review, "_running_code_is", lambda tree: True)
    return seen


def test_every_stack_file_is_diffed_the_examples_and_a_users_own_alike(project_repo, rendered):
    own = _advised_stack(project_repo)
    out = io.StringIO()
    assert review.diff(project_repo, "main", [], out) == 1, out.getvalue()  # the user's file is new
    everything = stack_files.stacks_in(project_repo)  # the shipped and example stacks, the new one among them
    assert own in everything and set(catalogue.EXAMPLE_STACKS) <= set(everything)
    assert sorted(set(rendered)) == everything
    summary = re.compile(r"[\w.-]+: \d+ added, \d+ changed, \d+ removed")
    lines = [line for line in out.getvalue().splitlines() if summary.fullmatch(line)]
    assert sorted(line.split(":")[0] for line in lines) == everything
    assert f"{own}: 1 added, 0 changed, 0 removed" in lines
    named = io.StringIO()
    assert review.diff(project_repo, "main", ["same-server"], named) == 0
    assert named.getvalue().splitlines() == ["same-server: 0 added, 0 changed, 0 removed"]


def test_golden_writes_only_what_changed_and_only_the_shipped_stacks(project_repo, rendered):
    own = _advised_stack(project_repo)
    first = review.write_golden(project_repo)
    assert sorted({p.name.split(".")[0] for p, _ in first}) == sorted([*STACKS, *catalogue.EXAMPLE_STACKS])
    assert all(changed for _, changed in first)
    again = review.write_golden(project_repo)
    assert [p for p, _ in again] == [p for p, _ in first] and not any(changed for _, changed in again)
    (project_repo / "Pulumi.same-server.yaml").write_text("edited\n")
    third = review.write_golden(project_repo)
    assert {p.name for p, changed in third if changed} == {
        review.golden_path(project_repo, "same-server", v).name for v in (None, *review.VARIANTS)}
    named = review.write_golden(project_repo, [own])
    assert {p.name.split(".")[0] for p, _ in named} == {own}


def test_golden_says_which_files_it_wrote(project_repo, rendered):
    first = run_cli("golden", "cross-server", cwd=project_repo)
    assert first.stdout.count("wrote ") == 1 + len(review.VARIANTS), first.stdout
    again = run_cli("golden", "cross-server", cwd=project_repo)
    n = 1 + len(review.VARIANTS)
    assert again.stdout.strip() == f"{n} of {n} golden files already current", again.stdout


def test_the_tests_shipped_stacks_are_named_not_found():
    # A user's stack file in the checkout (advise --write's) must not become a test case.
    from infra import catalogue

    assert STACKS == list(catalogue.SHIPPED_STACKS)
    assert set(STACKS) <= set(stack_files.stacks_in(ROOT)), "a shipped stack's file is missing"
