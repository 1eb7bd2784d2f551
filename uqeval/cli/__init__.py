"""The ``uqeval`` command line: run the service, and use one from a terminal or a script.

Commands (``uqeval COMMAND --help`` for each):

- run the service: ``serve``, ``worker``, ``api``
- submissions: ``login``, ``submit``, ``status``, ``results``, ``list``, ``cancel``, ``delete``
- benchmarks: ``leaderboard``, ``compare``, ``gate``, ``benchmarks list|show|create|update|delete``
- administration: ``teams list|create``, ``keys list|create|revoke``
- on this machine, no server: ``evaluate``, ``metrics``

The server and the key come from ``--url``/``--key``, else ``UQEVAL_URL``/``UQEVAL_KEY``, else
the config file written by ``uqeval login`` (:mod:`uqeval.config`). The key is never printed.
Every read command takes ``--json`` (the server's document, alone on stdout).

Exit codes, the same for every command:

====  ===========================================================================
code  meaning
====  ===========================================================================
0     success
1     unexpected error (a defect; the message says what)
2     bad input or usage: a bad flag, an unreadable file, a request the server
      refused as it is (400, 409, 413, 415, 422)
3     authentication: no key, a wrong or revoked key (401), not allowed (403)
4     not found (404): no such submission, benchmark, comparison, team or key
5     the job failed or was cancelled
6     server unavailable: refused or timed-out connection, 502/503/504, 507 (disk full)
7     rate limited, or the team's quota on the benchmark is spent (429)
130   interrupted (Ctrl-C)
====  ===========================================================================
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.main

from uqeval.cli import admin, boards, gates, local, server, submissions
from uqeval.cli.common import Group, State

__all__ = ["EXIT_CODES", "app", "main"]

#: Exit code -> what it means (the table above; also in ``uqeval --help``).
EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "unexpected error",
    2: "bad input or usage (incl. a request the server refused: 400, 409, 413, 415, 422)",
    3: "authentication: missing or wrong key (401), not allowed (403)",
    4: "not found (404)",
    5: "the job failed or was cancelled",
    6: "server unavailable (connection refused or timed out, 502/503/504, 507: disk full)",
    7: "rate limited or quota spent (429)",
    130: "interrupted",
}

EPILOG = "**Exit codes:** " + " · ".join(
    f"{code} {what.split(' (')[0]}" for code, what in EXIT_CODES.items()
)

app = typer.Typer(
    cls=Group,
    name="uqeval",
    help="uq-eval: evaluate uncertainty-quantification predictions, on a server or locally.",
    epilog=EPILOG,
    no_args_is_help=False,
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        import uqcore

        print(uqcore.__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="The server (default: UQEVAL_URL, else the config file of `uqeval login`, "
            "else http://127.0.0.1:8000).",
            show_default=False,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="The API key (prefer UQEVAL_KEY or `uqeval login`: a key on the command line "
            "is visible to other users of the machine). Never printed.",
            show_default=False,
        ),
    ] = None,
    retries: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Retries of a call answered 429/502/503/504 or not answered (default 5).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """uq-eval: evaluate uncertainty-quantification predictions, on a server or locally."""
    ctx.obj = State(url=url, key=key, retries=retries)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


server.register(app)
submissions.register(app)
boards.register(app)
admin.register(app)
local.register(app)
gates.register(app)


def command() -> Any:
    """The command object of :data:`app`."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    try:
        command().main(args=argv, prog_name="uqeval", standalone_mode=True)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
