"""A YAML reader with the YAML 1.2 core schema, which is what Rivet (serde_yaml) uses.

PyYAML defaults to YAML 1.1, which would silently change meaning in a Rivet config:
`on: [failure]` would become the boolean key `True`, `password: no` the boolean False,
`start_date: 2024-01-01` a `date`, `0123` an octal number. Here only `true`/`false` are
booleans, there are no timestamps, and numbers remember their source text (`ScalarInt`,
`ScalarFloat`) so a string field such as `password: 0123` keeps exactly what was typed.
Duplicate mapping keys are an error instead of "last one wins".
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class ScalarInt(int):
    """An int parsed from YAML, remembering its text."""

    raw: str

    def __new__(cls, value: int, raw: str) -> ScalarInt:
        obj = super().__new__(cls, value)
        obj.raw = raw
        return obj


class ScalarFloat(float):
    """A float parsed from YAML, remembering its text."""

    raw: str

    def __new__(cls, value: float, raw: str) -> ScalarFloat:
        obj = super().__new__(cls, value)
        obj.raw = raw
        return obj


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names the same key twice."""


_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")


class CoreLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalar resolution."""


CoreLoader.yaml_implicit_resolvers = {}
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])


def _construct_bool(loader: CoreLoader, node: yaml.ScalarNode) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"


def _construct_int(loader: CoreLoader, node: yaml.ScalarNode) -> int:
    raw = str(loader.construct_scalar(node))
    text = raw.replace("_", "")
    if text.startswith("0o"):
        value = int(text[2:], 8)
    elif text.startswith("0x"):
        value = int(text[2:], 16)
    else:
        try:
            value = int(text)
        except ValueError:
            return raw  # type: ignore[return-value]  # explicit !!int tag on non-numeric text
    return ScalarInt(value, raw)


def _construct_float(loader: CoreLoader, node: yaml.ScalarNode) -> float | str:
    raw = str(loader.construct_scalar(node))
    text = raw.lower()
    if text.endswith("inf"):
        value = float("-inf") if text.startswith("-") else float("inf")
    elif text.endswith("nan"):
        value = float("nan")
    else:
        try:
            value = float(text)
        except ValueError:
            return raw
    return ScalarFloat(value, raw)


def _construct_mapping(loader: CoreLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=False)
        try:
            hash(key)
        except TypeError as exc:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found an unhashable key (a list or mapping used as a key)",
                key_node.start_mark,
            ) from exc
        if key in seen:
            raise DuplicateKeyError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key `{key}` — each key may appear only once",
                key_node.start_mark,
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=True)


CoreLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
CoreLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
CoreLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
CoreLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


#: How many nodes aliases (`*name`, `<<: *name`) may add when the document is expanded into a
#: tree. PyYAML shares an aliased node, so parsing a "billion laughs" document is cheap — but
#: every later walk over the data (validation, `model_dump`, hashing a plan) expands it:
#: 600 bytes of nested aliases became 7 GB and a crash. Real configs alias a few defaults
#: blocks (a few hundred nodes); this leaves room for thousands of `<<: *defaults` merges.
MAX_ALIAS_EXPANSION = 100_000


class AliasBombError(yaml.YAMLError):
    """Aliases expand the document beyond `MAX_ALIAS_EXPANSION` nodes (or refer to themselves)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_alias_expansion(root: yaml.Node, budget: int = MAX_ALIAS_EXPANSION) -> None:
    """Raise `AliasBombError` when expanding aliases would add more than `budget` nodes.

    One pass over the distinct nodes (iterative: no recursion limit), computing each node's
    expanded size once; a node reached again through an alias counts its whole expanded
    size again, as every consumer of the data will."""
    sizes: dict[int, int] = {}
    distinct = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] - distinct > budget:  # already more than the whole may add
                break
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise AliasBombError(
                "an alias refers to the node that contains it (a recursive structure) — a "
                "Rivet config is a tree: write the block out instead of aliasing its parent")
        on_path.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    if stack or sizes[id(root)] - distinct > budget:
        raise AliasBombError(
            f"YAML aliases (*name / <<: *name) expand this document by more than {budget:,} "
            "nodes (nested aliases multiply: an 'alias bomb') — write the repeated blocks out, "
            "or alias only small blocks such as shared defaults")


def load_yaml(text: str) -> Any:
    """Parse YAML text with the core schema; raises `yaml.YAMLError` on bad input
    (`AliasBombError` when aliases expand it beyond `MAX_ALIAS_EXPANSION` nodes)."""
    loader = CoreLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_alias_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
