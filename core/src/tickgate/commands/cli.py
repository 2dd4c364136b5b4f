"""The ``tickgate`` command line.

Subcommands live in their own modules and are imported only when invoked
(``LAZY_COMMANDS``), so ``tickgate --help`` stays fast however many there are.
Errors meant for users (:class:`TickgateError`) print one line and exit 2;
``--debug`` shows the traceback of any error.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import click

from ..util.errors import TickgateError, one_line

#: command name -> "module:attribute" of a click command
LAZY_COMMANDS: dict[str, str] = {
    "replay": "tickgate.commands.replay:replay_command",
    "import": "tickgate.commands.importer:import_command",
    "generate": "tickgate.commands.generate:generate_command",
    "validate": "tickgate.commands.validate:validate_command",
    "plugins": "tickgate.commands.plugins:plugins_command",
    "normalize": "tickgate.commands.normalize:normalize_command",
    "gate": "tickgate.commands.gate:gate_command",
    "schema": "tickgate.commands.schema:schema_command",
    "timing": "tickgate.commands.timing:timing_command",
    "sweep": "tickgate.commands.sweep:sweep_command",
    "plan": "tickgate.commands.plan:plan_command",
    "report": "tickgate.commands.report:report_command",
    "conformance": "tickgate.commands.conformance:conformance_group",
}


class LazyGroup(click.Group):
    """Core commands import on use; plugin commands come from the registry."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(LAZY_COMMANDS) | set(_plugin_command_names()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(name)
        if target is None:
            from ..host.registry import get_registry

            if name not in _plugin_command_names():
                return None
            # lenient: ``--help`` lists plugin commands even when another plugin is broken
            return get_registry(allow_broken=True).get("command", name).obj
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Running a plugin command fails closed when any plugin is broken, as the
        core commands do when they load the registry (``tickgate plugins`` does not)."""
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and name not in LAZY_COMMANDS:
            from ..host.registry import get_registry

            get_registry()
        return name, command, rest


def _plugin_command_names() -> list[str]:
    from ..host.registry import get_registry

    try:
        return get_registry(allow_broken=True).names("command")
    except TickgateError:
        return []


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="tickgate")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Deterministic inference-scheduling replay and release gates."""
    ctx.obj = {"debug": debug}


class Terminated(BaseException):
    """SIGTERM (a CI job cancelled, ``kill``, a container stopped), raised in the main
    thread as Ctrl-C raises ``KeyboardInterrupt``: outputs in progress remove their
    temporary files and helper processes are stopped on the way out."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while a command runs, where nothing else
    handles it: the main thread of a process whose handler is the default (an
    embedding program's own handler is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    with _sigterm_unwinds():
        try:
            return _main(argv)
        except Terminated:  # between the command's end and the handler's removal
            click.echo("terminated", err=True)
            return 143


def _main(argv: list[str] | None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        # click >= 8.2 returns (not raises) an Exit's code when standalone_mode is False
        code = cli.main(args=argv, prog_name="tickgate", standalone_mode=False)
    except TickgateError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {one_line(str(exc).strip())}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except _NO_ARGS_IS_HELP as exc:
        # bare ``tickgate`` (or a bare command group): the user asked what there is, so the
        # help goes to stdout as written, exit 0 -- what click < 8.2 did and ``--help`` does;
        # click >= 8.2 raises it as a usage error, which would squeeze it into one error line
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.UsageError as exc:  # a bad option or argument: one line too, pointing at --help
        where = exc.ctx.command_path if exc.ctx is not None else "tickgate"
        click.echo(f"error: {one_line(exc.format_message())} (see '{where} --help')", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"error: {one_line(exc.format_message())}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Terminated:  # 128 + SIGTERM, as a shell reports a process the signal ended
        click.echo("terminated", err=True)
        return 143
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            traceback.print_exc()
        click.echo(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", err=True
        )
        return 3
    return code if isinstance(code, int) else 0


#: click >= 8.2 raises this for a group called without a command; older clicks print the
#: help and exit 0 themselves (the tuple then catches nothing)
_NO_ARGS_IS_HELP: tuple[type[click.UsageError], ...] = tuple(
    cls for cls in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if cls is not None
)


def run() -> None:
    sys.exit(main())


def exit_with(code: int) -> Any:
    """Finish a command with a specific exit code (gate decisions)."""
    raise click.exceptions.Exit(code)
