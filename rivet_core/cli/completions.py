"""`rivet completions SHELL`: the shell completion script for `rivet` (Rivet's command), from
click's own completion support, so it always matches the commands and options there are.
Install: `rivet completions bash > ~/.local/share/bash-completion/completions/rivet`."""

from __future__ import annotations

import click


@click.command("completions")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completions(shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish)."""
    from click.shell_completion import get_completion_class

    root = click.get_current_context().find_root().command  # the `rivet` group, without importing app.py
    cls = get_completion_class(shell)
    assert cls is not None  # the Choice above admits only shells click knows
    click.echo(cls(root, {}, "rivet", "_RIVET_COMPLETE").source())
