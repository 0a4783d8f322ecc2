"""docs/configuration.md's reference: generated from the schema, current, complete, and its
defaults the models' own."""

from __future__ import annotations

import inspect
import json
import re

import pytest
from pydantic import BaseModel, Field

from dynamo_lab import cli, config_reference
from infra import units
from infra.catalogue import (
    BUILTIN_MODELS,
    DEFAULT_GPU_CLASSES,
    DEFAULT_MODEL,
    DYNAMO_RELEASE,
    SAME_NODE_BYTES_PER_SECOND,
)
from infra.config import schema
from infra.config.schema import (
    Benchmark,
    Frontend,
    Link,
    Platform,
    Probe,
    StackConfig,
    Workload,
)
from infra.errors import UserError
from tests.helpers import ROOT

STALE = "docs/configuration.md's reference is stale: run python3 dev.py config-reference"


def _readme_part() -> str:
    return config_reference.current((ROOT / "docs" / "configuration.md").read_text())


def _tables(text: str) -> dict[str, dict[str, list[str]]]:
    """The generated part's tables, by the line above each ('' for the main one): key -> its cells."""
    out: dict[str, dict[str, list[str]]] = {}
    title = ""
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            out.setdefault(title, {})[cells[0].strip("`")] = cells[1:]
        elif line and not line.startswith(("|", "<!--")):
            title = line
    return out


def _readme_rows() -> dict[str, list[str]]:
    """Every row of the page's generated tables, by key (the worker and node tables' keys prefixed)."""
    tables = _tables(_readme_part())
    rows = dict(tables[""])
    for title, table in tables.items():
        if title:
            rows.update({f"{title} {key}": cells for key, cells in table.items()})
    return rows


def _schema_keys() -> dict[str, set[str]]:
    """Every key the schema accepts, read from its JSON schema (not from the generator's walk), by table."""
    schema = StackConfig.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    own = {"WorkerGroup": "Worker group keys:", "NodeRequirement": config_reference.OWN_TABLES[1][1]}
    tables: dict[str, set[str]] = {"": set(), **{title: set() for title in own.values()}}

    def ref(prop: dict) -> str | None:
        for option in [prop, *prop.get("anyOf", [])]:
            if "$ref" in option:
                return option["$ref"].rsplit("/", 1)[-1]
        return None

    def walk(properties: dict, prefix: str, table: str) -> None:
        for key, prop in properties.items():
            path = prefix + key
            nested = ref(prop)
            if nested:
                walk(defs[nested]["properties"], path + ".", table)
                continue
            tables[table].add(path)
            for container, suffix in (("additionalProperties", ".<name>."), ("items", "[].")):
                item = ref(prop.get(container) or {}) if isinstance(prop.get(container), dict) else None
                if item and item not in own:
                    walk(defs[item]["properties"], path + suffix, table)

    top = dict(schema["properties"])
    top.pop("target")
    walk(defs["ClusterTarget"]["properties"], "kubernetes:", "")
    walk(top, "", "")
    for name, title in own.items():
        walk(defs[name]["properties"], "", title)
    return tables


def test_the_configuration_reference_is_current():
    assert _readme_part() == config_reference.render(), STALE


def test_the_currency_check_sees_a_changed_description(monkeypatch):
    monkeypatch.setattr(Frontend.model_fields["replicas"], "description", "how many frontends, reworded")
    assert _readme_part() != config_reference.render()
    assert "how many frontends, reworded" in config_reference.render()


def test_the_currency_check_sees_a_changed_default(monkeypatch):
    monkeypatch.setattr(Platform.model_fields["timeout_seconds"], "default", 901)
    assert "| `platform.timeoutSeconds` | `901` |" in config_reference.render()
    assert _readme_part() != config_reference.render()


def _models() -> list[type[BaseModel]]:
    return [cls for cls in vars(schema).values()
            if inspect.isclass(cls) and issubclass(cls, BaseModel) and cls.__module__.startswith("infra.config.")
            and cls is not schema.Section]


