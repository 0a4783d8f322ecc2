"""Every sample README.md and docs/ show is what its command prints now (dynamo_lab/docs_samples.py):
the cheap ones here, those that run the predictor in the slow tier. A sample that differs fails
naming its page, line and the command that rewrites it; every fenced block is a marked sample, a
snippet a later test runs (```sh, ```yaml) or one said here to be neither."""

from __future__ import annotations

import re
import shutil

import pytest

from dynamo_lab import cli, docs_samples
from dynamo_lab.docs_samples import SampleError
from tests.helpers import ROOT

SAMPLES = docs_samples.all_samples()
# Fenced blocks that are neither a sample a command prints here nor a snippet, by page and first line.
NOT_SAMPLES = {
    ("docs/architecture.md", "Pulumi.<stack>.yaml"): "the data-flow diagram, drawn by hand",
    ("docs/deploy.md", "Previewing update (cross-server):"): (
        "the real Pulumi CLI's preview on the local cluster: the cluster tier keeps it "
        "(tests/lab/cluster/test_checklist.py)"),
}


def _check(sample: docs_samples.Sample) -> None:
    made = docs_samples.output(sample, cli.main, cli.parser)
    assert made == sample.shown, docs_samples.stale_message(sample)


@pytest.mark.parametrize("sample", [pytest.param(s, marks=[pytest.mark.slow] if s.slow else [], id=s.where)
                                    for s in SAMPLES])
def test_each_sample_is_what_its_command_prints_now(sample):
    _check(sample)


def test_the_pages_with_output_mark_their_samples():
    pages = {s.page for s in SAMPLES}
    assert {"docs/advise.md", "docs/sizing.md", "docs/preflight.md", "docs/predictor.md",
            "docs/model-cache.md"} <= pages
    # docs/advise.md's were hand-copied and went stale as the predictor changed: each is marked.
    advise = [s.describe() for s in SAMPLES if s.page == "docs/advise.md"]
    assert any("--input-tokens 16384" in c for c in advise)
    assert any("dynamo_lab.advise.crossover" in c for c in advise)


def test_every_fenced_block_is_a_sample_a_snippet_or_said_to_be_neither():
    marked = {(s.page, s.start) for s in SAMPLES}
    fence = re.compile(r"^([ \t]*)```([a-z]*)\n(.*?)^\1```", re.S | re.M)
    unmarked = []
    for page in docs_samples.pages():
        rel, text = str(page.relative_to(ROOT)), page.read_text()
        for m in fence.finditer(text):
            body_start = m.start(3)
            first = m.group(3).splitlines()[0].strip() if m.group(3) else ""
            if (rel, body_start) in marked or m.group(2) in ("sh", "yaml") or (rel, first) in NOT_SAMPLES:
                continue
            unmarked.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {first[:60]}")
    assert unmarked == [], ("blocks that are neither marked samples (<!-- sample: COMMAND --> above them: "
                            "dynamo_lab/docs_samples.py) nor ```sh or ```yaml snippets")


# --- The mechanism --------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    """A project of its own: Pulumi.yaml, the stack files, tests/ (saved clusters) and a docs page."""
    for f in [ROOT / "Pulumi.yaml", *ROOT.glob("Pulumi.*.yaml")]:
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "docs").mkdir()
    return tmp_path


PAGE = """# A page

Intro.

<!-- sample: dynamo-lab sizing same-server -->
```text
stale output
```

  <!-- sample: dynamo-lab sizing cross-server; with workers[0].memoryLimit=3584Mi; exit 2 -->
  ```
  stale error
  ```

The end.
"""


def _regenerate(root, **kw):
    return list(docs_samples.regenerate(cli.main, cli.parser, root=root, **kw))


def test_regenerating_writes_each_sample_in_place_and_then_finds_nothing_to_change(project):
    page = project / "docs" / "page.md"
    page.write_text(PAGE)
    done = _regenerate(project)
    assert [(s.where, changed) for s, changed in done] == [("docs/page.md:5", True), ("docs/page.md:10", True)]
    text = page.read_text()
    assert text.startswith("# A page\n\nIntro.\n\n<!-- sample: dynamo-lab sizing same-server -->\n```text\nStack "
                           "same-server: ")
    # The refusal went into the indented block, indented, and the text around the samples is as it was.
    assert ("  ```\n  error: dynamo-lab sizing: Pulumi.cross-server.yaml: workers.prefill.memoryLimit: 3584Mi is "
            "below") in text
    assert text.endswith("  ```\n\nThe end.\n")
    assert [changed for _, changed in _regenerate(project)] == [False, False]
    assert docs_samples.stale(cli.main, cli.parser, root=project) == []


