"""What every user command shares: the global options, the client, output and exit codes.

Tables and results go to stdout, everything meant for a person only (progress bars, notes,
errors) to stderr, so ``--json`` leaves nothing on stdout but the document. An error is one
line on stderr (the server's message, with the field and index it names) and the exit code of
its kind (:data:`uqeval.cli.EXIT_CODES`). The API key is never printed: error text is scrubbed
of it before it is shown.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from typer.core import TyperGroup

from uqeval.errors import BadRequest, UQEvalError

if TYPE_CHECKING:
    from uqeval.client import Client

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def out() -> Console:
    """The console on stdout (made per call: tests swap sys.stdout). Wide when not a
    terminal, so that ids and numbers in a table are never wrapped for a script."""
    if sys.stdout.isatty():
        return Console(file=sys.stdout, highlight=False)
    return Console(file=sys.stdout, width=int(os.environ.get("COLUMNS", "200")), highlight=False)


def err() -> Console:
    """The console on stderr (progress bars, notes, errors)."""
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """A line for the person at the terminal (stderr)."""
    err().print(text, markup=False)


def print_json(doc: Any) -> None:
    """``doc`` as JSON on stdout (plain: no colours, no wrapping; a script reads it)."""
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


@dataclass
class State:
    """The global options, kept on the command context."""

    url: str | None = None
    key: str | None = field(default=None, repr=False)
    retries: int | None = None
    _client: Client | None = field(default=None, repr=False)

    def client(self) -> Client:
        """The client (made once per command), with url and key resolved as
        :mod:`uqeval.config` says: option > environment > config file."""
        if self._client is None:
            from uqeval.client import Client

            kwargs: dict[str, Any] = {}
            if self.retries is not None:
                kwargs["retries"] = self.retries
            self._client = Client(self.url, self.key, **kwargs)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def state(ctx: typer.Context) -> State:
    """The :class:`State` of the running command."""
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State()
    return root.obj


def secrets(ctx: Any) -> list[str]:
    """The strings never to show: the key given on the command line, in UQEVAL_KEY, or in
    the config file."""
    found: list[str] = []
    root = ctx.find_root() if ctx is not None else None
    if root is not None and isinstance(root.obj, State) and root.obj.key:
        found.append(root.obj.key)
    if os.environ.get("UQEVAL_KEY"):
        found.append(os.environ["UQEVAL_KEY"])
    try:
        from uqeval import config

        stored = config.resolve(None, None)[1]
        if stored:
            found.append(stored)
    except Exception:  # a broken config file is no reason to fail while reporting an error
        pass
    return [s for s in found if len(s) >= 4]


def scrub(text: str, ctx: Any) -> str:
    for secret in secrets(ctx):
        text = text.replace(secret, "***")
    return text


def error_line(exc: BaseException) -> str:
    """One line saying what went wrong: the server's message with its field and index."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def fail(exc: UQEvalError, ctx: Any = None) -> NoReturn:
    """Print ``exc`` as one line on stderr and exit with its code."""
    note(f"uqeval: error: {scrub(error_line(exc), ctx)}")
    raise typer.Exit(int(getattr(exc, "exit_code", EXIT_UNEXPECTED)))


def bad_input(message: str, **kw: Any) -> NoReturn:
    """Refuse the command's input (exit 2) before anything is sent."""
    raise BadRequest(message, **kw)


class Group(TyperGroup):
    """The root command: turns the client's exceptions into one line on stderr and the exit
    code of their kind, and any other exception into exit 1 (never a traceback with locals,
    which could hold the key)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UQEvalError as exc:
            fail(exc, ctx)
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt, EOFError):
            raise  # the exit code asked for, a usage error, Ctrl-C: the framework's answers
        except Exception as exc:
            note(f"uqeval: unexpected error: {type(exc).__name__}: {scrub(error_line(exc), ctx)}")
            raise typer.Exit(EXIT_UNEXPECTED) from None
        finally:
            if isinstance(ctx.obj, State):
                ctx.obj.close()