def test_every_field_has_a_description():
    assert len(_models()) >= 18
    missing = [f"{cls.__name__}.{name}" for cls in _models() for name, field in cls.model_fields.items()
               if not (field.description or "").strip()]
    assert missing == []


def test_every_key_the_schema_accepts_is_in_the_table():
    tables = _tables(_readme_part())
    for title, keys in _schema_keys().items():
        assert keys, title
        assert sorted(keys - set(tables[title])) == [], f"missing from {title or 'the main table'}"
        assert sorted(set(tables[title]) - keys) == [], f"rows of no schema key in {title or 'the main table'}"


def test_every_row_says_what_it_accepts_and_means():
    blank = [key for key, (default, accepts, meaning) in _readme_rows().items()
             if not (default and accepts and meaning)]
    assert blank == []


def _shown(key: str) -> str:
    """The (last) value in backticks of a row's default column."""
    return re.findall(r"`([^`]*)`", _readme_rows()[key][0])[-1]


def test_printed_defaults_are_the_models():
    rows = _readme_rows()
    assert int(_shown("platform.timeoutSeconds")) == Platform().timeout_seconds
    assert _shown("platform.version") == DYNAMO_RELEASE
    assert units.parse_memory(_shown("frontend.memory")) == Frontend().memory
    assert units.parse_rate_bits(_shown("sizing.link.rate")) == Link().rate
    assert float(_shown("sizing.link.efficiency")) == Link().efficiency
    assert units.parse_memory(_shown("probe.maxPoolBytes")) == Probe().max_pool_bytes
    assert json.loads(_shown("benchmark.prefixTypes")) == Benchmark().prefix_types
    assert _shown("modelCache.mode") == schema.ModelCache().mode
    assert _shown("graph.networkPolicy") == "false"
    assert units.parse_throughput(_shown("sizing.sameNodeBytesPerSecond")) == SAME_NODE_BYTES_PER_SECOND["READ"]
    # Filled per stack by infra.load: the workload's.
    assert int(_shown("benchmark.prefixTokens")) == Workload().prefix_tokens
    assert int(_shown("benchmark.uniqueTokens")) == Workload().unique_tokens
    assert rows["gpuClasses"][0] == ", ".join(f"`{name}`" for name in DEFAULT_GPU_CLASSES)
    # The built-in model's geometry, from the catalogue (Model._fill_builtin).
    layers = BUILTIN_MODELS[DEFAULT_MODEL]["layers"]
    assert rows["model.layers"][0] == (f"{DEFAULT_MODEL.split('/')[-1]}: `{layers}`; other built-in models: their "
                                       "config.json's ([sources.md](sources.md), \"Built-in models\"); other models: "
                                       "(required)")
    assert rows["workers"][0] == "(required)"
    assert rows["Worker group keys: role"][0] == "(required)"


def test_a_field_whose_type_says_nothing_must_say_what_it_accepts():
    class Bare(BaseModel):
        text: str = Field("x", description="something")

    with pytest.raises(ValueError, match="json_schema_extra"):
        list(config_reference.rows(Bare))


def test_a_field_without_a_description_is_refused():
    class Bare(BaseModel):
        flag: bool = False

    with pytest.raises(ValueError, match="description"):
        list(config_reference.rows(Bare))


def test_the_command_rewrites_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    before, after = "# Title\n\nprose before\n\n", "\n\n### Next\n\nprose after\n"
    readme.write_text(f"{before}{config_reference.BEGIN}\n| stale |\n{config_reference.END}{after}")
    assert config_reference.write(readme) is True
    assert readme.read_text() == before + config_reference.render() + after
    assert config_reference.write(readme) is False


def test_a_readme_without_markers_is_an_error(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(UserError, match="markers"):
        config_reference.write(readme)


def test_the_command_line_has_the_command():
    assert cli.parser().parse_args(["config-reference"]).func is cli._config_reference