def test_a_stale_sample_is_named_with_its_page_line_and_the_command_that_rewrites_it(project):
    (project / "docs" / "page.md").write_text(PAGE)
    stale = docs_samples.stale(cli.main, cli.parser, root=project)
    assert [s.where for s in stale] == ["docs/page.md:5", "docs/page.md:10"]
    assert docs_samples.stale_message(stale[0]) == (
        "docs/page.md:5: the sample `dynamo-lab sizing same-server` prints is not what the page shows: run "
        "`python3 dev.py docs-samples docs/page.md` and review the diff")


def test_a_command_that_does_not_end_as_marked_writes_nothing(project):
    page = project / "docs" / "page.md"
    text = PAGE.replace("; exit 2 -->", " -->")  # the refusal, marked as if it succeeded
    page.write_text(text)
    with pytest.raises(SampleError, match=r"`dynamo-lab sizing cross-server; with workers\[0\].memoryLimit=3584Mi` "
                       r"exited 2, not 0: nothing written; what it said: error: dynamo-lab sizing: "
                       r"Pulumi.cross-server.yaml: workers.prefill"):
        _regenerate(project)
    assert page.read_text() == text  # the first sample, made before, is not written either


def test_the_command_line_checks_and_rewrites_the_pages_it_names(project, monkeypatch, capsys):
    (project / "docs" / "page.md").write_text(PAGE)
    monkeypatch.chdir(project)
    assert cli.main(["docs-samples", "--check", "docs/page.md"]) == 1
    assert "docs/page.md:5: the sample `dynamo-lab sizing same-server` prints is not what" in capsys.readouterr().out
    assert cli.main(["docs-samples", "docs/page.md"]) == 0
    assert "2 sample(s) rewritten" in capsys.readouterr().out
    assert cli.main(["docs-samples", "--check", "docs/page.md"]) == 0


@pytest.mark.parametrize(("marker", "why"), [
    ("<!-- sample: dynamo-lab sizing same-server -->\nNo block.\n", "neither a fence"),
    ("<!-- sample: -->\n```\n```\n", "names no command"),
    ("<!-- sample: kubectl get nodes -->\n```\n```\n", "neither `dynamo-lab ARGS` nor"),
    ("<!-- sample: python -m json.tool -->\n```\n```\n", "neither `dynamo-lab ARGS` nor"),
    ("<!-- sample: dynamo-lab sizing same-server; exit two -->\n```\n```\n", "is not `with KEY=VALUE"),
    ("<!-- sample: dynamo-lab sizing same-server; with replicas -->\n```\n```\n", "KEY=VALUE"),
    ("<!-- sample: dynamo-lab sizing same-server -->\n```\nnever closed\n", "never closed"),
])
def test_a_malformed_marker_is_refused_naming_its_page_and_line(marker, why):
    with pytest.raises(SampleError, match=re.escape(why)) as info:
        docs_samples.samples("# t\n\n" + marker, "docs/x.md")
    assert str(info.value).startswith("docs/x.md:3: ")


def test_a_table_or_a_closed_span_is_a_sample_too():
    text = "<!-- sample: dynamo-lab a -->\n| a |\n|---|\n\nAfter.\n<!-- sample: dynamo-lab b -->\nx\n\ny\n" \
           "<!-- /sample -->\n"
    table, span = docs_samples.samples(text, "p.md")
    assert table.shown == "| a |\n|---|\n" and span.shown == "x\n\ny\n"


def test_with_sets_a_path_as_pulumi_config_set_path_does():
    config = {"dynamo-lab:workers": [{"name": "a"}], "kubernetes:context": "x"}
    docs_samples.set_path(config, "workers[0].memoryLimit", "1Gi")
    docs_samples.set_path(config, "workers[1]", {"name": "b"})
    docs_samples.set_path(config, "modelCache.pvc.size", "2Gi")
    docs_samples.set_path(config, "kubernetes:context", "y")
    assert config == {"dynamo-lab:workers": [{"name": "a", "memoryLimit": "1Gi"}, {"name": "b"}],
                      "kubernetes:context": "y", "dynamo-lab:modelCache": {"pvc": {"size": "2Gi"}}}
    with pytest.raises(SampleError, match="no item 5"):
        docs_samples.set_path(config, "workers[5].name", "c")
