"""docs/config-reference.md cannot go stale: it documents exactly the fields of the pydantic
models in rivet_core/config/models.py and of the integration blocks registered with them
(rivet_dagster/config_block.py, through rivet_core/config/extended.py), block by block, with
their real defaults.

The reference has one section per YAML block, headed by the block's path in backticks
(`source`, `exports[].destination`, …; the root is `rivet.yaml`; a heading may name several
paths that share one model, e.g. both `tuning` blocks), each with a table whose
first column is the field name in backticks and whose third column is its default. The
test walks the models from `RivetConfig` down, so a field added to a model without a line
in the reference (or a line left for a removed field) fails here.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from rivet_core.config.blocks import config_blocks
from rivet_core.config.extended import config_model

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
_HEADING = re.compile(r"^#{2,4} `")
_PATH = re.compile(r"`([^`]+)`")
_CELL = re.compile(r"(?<!\\)\|")   # a cell boundary: a pipe not escaped as `\|`
_ROW = re.compile(r"^\|\s*`([A-Za-z_][A-Za-z0-9_]*)`\s*\|")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation refers to (through Optional, list, Annotated…)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation) or ():
        found += _models_in(arg)
    if isinstance(annotation, types.UnionType):
        for arg in annotation.__args__:
            found += _models_in(arg)
    return list(dict.fromkeys(found))


def blocks() -> dict[str, type[BaseModel]]:
    """YAML path → model, e.g. `exports[].destination` → DestinationConfig."""
    out: dict[str, type[BaseModel]] = {}

    def walk(path: str, model: type[BaseModel]) -> None:
        out[path] = model
        for name, info in model.model_fields.items():
            for sub in _models_in(info.annotation):
                origin = typing.get_origin(info.annotation)
                is_list = origin is list or any(typing.get_origin(a) is list for a in typing.get_args(info.annotation))
                child = (name if path == "rivet.yaml" else f"{path}.{name}") + ("[]" if is_list else "")
                walk(child, sub)

    assert "dagster" in config_blocks(), "the `dagster` block is not registered — reinstall the package (entry points)"
    walk("rivet.yaml", config_model())
    return out


def documented() -> dict[str, dict[str, list[str]]]:
    """Section path → {field: table cells} from the reference."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: list[str] = []
    for line in REFERENCE.read_text().splitlines():
        if _HEADING.match(line):
            current = _PATH.findall(line)   # "### `source.tuning` / `exports[].tuning`": both
            for path in current:
                sections.setdefault(path, {})
        elif line.startswith("#"):
            current = []
        elif current and (row := _ROW.match(line)) is not None:
            for path in current:
                sections[path][row.group(1)] = [c.strip() for c in _CELL.split(line.strip().strip("|"))]
    return sections


def _rendered(default: Any) -> str | None:
    """How a simple default must appear in the reference's default column (None = not checked)."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, int | float | str):
        return str(default)
    return None


def test_the_reference_documents_every_block_and_every_field_of_the_config_models() -> None:
    sections = documented()
    problems = []
    for path, model in blocks().items():
        if path not in sections:
            problems.append(f"no section `{path}` ({model.__name__})")
            continue
        fields = set(model.model_fields)
        rows = sections[path]
        problems += [f"`{path}`: field `{f}` is not documented" for f in sorted(fields - set(rows))]
        problems += [f"`{path}`: documents `{f}`, which the model does not have" for f in sorted(set(rows) - fields)]
    assert not problems, "docs/config-reference.md is out of date:\n" + "\n".join(problems)


def test_the_reference_states_the_real_default_of_every_field_with_a_plain_default() -> None:
    sections = documented()
    problems = []
    checked = 0
    for path, model in blocks().items():
        for name, info in model.model_fields.items():
            default = info.default
            if default is PydanticUndefined or default is None or name not in sections.get(path, {}):
                continue
            want = _rendered(default)
            cells = sections[path][name]
            if want is None or len(cells) < 3:
                continue
            checked += 1
            if f"`{want}`" not in cells[2]:
                problems.append(f"`{path}.{name}`: default column says {cells[2]!r}, the model's default is `{want}`")
    assert checked >= 25, f"only {checked} defaults checked — is the table layout (field | type | default | …) kept?"
    assert not problems, "\n".join(problems)


def test_required_fields_are_marked_required() -> None:
    sections = documented()
    for path, model in blocks().items():
        for name, info in model.model_fields.items():
            if info.is_required() and name in sections.get(path, {}):
                assert "required" in sections[path][name][2], f"`{path}.{name}` is required; say so"


CODE = [*sorted((REFERENCE.parents[1] / "rivet_core").rglob("*.py")),
        *sorted((REFERENCE.parents[1] / "rivet_dagster").rglob("*.py"))]
MODELS = (REFERENCE.parents[1] / "rivet_core" / "config" / "models.py",
          REFERENCE.parents[1] / "rivet_dagster" / "config_block.py")
_IMPORT = re.compile(r"^\s*(from|import)\s")


def _reads(name: str) -> list[str]:
    """Lines of the engine/Dagster code (outside the model declarations) that read field `name`:
    `x.name`, `getattr(x, "name")` or `x.get("name")`."""
    use = re.compile(rf"\.{name}\b|(getattr|\.get)\([^)]*[\"']{name}[\"']")
    return [f"{path.relative_to(REFERENCE.parents[1])}:{number}: {line.strip()}"
            for path in CODE if path not in MODELS
            for number, line in enumerate(path.read_text().splitlines(), start=1)
            if use.search(line) and not _IMPORT.match(line)]


def test_fields_documented_as_having_no_effect_are_read_by_no_code() -> None:
    """"Accepted for Rivet compatibility; no effect" must stay true: a field the code starts
    reading needs its real meaning in the reference."""
    no_effect = sorted({name for rows in documented().values() for name, cells in rows.items()
                        if len(cells) > 3 and "no effect" in cells[3]})
    assert {"verify", "source_group", "adaptive", "min_parallel"} <= set(no_effect), no_effect
    used = {name: lines for name in no_effect if (lines := _reads(name))}
    assert not used, ("docs/config-reference.md says these fields have no effect, but code reads them "
                      "— document what they do:\n" + "\n".join(f"{n}: {ls}" for n, ls in used.items()))


def test_the_tls_block_is_applied_by_the_engine_and_documented_as_such() -> None:
    """`source.tls` reaches the connection (rivet_core/config/tls.py writes it into the URL the
    sessions connect with); the reference must describe that, not the old "not applied"."""
    text = REFERENCE.read_text()
    section = text[text.index("### `source.tls`"):text.index("### `source.tuning`")]
    assert "not applied" not in section and "no effect" not in section, section
    prescan = REFERENCE.parents[1] / "rivet_core" / "config" / "prescan.py"
    lines = [line for line in _reads("tls") if not line.startswith(str(prescan.relative_to(REFERENCE.parents[1])))]
    assert any(line.startswith("rivet_core/config/source_url.py:") for line in lines), (
        "source.tls is no longer read when the connection URL is resolved — the reference says "
        "it is applied to every connection:\n" + "\n".join(lines))
