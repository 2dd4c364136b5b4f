"""Errors that reach the user as one line and exit code 2.

Anything raised as a :class:`TickgateError` is printed by the CLI without a
traceback; everything else is a bug (``--debug`` shows its traceback).
"""

from __future__ import annotations

from typing import Any, cast


class TickgateError(Exception):
    """A user-facing error: the message is the whole story."""

    exit_code = 2


class InputError(TickgateError):
    """Bad input, located as precisely as we can: ``file:line:col: $.path: what``."""

    def __init__(
        self,
        path: object,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        json_path: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.column = column
        self.json_path = json_path
        self.message = message
        super().__init__(self.format())

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable with its location, so an error raised in a worker process (``timing fit
        --jobs``, sweeps) reaches the parent as itself, not as a broken pool."""
        return (_input_error, (self.path, self.message, self.line, self.column, self.json_path))

    def format(self) -> str:
        """``file:line:col: $.path: what``; an error that no file caused (two
        options that exclude each other) is ``what`` alone: never a made-up name."""
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        parts = [where] if where else []
        if self.json_path:
            parts.append(self.json_path)
        parts.append(self.message)
        return one_line(": ".join(parts))


def json_problem(msg: str) -> str:
    """The json module's message for a decoding failure, as a user reads it
    (``exc.msg``: without the position, which the caller locates)."""
    if msg.startswith("Unterminated string"):  # "... starting at": the position went to the location
        return "unterminated string (is the file cut short?)"
    if msg.startswith("Unexpected UTF-8 BOM"):
        return "the file starts with a byte order mark (save it as UTF-8 without BOM)"
    return msg


def one_line(text: str) -> str:
    """Errors are one line: a line break quoted from hostile input (a header,
    an event name) is shown escaped instead of splitting the message."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class PluginError(TickgateError):
    """A plugin failed to load, registered badly, or misbehaved while running."""


class ConfigError(TickgateError):
    """A plugin refuses its configuration, or its combination with the rest of
    the policy (an admission policy that needs a prefix cache the allocator
    lacks). Raised from a plugin's ``build``; the core reports it at the
    plugin's section of the policy file (at the option named by ``option``,
    when given), and ``tickgate validate`` finds it."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class ReplayError(TickgateError):
    """A replay could not finish (no progress, tick limit exceeded, ...)."""


class TickLimitExceeded(ReplayError):
    """The replay ran past its tick limit (``limits.max_ticks`` or the default)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"replay exceeded the tick limit of {limit} steps "
            "(raise limits.max_ticks in the policy if this is expected)"
        )


def error_as_data(exc: BaseException) -> tuple[str, object]:
    """``exc`` as plain values, to cross from a helper process to its parent
    (marshal or pickle): located input errors keep their location, other
    user-facing errors their message, anything else is a bug."""
    if isinstance(exc, InputError):
        return "input", (exc.path, exc.message, exc.line, exc.column, exc.json_path)
    if isinstance(exc, PluginError):
        return "plugin", str(exc)
    if isinstance(exc, TickgateError):
        return "tickgate", str(exc)
    return "bug", f"{type(exc).__name__}: {exc}"


def error_from_data(kind: str, value: object, doing: str) -> Exception:
    """The exception :func:`error_as_data` described, raised again in the
    parent: the same message and exit code as in one process; a bug becomes
    an internal error saying what the helper was ``doing``."""
    if kind == "input":
        path, message, line, column, json_path = cast(
            "tuple[str | None, str, int | None, int | None, str | None]", value
        )
        return InputError(path, message, line=line, column=column, json_path=json_path)
    if kind == "plugin":
        return PluginError(value)
    if kind == "tickgate":
        return TickgateError(value)
    return RuntimeError(f"{doing} in a child process failed: {value}")


def _input_error(
    path: str | None, message: str, line: int | None, column: int | None, json_path: str | None
) -> InputError:
    return InputError(path, message, line=line, column=column, json_path=json_path)
