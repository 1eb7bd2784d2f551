"""``uqeval gate``: a quality gate for CI pipelines — exit 0 when the candidate passes, 1 when
it is worse than the reference beyond an allowance, 2 on bad usage, a service error or an
undecided check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.console import Group as Rows
from rich.console import RenderableType
from rich.text import Text

from uqeval.cli.common import error_line, note, out, print_json, scrub, state
from uqeval.cli.render import _table
from uqeval.errors import UQEvalError
from uqeval.gates import parse_checks

PANEL = "Benchmarks"

#: Exit codes of ``uqeval gate`` (its own, for CI: a failed gate must be told from an error).
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def _num(v: Any) -> str:
    return "—" if v is None else f"{float(v):.4g}"


def render_gate(doc: Mapping[str, Any]) -> RenderableType:
    """A gate: per check the values, the degradation with its one-sided bounds, the
    allowance, the p-values and the outcome; then the decision and the evidence."""
    table = _table(
        f"gate {doc.get('id')} ({doc.get('status')})",
        [
            ("check", "left"),
            ("candidate", "right"),
            ("reference", "right"),
            ("degradation", "right"),
            ("bounds", "right"),
            ("allowance", "right"),
            ("p", "right"),
            ("p adj.", "right"),
            ("outcome", "left"),
        ],
    )
    for c in doc.get("checks") or []:
        name = c.get("metric", "?")
        if c.get("estimator"):
            name += f"[{c['estimator']}]"
        allowed = c.get("allowed")
        if c.get("mode") == "relative" and allowed is not None:
            name += f" ({float(allowed) * 100:g}%)"
        table.add_row(
            name,
            _num(c.get("candidate")),
            _num(c.get("reference")),
            _num(c.get("degradation")),
            f"[{_num(c.get('low'))}, {_num(c.get('high'))}]",
            _num(c.get("allowance")),
            _num(c.get("p_value")),
            _num(c.get("p_value_adjusted")),
            str(c.get("outcome", "")).upper(),
        )
    passed = doc.get("passed")
    verdict = {True: "PASSED", False: "FAILED", None: "UNDECIDED"}[passed]
    ev = doc.get("evidence") or {}
    lines: list[RenderableType] = [
        table,
        Text(f"{verdict}: {doc.get('reason') or ''}", style="bold"),
        Text(
            f"paired bootstrap: B = {ev.get('n_resamples')}, seed {ev.get('seed')}, unit "
            f"{ev.get('unit')}, level {ev.get('level')} (one-sided), correction "
            f"{ev.get('correction')}; degradation > 0 = candidate worse"
        ),
    ]
    lines += [Text(f"warning: {w}") for w in doc.get("warnings") or []]
    return Rows(*lines)


def gate(
    ctx: typer.Context,
    benchmark: Annotated[str, typer.Option("--benchmark", help="The benchmark.")],
    candidate: Annotated[str, typer.Option("--candidate", help="The submission under test.")],
    reference: Annotated[
        str, typer.Option("--reference", help="The submission it must not be worse than.")
    ],
    check: Annotated[
        list[str],
        typer.Option(
            "--check",
            help="metric:allowed (absolute, in the metric's units), metric:allowed% "
            "(relative to the reference's |value|), metric[estimator]:allowed; repeat it.",
        ),
    ],
    confidence: Annotated[
        float | None,
        typer.Option(
            min=0.5,
            max=0.999999,
            help="Confidence of the one-sided bound (default: the benchmark's level).",
        ),
    ] = None,
    correction: Annotated[
        str, typer.Option(help="holm (default) or none: adjustment over the checks.")
    ] = "holm",
    timeout: Annotated[
        float | None, typer.Option(min=0.0, help="Give up (exit 2) after this many seconds.")
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print the gate's document as JSON.")
    ] = False,
) -> None:
    """Gate a candidate submission against a reference (paired bootstrap): a check fails only
    when the candidate is worse than the reference beyond its allowance with the stated
    confidence. Waits for the decision. Exit 0: passed; 1: failed; 2: bad usage, a service
    error, or a check that could not be decided."""
    if correction not in ("holm", "none"):
        note(f"uqeval: error: --correction must be holm or none; found {correction!r}")
        raise typer.Exit(EXIT_ERROR)
    try:
        checks = parse_checks(check)
        result = (
            state(ctx)
            .client()
            .gate(
                benchmark,
                candidate,
                reference,
                checks,
                confidence=confidence,
                correction=correction,
                wait=True,
                timeout=timeout,
            )
        )
    except (UQEvalError, TimeoutError) as exc:
        note(f"uqeval: error: {scrub(error_line(exc), ctx)}")
        raise typer.Exit(EXIT_ERROR) from None
    if json_:
        print_json(result.raw)
    else:
        out().print(render_gate(result.raw))
    if result.passed is True:
        raise typer.Exit(EXIT_PASS)
    raise typer.Exit(EXIT_FAIL if result.passed is False else EXIT_ERROR)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel=PANEL)(gate)
