"""The pull request comment the preview workflows post, its github-script steps run under node against
fixtures: it finds its own pull request and bot comment, its fences cannot be closed by the diff,
and its body fits GitHub's limit with one budget for both sections."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from tests.helpers import ROOT, unavailable, workflow

# Each test runs the workflows' scripts under node, a process of its own: the slow tier's (pyproject.toml's markers).
pytestmark = pytest.mark.process

GITHUB_SCRIPT = r"""
const fs = require('fs');
const [scriptPath, fixturePath] = process.argv.slice(2);
const fx = JSON.parse(fs.readFileSync(fixturePath, 'utf8'));
const calls = [], outputs = {};
const call = (name, data) => async (p) => { calls.push([name, p]); return { data }; };
const github = {
  paginate: async (fn, params) => (await fn(params)).data,
  rest: {
    pulls: { list: call('pulls.list', fx.pulls || []) },
    issues: { listComments: call('issues.listComments', fx.comments || []),
              updateComment: call('issues.updateComment', {}),
              createComment: call('issues.createComment', {}) },
    repos: { getEnvironment: call('repos.getEnvironment', fx.environment || {}) },
  },
};
const core = { setOutput: (k, v) => { outputs[k] = v; }, setFailed: (m) => { outputs.failed = m; },
               notice: (m) => { outputs.notice = m; }, info: () => {}, warning: () => {} };
const context = { repo: { owner: 'lab', repo: 'dynamo-lab' } };
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
new AsyncFunction('require', 'github', 'context', 'core', fs.readFileSync(scriptPath, 'utf8'))(
  require, github, context, core)
  .then(() => console.log(JSON.stringify({ calls, outputs })))
  .catch((e) => { console.error(e); process.exit(1); });
