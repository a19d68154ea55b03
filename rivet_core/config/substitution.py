"""`${NAME}` substitution over raw text (docs/rivet-compat.md "Config load order", step 2).

Runs on the whole file before YAML parsing, comments included, exactly like Rivet: a
`--param NAME=value` wins over env var `NAME`; anything unresolved is an error (never a
silent empty string); `${}` is an empty string; a value containing NUL is refused because
it would truncate strings in C drivers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from rivet_core.errors import ConfigError

_PLACEHOLDER = re.compile(r"\$\{([^}\n]*)\}")


def substitute(
    text: str,
    params: Mapping[str, str] | None,
    *,
    where: str = "the config",
    used: set[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Replace every `${NAME}` in `text`; add each param name consumed to `used`."""
    params = params or {}
    env = os.environ if environ is None else environ
    unresolved: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "":
            return ""
        if name in params:
            value = params[name]
            origin = f"-p {name}"
            if used is not None:
                used.add(name)
        elif name in env:
            value = env[name]
            origin = f"env var {name}"
        else:
            if name not in unresolved:
                unresolved.append(name)
            return match.group(0)
        value = str(value)
        if "\x00" in value:
            raise ConfigError(
                f"'${{{name}}}' in {where}: the value from {origin} contains a NUL byte — remove it"
            )
        return value

    result = _PLACEHOLDER.sub(replace, text)
    if unresolved:
        names = ", ".join(f"'${{{n}}}'" for n in unresolved)
        first = unresolved[0]
        raise ConfigError(
            f"{names} in {where} {'is' if len(unresolved) == 1 else 'are'} unresolved — "
            f"pass -p {first}=value or export {first}"
        )
    return result
