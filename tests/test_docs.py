"""The documentation against the program: the README's deploy checklist in the order a deploy runs,
what the docs say the stacks export, and where they send a reader."""

from __future__ import annotations

import re

import yaml

from infra import catalogue
from infra.manifests import graph
from tests.helpers import ROOT, deploy_checklist, everything_on, loaded, pulumi_steps, run_stack

README = (ROOT / "README.md").read_text()
PAGES = sorted((ROOT / "docs").glob("*.md"))
CHECKLIST = deploy_checklist(README)


def _commands() -> list[tuple[int, str]]:
    return [(step.number, command) for step in CHECKLIST for command in step.commands()]


def _first(prefix: str) -> int:
    """The position, in checklist order, of the first command that starts with `prefix`."""
    return next(i for i, (_, command) in enumerate(_commands()) if command.startswith(prefix))


def _outputs_listed(text: str) -> set[str]:
    start = text.index("Stack outputs: ")
    paragraph = text[start:text.index("\n\n", start)]
    return set(re.findall(r"`([a-zA-Z]+)`", paragraph))


def test_the_stack_outputs_list_names_every_output_the_program_exports():
    # With every optional part on (pre-pull, probe, benchmark), every output there is.
    exported = set(run_stack("cross-server", everything_on("cross-server")).outputs)
    assert {"benchJob", "probeLogs", "modelPullJobs"} <= exported
    assert _outputs_listed(README) == exported


def test_the_readme_is_a_short_walk_and_links_every_page_of_the_docs():
    assert len(README.splitlines()) <= 250
    linked = set(re.findall(r"\]\(docs/([a-z-]+\.md)\)", README))
    assert linked == {p.name for p in PAGES}


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    for page in [ROOT / "README.md", *PAGES]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://")):
                assert (page.parent / target).exists(), f"{page.name} links {target}, which does not exist"


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), re.M)}


def test_every_link_to_a_section_finds_its_heading():
    links = []
    for page in [ROOT / "README.md", *PAGES]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            if not target.startswith(("http://", "https://")):
                links.append((page.name, target, anchor))
                linked = (page.parent / target) if target else page
                assert anchor in _anchors(linked.read_text()), f"{page.name} links {target}#{anchor}: no such heading"
    # docs/beyond-the-lab.md sends its reader to the crossover study.
    assert ("beyond-the-lab.md", "advise.md", "when-separation-pays-an-estimate") in links


def test_the_checklist_is_numbered_in_order_and_every_step_is_a_command():
    assert [s.number for s in CHECKLIST] == list(range(1, len(CHECKLIST) + 1))
    assert all(s.commands() for s in CHECKLIST), [s.title for s in CHECKLIST if not s.commands()]


def test_the_checklist_runs_in_the_order_a_deploy_needs():
    order = [_first("curl -fsSL https://get.pulumi.com"), _first("helm upgrade -i nvdp"),
             _first("python3 dev.py setup"), _first("export PULUMI_CONFIG_PASSPHRASE="),
             _first("pulumi stack select --create cross-server"), _first("pulumi config set kubernetes:context"),
             _first("python3 dev.py preflight cross-server"), _first("pulumi preview --stack cross-server"),
             _first("pulumi up --stack cross-server"), _first("curl -s localhost:"),
             _first("pulumi destroy --stack cross-server"), _first("pulumi stack rm cross-server")]
    assert order == sorted(order)
    assert _commands()[-1][1].startswith("pulumi stack rm cross-server --preserve-config")


def _pulumi_config_commands(text: str) -> list[str]:
    """`pulumi config set|rm|get KEY ...` wherever the text shows one: code spans and shell blocks."""
    fence = re.compile(r"```[a-z]*\n(.*?)```", re.S)
    spans = [line for block in fence.findall(text) for line in block.splitlines()]
    spans += re.findall(r"`([^`]+)`", fence.sub("", text))
    pattern = re.compile(r"pulumi config (?:set|rm|get) [^;&|]+")
    return [m.group(0) for span in spans for m in pattern.finditer(" ".join(span.split()))]


def test_every_pulumi_config_command_names_its_stack():
    commands = _pulumi_config_commands(README)
    assert len(commands) >= 3
    for page in PAGES:
        commands += _pulumi_config_commands(page.read_text())
    assert len(commands) >= 5  # the checklist's, and docs/deploy.md's for a token and platform.manage
    assert [c for c in commands if "--stack" not in c] == []


def test_the_first_request_goes_to_the_frontend_the_stack_deploys():
    # The stack as step 6 leaves it: kubernetes:context my-lab.
    cfg = loaded("cross-server", lambda c: c.update({"kubernetes:context": "my-lab"})).config
    commands = [c for _, c in _commands()]
    assert graph.port_forward_command(cfg) + " &" in commands
    (curl,) = [c for c in commands if c.startswith("curl -s localhost:")]
    assert curl.startswith(f"curl -s localhost:{graph.FRONTEND_PORT}/v1/chat/completions ")
    body = yaml.safe_load(re.search(r"-d '(\{.*\})'", curl).group(1))
    assert body["model"] == cfg.model.name and body["messages"][0]["role"] == "user"


