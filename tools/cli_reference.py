"""Write docs/cli.md, the command-line reference, from the click commands themselves.

The reference is what ``--help`` prints for every command (core and the
in-tree adapters' plugin commands), at a fixed width, so it cannot drift from
the code: tests/test_docs_cli.py regenerates it and fails when the committed
file differs.

    python tools/cli_reference.py            # rewrite docs/cli.md
    python tools/cli_reference.py --stdout   # print it instead
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 100
#: plugin commands documented here: the in-tree adapters' (a third party's belong in its own docs)
IN_TREE = ("tickgate-vllm", "tickgate-sglang", "tickgate-trtllm")

HEADER = """# tickgate command-line reference

Generated from the click commands by `python tools/cli_reference.py`; do not edit by hand
(`tests/test_docs_cli.py` fails when this file and the commands differ). Each section is the
command's `--help`. Commands marked with a distribution come from that adapter's plugin.
"""


def _sections(command, ctx, label: str = ""):  # type: ignore[no-untyped-def]
    import click

    title = f"## {ctx.command_path}" + (f" ({label})" if label else "")
    yield f"{title}\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n"
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _sections(sub, click.Context(sub, info_name=name, parent=ctx), label)


def render() -> str:
    """The whole reference, deterministic for one set of installed in-tree adapters."""
    os.environ["TICKGATE_PLUGINS"] = ",".join(IN_TREE)  # never a third party's commands
    import click

    from tickgate.commands.cli import LAZY_COMMANDS, cli
    from tickgate.host.registry import get_registry, reset_registry

    reset_registry()
    root = click.Context(cli, info_name="tickgate", terminal_width=WIDTH, max_content_width=WIDTH,
                         **cli.context_settings)
    parts = [HEADER, f"## tickgate\n\n```text\n{cli.get_help(root).rstrip()}\n```\n"]
    plugin_commands = {p.name: p.distribution for p in get_registry().of_kind("command")}
    for name in cli.list_commands(root):
        command = cli.get_command(root, name)
        if command is None or command.hidden:
            continue
        label = "" if name in LAZY_COMMANDS else plugin_commands.get(name, "")
        parts.extend(_sections(command, click.Context(command, info_name=name, parent=root), label))
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = render()
    if "--stdout" in argv:
        sys.stdout.write(text)
    else:
        OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