"""
MARKER = "<!-- dynamo-lab-offline-diff -->"
SHA = "a" * 40
FIND = ("preview-comment.yml", "comment", "Find the pull request whose head is the run's commit")
POST = ("preview-comment.yml", "comment", "Post or update the comment")
LIVE = ("preview.yml", "live-preview", "Check that the environment requires an approval")
RUN_HEAD = {"HEAD_SHA": SHA, "HEAD_REPO": "mallory/dynamo-lab", "HEAD_BRANCH": "feature"}


def _step(file: str, job: str, name: str) -> dict:
    return next(s for s in workflow(file)["jobs"][job]["steps"] if s.get("name") == name)


def _github_script(tmp_path: Path, step: dict, fixture: dict, env: dict) -> dict:
    node = shutil.which("node")
    if not node:
        unavailable("no node: the workflows' github-script steps are tested under node")
    (tmp_path / "harness.js").write_text(GITHUB_SCRIPT)
    (tmp_path / "script.js").write_text(step["with"]["script"])
    (tmp_path / "fixture.json").write_text(json.dumps(fixture))
    proc = subprocess.run([node, "harness.js", "script.js", "fixture.json"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin", **env})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _pull(number: int, sha: str, repo: str) -> dict:
    return {"number": number, "head": {"sha": sha, "repo": {"full_name": repo}}}


def test_the_comment_finds_its_pull_request_from_the_runs_head_through_the_api(tmp_path):
    step = _step(*FIND)
    assert step["env"] == {"HEAD_SHA": "${{ github.event.workflow_run.head_sha }}",
                           "HEAD_REPO": "${{ github.event.workflow_run.head_repository.full_name }}",
                           "HEAD_BRANCH": "${{ github.event.workflow_run.head_branch }}"}
    pulls = [_pull(8, "b" * 40, "mallory/dynamo-lab"), _pull(7, SHA, "mallory/dynamo-lab"),
             _pull(9, SHA, "someone/dynamo-lab")]
    done = _github_script(tmp_path, step, {"pulls": pulls}, RUN_HEAD)
    assert done["outputs"] == {"number": "7"}
    ((_, query),) = done["calls"]
    assert (query["head"], query["state"]) == ("mallory:feature", "open")
    moved_on = _github_script(tmp_path, step, {"pulls": pulls[:1]}, RUN_HEAD)
    assert moved_on["outputs"]["number"] == ""
    # Nothing the pull request's own run wrote decides where the comment goes.
    for name in ("preview.yml", "preview-comment.yml"):
        assert "pr-number" not in (ROOT / ".github" / "workflows" / name).read_text()
    assert _step(*POST)["env"] == {"PR_NUMBER": "${{ steps.pr.outputs.number }}"}


def _artifact(tmp_path: Path, diff: str) -> None:
    (tmp_path / "preview").mkdir(exist_ok=True)
    (tmp_path / "preview" / "diff.txt").write_text(diff)
    (tmp_path / "preview" / "exit-code").write_text("1\n")
    (tmp_path / "preview" / "pr-number").write_text("999\n")  # what a PR's code could write: ignored


def _comment(cid: int, login: str, body: str) -> dict:
    return {"id": cid, "user": {"login": login, "type": "Bot" if login.endswith("[bot]") else "User"}, "body": body}


def test_the_comment_edits_only_its_own_bot_comment(tmp_path):
    _artifact(tmp_path, "+ a\n")
    others = [_comment(1, "mallory", f"{MARKER}\nfake"), _comment(2, "github-actions[bot]", "another bot comment"),
              _comment(4, "other-app[bot]", f"{MARKER}\nnot ours either")]
    ours = _comment(3, "github-actions[bot]", f"{MARKER}\nold")
    done = _github_script(tmp_path, _step(*POST), {"comments": [*others, ours]}, {"PR_NUMBER": "7"})
    (listed, (kind, args)) = done["calls"]
    assert listed[1]["issue_number"] == 7
    assert kind == "issues.updateComment" and args["comment_id"] == 3
    done = _github_script(tmp_path, _step(*POST), {"comments": others}, {"PR_NUMBER": "7"})
    (kind, args) = done["calls"][-1]
    assert kind == "issues.createComment" and args["issue_number"] == 7


@pytest.mark.parametrize("diff", [
    "+ a\n```\n## injected heading\n[click](https://example.invalid)\n```\n",
    "+ x = '``````````'\n````\n<img src=x>\n",
    "no backticks at all\n",
])
def test_the_diff_cannot_close_the_code_fence(tmp_path, diff):
    _artifact(tmp_path, diff)
    done = _github_script(tmp_path, _step(*POST), {"comments": []}, {"PR_NUMBER": "7"})
    lines = done["calls"][-1][1]["body"].split("\n")
    opening = next(i for i, line in enumerate(lines) if line.startswith("```"))
    fence = re.match(r"`+", lines[opening]).group()
    assert lines[opening] == fence + "diff"
    # CommonMark: a fence is closed by a line of at least as many backticks (after up to 3 spaces).
    closing = [i for i in range(opening + 1, len(lines)) if re.fullmatch(rf" {{0,3}}`{{{len(fence)},}}\s*", lines[i])]
    assert closing == [len(lines) - 1], lines
    assert "\n".join(lines[opening + 1:-1]) == diff


@pytest.mark.parametrize("rules, ok", [
    ([], False),
    ([{"type": "wait_timer", "wait_timer": 5}], False),
    ([{"type": "required_reviewers", "reviewers": [], "prevent_self_review": True}], False),
    ([{"type": "required_reviewers", "reviewers": [{"type": "User"}], "prevent_self_review": False}], False),
    ([{"type": "required_reviewers", "reviewers": [{"type": "Team"}], "prevent_self_review": True}], True),
])
def test_the_live_preview_fails_unless_its_environment_requires_another_reviewer(tmp_path, rules, ok):
    done = _github_script(tmp_path, _step(*LIVE), {"environment": {"protection_rules": rules}}, {})
    assert ("failed" not in done["outputs"]) == ok, done
    assert done["calls"][0][1]["environment_name"] == "live-preview"


@pytest.mark.parametrize("engine", ["  ~ graph-dgd update\n```\n## injected\n", "no backticks\n"])
def test_the_real_engines_preview_goes_into_the_same_comment_in_a_fence_it_cannot_close(tmp_path, engine):
    _artifact(tmp_path, "+ a\n")
    (tmp_path / "preview-engine").mkdir()
    (tmp_path / "preview-engine" / "preview.txt").write_text(engine)
    (tmp_path / "preview-engine" / "exit-code").write_text("0\n")
    done = _github_script(tmp_path, _step(*POST), {"comments": []}, {"PR_NUMBER": "7"})
    body = done["calls"][-1][1]["body"]
    assert body.startswith(MARKER) and "### pulumi preview --diff (real engine, local cluster)" in body
    lines = body.split("\n")
    heading = lines.index("### pulumi preview --diff (real engine, local cluster)")
    opening = next(i for i in range(heading, len(lines)) if lines[i].startswith("```"))
    fence = lines[opening]
    closing = [i for i in range(opening + 1, len(lines)) if re.fullmatch(rf" {{0,3}}`{{{len(fence)},}}\s*", lines[i])]
    assert closing == [len(lines) - 1], lines
    assert "\n".join(lines[opening + 1:-1]) == engine
    assert "engine-preview" in workflow("preview.yml")["jobs"] and "secrets" not in \
        json.dumps(workflow("preview.yml")["jobs"]["engine-preview"])


# --- The comment's size: one budget for the whole body ------------------------------------------

GITHUB_LIMIT = 65536  # "Body is too long (maximum is 65536 characters)": GitHub's 422 for a longer comment
OFFLINE, ENGINE = "### dynamo-lab offline manifest diff", "### pulumi preview --diff (real engine, local cluster)"


def _closing(lines: list[str], opening: int) -> int:
    """The line that closes the fence opened at `opening` (CommonMark: a line of at least as many
    backticks after up to 3 spaces), or -1."""
    fence = re.match(r"`+", lines[opening]).group()
    return next((i for i in range(opening + 1, len(lines))
                 if re.fullmatch(rf" {{0,3}}`{{{len(fence)},}}\s*", lines[i])), -1)


def _sections(body: str) -> dict[str, dict]:
    """Each heading's section as a reader sees it: the lines before its fence, the fence's text and
    what follows the fence up to the next heading."""
    lines, out, i = body.split("\n"), {}, 0
    while i < len(lines):
        if lines[i] not in (OFFLINE, ENGINE):
            i += 1
            continue
        heading, opening = lines[i], next(j for j in range(i, len(lines)) if lines[j].startswith("```"))
        closing = _closing(lines, opening)
        assert closing > opening, f"{heading}: its fence is never closed"
        after = closing + 1
        while after < len(lines) and lines[after] not in (OFFLINE, ENGINE):
            after += 1
        out[heading] = {"before": lines[i + 1:opening], "text": "\n".join(lines[opening + 1:closing]),
                        "after": "\n".join(lines[closing + 1:after]).strip()}
        i = after
    return out


def _post(tmp_path: Path, offline: str, engine: Optional[str]) -> str:
    _artifact(tmp_path, offline)
    if engine is not None:
        (tmp_path / "preview-engine").mkdir(exist_ok=True)
        (tmp_path / "preview-engine" / "preview.txt").write_text(engine)
        (tmp_path / "preview-engine" / "exit-code").write_text("0\n")
    done = _github_script(tmp_path, _step(*POST), {"comments": []}, {"PR_NUMBER": "7"})
    (kind, args) = done["calls"][-1]
    assert kind == "issues.createComment"
    return args["body"]


def _huge(line: str, size: int = 400_000) -> str:
    return "".join(f"{i:6d} {line}\n" for i in range(size // (len(line) + 8)))


def _fits(body: str) -> None:
    """Within GitHub's limit however it counts: characters, UTF-16 units, UTF-8 bytes, or the
    bytes of the body with its newlines as CRLF."""
    for unit, measure in (("characters", len(body)), ("UTF-16 units", len(body.encode("utf-16-le")) // 2),
                          ("UTF-8 bytes", len(body.encode())),
                          ("UTF-8 bytes with CRLF", len(body.replace("\n", "\r\n").encode()))):
        assert measure <= GITHUB_LIMIT, f"the comment is {measure:,} {unit}, over GitHub's {GITHUB_LIMIT:,}"


def _cut(section: dict, whole: str) -> int:
    """How much of `whole` the section shows (a start of it, whole lines but for one long line),
    checked against the note it carries when cut."""
    shown = section["text"]
    assert whole.startswith(shown)
    if shown in (whole, whole.rstrip("\n")):
        assert section["after"] == ""
        return len(whole.encode())
    note = re.fullmatch(r"\*Cut after ([\d,]+) of its ([\d,]+) bytes to fit GitHub's 65,536-character comment "
                        r"limit: the preview run's log and artifact have it all\.\*", section["after"])
    assert note, section["after"]
    assert (int(note[1].replace(",", "")), int(note[2].replace(",", ""))) == (len(shown.encode()), len(whole.encode()))
    return len(shown.encode())


LINE = "+      image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2 # a changed line of a large diff"


SLOW = pytest.mark.slow  # each case is a node process over a large text: the fast tier keeps the telling ones


@pytest.mark.parametrize("offline_size, engine_size", [
    pytest.param(200_000, 200_000, id="both-huge"),
    pytest.param(200_000, 2_000, id="offline-huge-engine-tiny"),
    pytest.param(2_000, 200_000, id="offline-tiny-engine-huge", marks=SLOW),
    pytest.param(200_000, None, id="offline-only", marks=SLOW),
    pytest.param(62_000, 62_000, id="both-just-under-60000", marks=SLOW),
])
def test_the_comment_fits_githubs_limit_with_one_budget_for_both_sections(tmp_path, offline_size, engine_size):
    offline = _huge(LINE, offline_size)
    engine = None if engine_size is None else _huge("  ~ kubernetes:batch/v1:Job graph-pull update", engine_size)
    body = _post(tmp_path, offline, engine)
    _fits(body)
    sections = _sections(body)
    shown = _cut(sections[OFFLINE], offline)
    if engine is None:
        assert list(sections) == [OFFLINE] and shown > 60_000
        return
    shown_engine = _cut(sections[ENGINE], engine)
    # A small section is shown whole and leaves the rest to the other; two large ones share it.
    for size, seen, other in ((offline_size, shown, shown_engine), (engine_size, shown_engine, shown)):
        if size <= 2_000:
            assert seen >= size - 100 and other > 60_000
        else:
            assert seen > 28_000
    assert len(body) > 60_000  # the budget is used, not wasted


@pytest.mark.parametrize("text", [
    # several bytes and UTF-16 units a character
    pytest.param(_huge("+ 名前: 日本語のモデル 🚀 é", 150_000), id="multibyte"),
    # a backtick run longer than the whole budget
    pytest.param("`" * 100_000 + "\n" + _huge(LINE, 50_000), id="backtick-run"),
    pytest.param("x" * 150_000, id="one-line", marks=SLOW),
    # the fence must outgrow every run
    pytest.param(_huge("+ " + "`" * 50 + " inline code", 150_000), id="backticks-inline", marks=SLOW),
])
def test_the_comment_fits_githubs_limit_whatever_the_text(tmp_path, text):
    body = _post(tmp_path, text, text)
    _fits(body)
    sections = _sections(body)
    for heading in (OFFLINE, ENGINE):
        assert _cut(sections[heading], text) > 10_000


def test_each_section_says_it_is_the_pull_requests_own_output(tmp_path):
    body = _post(tmp_path, "+ a\n", "  ~ graph-dgd update\n")
    sections = _sections(body)
    assert list(sections) == [OFFLINE, ENGINE]
    for heading, command in ((OFFLINE, "python3 dev.py diff"), (ENGINE, "python3 dev.py pr-preview")):
        label = " ".join(sections[heading]["before"])
        # Outside the fence, before it: the reader meets it before the text it is about.
        assert "> Output of this pull request's own code" in label and f"`{command}`" in label, label
        assert "the pull request can change what it says" in label, label
        # The verdict line is the pull request's report too, not the workflow's own finding.
        assert re.search(r"\bIt reports\b", label), label
