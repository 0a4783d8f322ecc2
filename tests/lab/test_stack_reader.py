"""Input that is not a stack file at all: a binary file, nesting thousands of levels deep, a YAML
alias bomb, a control character, a file of megabytes. Every command that reads a stack file
refuses each with one line naming the file (exit 2), after bounded work: the reader
(stack_files.read_yaml) counts what the file's aliases would expand to on the composed node graph,
before anything is constructed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import yaml

from dynamo_lab import stack_files
from dynamo_lab.preflight import cluster_data
from tests.helpers import ROOT, run_cli

SAVED = ROOT / "tests/data/preflight/lab.json"


def _bomb(levels: int) -> str:
    """The "billion laughs" file: each level an anchor of nine aliases of the one before, over nine strings:
    level n expands to 9**(n + 1) of them."""
    lines = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "config:\n" + "\n".join(lines) + "\n"


NOT_STACK_FILES = {
    # A stray binary: byte 24 is the first that is not UTF-8.
    "binary": (b"config:\n  dynamo-lab:x: \xff\xfe\x00\x01binary\n",
               "Pulumi.bad.yaml: not UTF-8 text (byte 24, 0xff), as Pulumi writes a stack file; is it the "
               "right file?"),
    # PyYAML's composer recurses once a level: this was a RecursionError traceback.
    "deep": (("config:\n  dynamo-lab:x: " + "{a: " * 5000 + "}" * 5000 + "\n").encode(),
             "Pulumi.bad.yaml: refused at line 2, column 262: nested more than 64 levels deep; is it the "
             "right file?"),
    # A value is JSON text as Pulumi hands structured settings over; json.loads recurses too.
    "deep-json": (("config:\n  dynamo-lab:workers: '" + "[" * 5000 + "]" * 5000 + "'\n").encode(),
                  "Pulumi.bad.yaml: workers: its value is JSON nested more than a thousand levels deep, where a "
                  "setting has a few; is it the right value?"),
    # 9**8 = 43 million strings from 600 bytes: a command took 13 s to get to its first error.
    "alias-bomb": (_bomb(7).encode(),
                   "Pulumi.bad.yaml: refused at line 5, column 7: its aliases (*name) expand to more than "
                   "5,000 values, where a stack file has a few hundred; is it the right file?"),
}
COMMANDS = {
    "render": ("render", "bad"),
    "sizing": ("sizing", "bad"),
    "preflight": ("preflight", "bad", "--from", str(SAVED)),
    "advise": ("advise", "bad", "--from", str(SAVED)),
    "predict": ("predict", "bad"),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project (its Pulumi.yaml) to put stack files in: the commands read the project's."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    return tmp_path


@pytest.mark.parametrize("kind", NOT_STACK_FILES)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_what_is_not_a_stack_file_in_one_line(project, command, kind):
    data, line = NOT_STACK_FILES[kind]
    (project / "Pulumi.bad.yaml").write_bytes(data)
    start = time.perf_counter()
    proc = run_cli(*COMMANDS[command], cwd=project)
    took = time.perf_counter() - start
    # Worded as every refusal of the command line: the command, then the file and why (cli.main).
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: dynamo-lab {command}: {line}\n")
    assert took < 5, f"{command} took {took:.1f} s to refuse {kind}"  # loose: the bound is structural (below)


def test_an_alias_bomb_is_refused_before_anything_is_constructed(monkeypatch):
    # Whatever the machine's speed: what the aliases expand to is counted on the composed graph, in
    # which an alias is the node it names; the constructor, which would build 9**12 values, never runs.
    def constructed(*_):
        raise AssertionError("the reader constructed a document it should have refused")

    monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_document", constructed)
    with pytest.raises(stack_files.StackFileError, match=r"^bomb: refused at line 5, column 7: its aliases \(\*name\) "
                                                     r"expand to more than 5,000 values"):
        stack_files.parse_yaml(_bomb(12), "bomb")


def test_nested_lists_are_refused_at_the_same_depth():
    # Each `[` may begin a key, so PyYAML's scanner reads up to 1,024 characters ahead, checking every
    # open one at each step (a second for this file). The reader's scanner stops at the 65th `[`
    # (column 81) before it hands the composer a token; the composer alone stopped at the 63rd (79).
    with pytest.raises(stack_files.StackFileError, match=r"^deep: refused at line 2, column 81: nested more than 64 "):
        stack_files.parse_yaml("config:\n  dynamo-lab:x: " + "[" * 5000 + "]" * 5000 + "\n", "deep")


def test_an_alias_chain_deeper_than_the_text_and_an_alias_inside_itself_are_refused():
    # Each line one level deeper than the one before through an alias: the text is 3 levels deep.
    chain = "config:\n  a0: &a0 [1]\n" + "".join(f"  a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200))
    with pytest.raises(stack_files.StackFileError, match="its aliases .* nest it more than 64 levels deep"):
        stack_files.parse_yaml(chain, "chain")
    with pytest.raises(stack_files.StackFileError,
                       match=r"^loop: refused at line 2, column 17: an alias \(\*name\) inside "
                             "the value it names, which would never end"):
        stack_files.parse_yaml("config:\n  dynamo-lab:x: &a [1, *a]\n", "loop")


def test_aliases_within_the_bounds_read_as_written_out(project):
    # An anchor shared by two worker groups is YAML a user may write; it reads as the values it names.
    text = (ROOT / "Pulumi.cross-server.yaml").read_text()
    aliased = text.replace("      gpuClass: gpu-8gb\n      kvCacheBytes: 2Gi\n",
                           "      gpuClass: gpu-8gb\n      kvCacheBytes: &kv 2Gi\n"
                           ).replace("      kvCacheBytes: 4Gi\n", "      kvCacheBytes: *kv\n")
    assert aliased.count("*kv") == 1
    (project / "Pulumi.aliased.yaml").write_text(aliased)
    (project / "Pulumi.written.yaml").write_text(aliased.replace("&kv ", "").replace("*kv", "2Gi"))
    assert stack_files.stack_doc("aliased", project) == stack_files.stack_doc("written", project)


@pytest.mark.parametrize("edit, stderr", [
    # Pulumi hands a key with no value over as "": an empty context is not set, not one named 'None'.
    (lambda text: text.replace("kubernetes:context: dynamo-lab", "kubernetes:context:"),
     "kubernetes:context: not set: without it this stack would deploy to whatever cluster"),
    # A section whose keys were not indented under it is empty, and says where its keys go.
    (lambda text: text + "  dynamo-lab:model:\n  name: Qwen/Qwen3-0.6B\n",
     "model: '' is not a map; write `key: value` pairs indented under `model:`"),
])
def test_a_key_with_no_value_reads_as_the_pulumi_cli_hands_it(project, edit, stderr):
    (project / "Pulumi.empty.yaml").write_text(edit((ROOT / "Pulumi.cross-server.yaml").read_text()))
    for command in ("render", "sizing"):
        done = run_cli(command, "empty", cwd=project)
        assert (done.returncode, done.stdout) == (2, "")
        assert f"Pulumi.empty.yaml: {stderr}" in done.stderr
        assert "None" not in done.stderr


def test_a_setting_outside_config_is_refused_not_left_to_pulumi_to_drop(project):
    # Written at column 0, `dynamo-lab:workload:` is a top-level key Pulumi never reads: the stack
    # would be sized and deployed for the default workload.
    text = (ROOT / "Pulumi.cross-server.yaml").read_text() + "dynamo-lab:workload:\n  inputTokens: 4096\n"
    (project / "Pulumi.stray.yaml").write_text(text)
    for command in ("render", "sizing"):
        done = run_cli(command, "stray", cwd=project)
        assert (done.returncode, done.stdout) == (2, "")
        assert ("Pulumi.stray.yaml: `dynamo-lab:workload` is at the top level, outside `config:`, where Pulumi "
                "ignores a setting (the stack would run on its defaults). Indent it under `config:`") in done.stderr


@pytest.mark.parametrize("text, line", [
    # The YAML error names the file and where, on one line, not `<unicode string>` and a snippet.
    ("config:\n  dynamo-lab:x: [1,\n  y: }\n",
     "Pulumi.bad.yaml: not valid YAML at line 3, column 6: expected the node content, but found '}'"),
    ("config:\n  dynamo-lab:x: a\x07b\n",
     "Pulumi.bad.yaml: not YAML text: character U+0007 at line 2 is one YAML does not allow (a control "
     "character); is it the right file?"),
    ("config: {}\n---\nconfig: {}\n",
     "Pulumi.bad.yaml: not valid YAML at line 2, column 1: but found another document"),
    # A key at the wrong indentation: deeper than the keys beside it, or between two levels.
    ("config:\n  dynamo-lab:model:\n    name: x\n     revision: y\n",
     "Pulumi.bad.yaml: not valid YAML at line 4, column 14: mapping values are not allowed here; YAML nests "
     "keys by their indentation: line this key up with the keys beside it (spaces, not tabs), or put it "
     "under a key that ends with ':'"),
    ("config:\n  dynamo-lab:model:\n    name: x\n   revision: y\n",
     "Pulumi.bad.yaml: not valid YAML at line 4, column 4: expected <block end>, but found '<block mapping "
     "start>'; YAML nests keys by their indentation: line this key up with the keys beside it (spaces, not "
     "tabs), or put it under a key that ends with ':'"),
])
def test_what_yaml_refuses_is_one_line_naming_the_file(project, text, line):
    (project / "Pulumi.bad.yaml").write_text(text)
    with pytest.raises(stack_files.StackFileError) as caught:
        stack_files.stack_doc("bad", project)
    assert str(caught.value) == line


def test_a_file_of_megabytes_is_refused_unread(project):
    (project / "Pulumi.bad.yaml").write_text("config: {}\n" + "#" * stack_files.MAX_YAML_BYTES)
    proc = run_cli("render", "bad", cwd=project)
    assert proc.returncode == 2
    assert proc.stderr == ("error: dynamo-lab render: Pulumi.bad.yaml: more than 256 KiB, where a stack file is a few "
                           "kilobytes; is it the right file?\n")


def test_a_file_of_many_values_is_refused_while_composing():
    many = "config:\n  dynamo-lab:x:\n" + "".join(f"    - {i}\n" for i in range(stack_files.MAX_YAML_VALUES))
    with pytest.raises(stack_files.StackFileError,
                       match="more than 5,000 values, where a stack file has a few hundred"):
        stack_files.parse_yaml(many, "many")


def test_a_binary_pulumi_yaml_above_names_that_file(tmp_path):
    (tmp_path / "Pulumi.yaml").write_bytes(b"name: \xc3\x28\n")
    proc = run_cli("render", "cross-server", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"error: dynamo-lab render: {tmp_path / 'Pulumi.yaml'}: not UTF-8 text (byte 6, 0xc3), as "
                           "Pulumi writes a stack file; is it the right file?\n")


def test_a_kubeconfig_that_is_not_yaml_text_only_loses_the_contexts_hint(tmp_path):
    # preflight's hint lists the contexts of the kubeconfig; an unreadable one lists none, no traceback.
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "deep").write_text("contexts: " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "good").write_text("contexts:\n- name: lab\n")
    path = ":".join(str(tmp_path / f) for f in ("binary", "deep", "good"))
    assert cluster_data._contexts_hint(path, "other").startswith("; its contexts: lab (pulumi config set")


@pytest.mark.parametrize("kind", ["binary", "deep", "alias-bomb"])
def test_up_local_reads_the_stack_file_with_the_same_reader(tmp_path, kind):
    # `up --local` runs as root: what is not a stack file stops it in one line, before anything starts.
    from dynamo_lab.local_cluster import local

    (tmp_path / "Pulumi.bad.yaml").write_bytes(NOT_STACK_FILES[kind][0])
    with pytest.raises(local.LocalError) as caught:
        local.read_stack_file(tmp_path / "Pulumi.bad.yaml")
    why = NOT_STACK_FILES[kind][1].removeprefix("Pulumi.bad.yaml: ")
    assert str(caught.value) == f"Pulumi.bad.yaml cannot be read as a stack file ({why})"
