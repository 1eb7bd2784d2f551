"""The metric catalogue as Markdown, generated from the registry (docs/metrics.md)."""

from __future__ import annotations

from uqcore import registry

__all__ = ["catalogue_markdown"]


def _bounds(lo: float | None, hi: float | None) -> str:
    left = "−∞" if lo is None else f"{lo:g}"
    right = "∞" if hi is None else f"{hi:g}"
    return f"[{left}, {right}]"


def catalogue_markdown() -> str:
    """Every registered metric with what it needs, its direction, bounds, defaults and reference."""
    lines = [
        "# Metric catalogue",
        "",
        "Generated from `uqcore.registry` by `python -m uqcore.catalogue`; a test fails when it is",
        "out of date. Each metric's docstring gives its formula, variants and reference. Options",
        "are given as `name=default` and what the option accepts (uqcore and the service refuse",
        "anything else; `GET /v1/metrics` gives the same as JSON Schema).",
        "",
        *_units_and_weights(),
    ]
    for task in sorted({s.task for s in registry.specs()}):
        lines += [f"## {task.capitalize()}", ""]
        families = sorted({s.family for s in registry.specs(task)})
        for family in families:
            lines += [
                f"### {family.replace('_', ' ').capitalize()}",
                "",
                "| metric | summary | needs | better | bounds | best | options | reference |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for s in registry.specs(task):
                if s.family != family:
                    continue
                defaults = (
                    "; ".join(
                        f"`{k}={v!r}`: {s.options[k].describe()}".replace("|", "\\|")
                        for k, v in s.defaults.items()
                    )
                    or "—"
                )
                best = "—" if s.best is None else f"{s.best:g}"
                summary = s.summary.replace("|", "\\|")
                lines.append(
                    f"| `{s.name}` | {summary} | {', '.join(sorted(s.needs))} | {s.direction} | "
                    f"{_bounds(*s.bounds)} | {best} | {defaults} | {s.reference} |"
                )
            lines.append("")
        if task == "classification":
            lines += _aggregators()
    lines += _peer_conventions()
    return "\n".join(lines).rstrip() + "\n"


def _peer_conventions() -> list[str]:
    from uqcore.peers import PEER_CONVENTIONS

    lines = [
        "## Other libraries' conventions, by name",
        "",
        "Where a peer library or paper computes a metric another way, an option value gives its",
        "number (the defaults above stay those of the papers this project reproduces). The tests",
        "compare each row with the peer's own function where it is installable.",
        "",
        "| task | metric | options | reproduces | note |",
        "|---|---|---|---|---|",
    ]
    for c in PEER_CONVENTIONS:
        opts = ", ".join(f"`{k}={v!r}`" for k, v in c.options.items())
        lines.append(f"| {c.task} | `{c.metric}` | {opts} | {c.peer} | {c.note or '—'} |")
    lines.append("")
    return lines


def _units_and_weights() -> list[str]:
    """How each regression metric scales with the units of the data, and which metrics need
    integer sample weights."""
    lines = [
        "## Units and weights",
        "",
        "Multiplying y and the prediction (locations, scales, quantiles, draws, point and",
        "uncertainty) by c > 0 changes a regression metric θ by its scaling law (at the default",
        "options; `MetricSpec.scaling`); values of any magnitude are computed without overflow",
        "or underflow, and a value beyond float64's range is `None` with a warning. Options can",
        "change the law: `ause` and `aurg` with `normalize=False` are equivariant, and `nll` with",
        "a numeric `bandwidth` (a kernel width in the units of y) has none.",
        "",
        "| scaling | θ becomes | regression metrics |",
        "|---|---|---|",
    ]
    specs = registry.specs("regression")
    for law, formula in registry.SCALING_LAWS.items():
        names = ", ".join(f"`{s.name}`" for s in specs if s.scaling == law)
        lines.append(f"| {law} | {formula} | {names} |")
    lines += [
        "",
        "Scaling every sample weight changes nothing, except where a metric's definition counts",
        "weight as rows (`MetricSpec.exempt`). These metrics need integer sample weights",
        "(`MetricSpec.integer_weights`) and are not applicable to others:",
        "",
        "| metric | when | why |",
        "|---|---|---|",
    ]
    for s in registry.specs():
        rule = s.integer_weights
        if rule is None:
            continue
        when = ", ".join(f"`{k}={v!r}`" for k, v in rule.when.items()) or "always"
        lines.append(f"| `{s.name}` | {when} | {rule.why} |")
    return [*lines, ""]


def _aggregators() -> list[str]:
    from uqcore.classification.aggregators import AGGREGATORS, DEFAULT_ESTIMATOR

    lines = [
        "### Uncertainty estimators (aggregators)",
        "",
        "Metrics that rank by an uncertainty take `estimator=` (default "
        f"`{DEFAULT_ESTIMATOR}`); `evaluate(..., estimators=[...])` gives a metric × estimator "
        "table. User-supplied scores (`estimates={...}` on a prediction) keep their own names.",
        "",
        "| estimator | summary | formula | decomposition | kinds | reference |",
        "|---|---|---|---|---|---|",
    ]
    for a in AGGREGATORS.values():
        dec = "—" if a.decomposition is None else f"{a.decomposition} {a.component}"
        formula = a.formula.replace("|", "\\|")
        lines.append(
            f"| `{a.name}` | {a.summary} | {formula} | {dec} | {', '.join(sorted(a.kinds))} | "
            f"{a.reference} |"
        )
    lines.append("")
    return lines


if __name__ == "__main__":
    import sys
    from pathlib import Path

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/metrics.md")
    target.write_text(catalogue_markdown())