def test_the_time_slicing_step_gives_every_shipped_stack_its_gpu_units():
    (script,) = [s for step in CHECKLIST for s in step.scripts if "timeSlicing" in s]
    config = yaml.safe_load(script.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0])
    (resource,) = config["sharing"]["timeSlicing"]["resources"]
    for stack in ("cross-server", "kv-routing", "same-server"):
        resolved = loaded(stack).resolved
        cfg = resolved.config
        for cls in resolved.worker_classes:
            assert cfg.gpu_classes[cls].resource == resource["name"]
            workers = sum(g.replicas for g in cfg.workers if g.gpu_class == cls)
            assert resource["replicas"] >= workers, (stack, cls, workers)


def test_the_checklists_preview_step_points_to_a_real_preview():
    preview = next(s for s in CHECKLIST if any(c.startswith("pulumi preview") for c in s.commands()))
    after = README[README.index("pulumi preview --stack cross-server"):]
    assert preview.number == 8 and after.index('"What a preview shows"') < after.index("9. **")
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert "## What a preview shows" in deploy and deploy.index("<!-- preview-output -->") < deploy.index(
        "<!-- /preview-output -->")


def test_the_pulumi_steps_are_the_checklists_pulumi_commands_each_naming_the_stack():
    steps = pulumi_steps(README)
    assert [n for n, _ in steps] == sorted(n for n, _ in steps)
    assert steps[0] == (1, "pulumi version")
    for _, command in steps[1:]:
        assert "cross-server" in command.split(), command


def test_every_checklist_command_that_reaches_a_cluster_names_its_context():
    # Step 6 insists on the explicit context; a kubectl or helm command without one would act on
    # whatever the current context is.
    reaching = [c for _, c in _commands() if c.split()[0] in ("kubectl", "helm")
                and not c.startswith(("kubectl config ", "helm repo "))]
    assert len(reaching) >= 3, reaching
    assert [c for c in reaching if "--context my-lab" not in c and "--kube-context my-lab" not in c] == []


def test_every_project_file_the_docs_and_stack_files_name_exists():
    # A stack file's comment once named infra/config.py after it became a package, and the
    # architecture page infra/sizing.py: a reader sent to a file that is not there.
    # The project's own stack files: a user's beside them is theirs to word.
    texts = [ROOT / "README.md", *PAGES, ROOT / "Pulumi.yaml",
             *(ROOT / f"Pulumi.{s}.yaml" for s in (*catalogue.SHIPPED_STACKS, *catalogue.EXAMPLE_STACKS))]
    named = {(t.name, m) for t in texts for m in re.findall(r"\b(?:infra|tests|tools)/[\w/.-]*\w", t.read_text())}
    assert len(named) > 20
    assert sorted((where, path) for where, path in named if not (ROOT / path).exists()) == []


def _architecture_map() -> set[str]:
    """Every module docs/architecture.md's module map names: a path in a row's first cell, and in a
    row for a directory (or for a module beside others), each `name.py` it lists, taken in that
    directory."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## Module map", 1)[1].split("\n## ", 1)[0]
    named = set()
    for row in (line for line in table.splitlines() if line.startswith("| `")):
        first, rest = row.split(" | ", 1)
        paths = re.findall(r"`((?:infra|dynamo_lab|tests)/[\w/.-]*)`", first)
        named.update(p for p in paths if p.endswith(".py"))
        base = paths[0] if paths[0].endswith("/") else paths[0].rsplit("/", 1)[0] + "/"
        named.update(base + name for name in re.findall(r"`([\w/]+\.py)`", row) if "/" not in name.split(".")[0]
                     or not name.startswith(("infra/", "dynamo_lab/", "tests/")))
    return {n for n in named if not n.startswith("tests/")}


def test_the_architecture_map_names_every_module_of_both_packages():
    # A module the map leaves out is one a newcomer cannot place; the map once named infra/sizing.py
    # after it became a package and left out four modules of the cluster tier.
    packages = ("manifests", "components", "sizing", "validate", "placement")
    modules = {str(p.relative_to(ROOT)) for package in ("infra", "dynamo_lab") for p in (ROOT / package).rglob("*.py")
               if p.name != "__init__.py" or p.parent.name in packages}
    named = _architecture_map()
    assert sorted(modules - named) == [], "modules docs/architecture.md's module map does not name"
    assert sorted(n for n in named if not (ROOT / n).exists()) == [], "modules the map names that do not exist"
