"""``uqeval benchmarks``, ``uqeval teams`` and ``uqeval keys``: what an admin key manages
(reading benchmarks needs any key)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from uqeval.cli import render
from uqeval.cli.common import bad_input, note, out, print_json, state
from uqeval.cli.files import read_targets, split_list
from uqeval.cli.options import JSON

benchmarks = typer.Typer(
    help="List, show, create, update and delete benchmarks (changes need an admin key).",
    no_args_is_help=True,
)
teams = typer.Typer(help="Teams (admin key).", no_args_is_help=True)
keys = typer.Typer(help="API keys (admin key).", no_args_is_help=True)


def _confirm(what: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        bad_input(f"{what} asks for confirmation: pass --yes")
    if not typer.confirm(f"{what}?", err=True):
        note("Nothing changed.")
        raise typer.Exit(0)


def read_spec(path: Path) -> dict[str, Any]:
    """A benchmark's settings from a JSON or YAML file (a mapping)."""
    if not path.is_file():
        bad_input(f"{path}: no such file", field="spec")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            bad_input("reading a YAML spec needs PyYAML: pip install pyyaml (or write it as JSON)")
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            bad_input(f"{path.name}: not valid YAML: {' '.join(str(exc).split())}", field="spec")
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            bad_input(f"{path.name}: not valid JSON: {exc}", field="spec")
    if not isinstance(doc, dict):
        bad_input(f"{path.name}: the spec must be a mapping of settings", field="spec")
    return doc


# --------------------------------------------------------------------------------------------
# benchmarks
# --------------------------------------------------------------------------------------------


@benchmarks.command("list")
def benchmarks_list(ctx: typer.Context, json_: JSON = False) -> None:
    """Every benchmark."""
    found = state(ctx).client().benchmarks()
    docs = [b.raw for b in found]
    if json_:
        print_json({"benchmarks": docs})
    else:
        out().print(render.benchmarks(docs))


@benchmarks.command("show")
def benchmarks_show(
    ctx: typer.Context,
    bench: Annotated[str, typer.Argument(metavar="BENCH", help="The benchmark.")],
    json_: JSON = False,
) -> None:
    """A benchmark's settings (never its targets)."""
    b = state(ctx).client().benchmark(bench)
    if json_:
        print_json(b.raw)
    else:
        out().print(render.benchmark(b.raw))


ArrayFile = Annotated[Path | None, typer.Option(show_default=False)]


@benchmarks.command("create")
def benchmarks_create(
    ctx: typer.Context,
    spec: Annotated[
        Path,
        typer.Argument(
            help="JSON or YAML file of settings: name, task, primary_metric, metrics, rule, "
            "quota, bootstrap, seed, ... (and optionally the targets inline)."
        ),
    ],
    targets: Annotated[
        Path | None, typer.Option(help="Regression: the hidden targets y (.npy, .npz, .csv).")
    ] = None,
    labels: Annotated[
        Path | None, typer.Option(help="Classification: the hidden labels (.npy, .npz, .csv).")
    ] = None,
    soft_labels: Annotated[
        Path | None, typer.Option(help="Classification: hidden soft labels, N×C (.npy).")
    ] = None,
    ood: Annotated[
        Path | None, typer.Option(help="Classification: hidden OOD flags (.npy).")
    ] = None,
    groups: Annotated[Path | None, typer.Option(help="Group of each row (.npy).")] = None,
    json_: JSON = False,
) -> None:
    """Create a benchmark with hidden targets; prints its id."""
    settings = read_spec(spec)
    arrays: dict[str, Any] = {}
    for name, path in (
        ("y", targets),
        ("labels", labels),
        ("soft_labels", soft_labels),
        ("ood", ood),
        ("groups", groups),
    ):
        if path is not None:
            if name in settings:
                bad_input(f"{name} is in the spec and given as a file: choose one", field=name)
            arrays[name] = read_targets(path, name if name != "y" else "targets")
    name = settings.pop("name", None)
    if not isinstance(name, str):
        bad_input(f"{spec.name}: the spec needs a name", field="name")
    if "task" not in settings and ("labels" in arrays or "labels" in settings):
        settings["task"] = "classification"
    b = state(ctx).client().create_benchmark(name, **settings, **arrays)
    if json_:
        print_json(b.raw)
        return
    note(f"Created benchmark {b.id} ({b.raw.get('task')}, n = {b.raw.get('n')})")
    out().print(b.id, markup=False)


@benchmarks.command("update")
def benchmarks_update(
    ctx: typer.Context,
    bench: Annotated[str, typer.Argument(metavar="BENCH", help="The benchmark.")],
    spec: Annotated[
        Path | None, typer.Argument(help="JSON or YAML file of the settings to change.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="New name.")] = None,
    description: Annotated[str | None, typer.Option(help="New description.")] = None,
    primary_metric: Annotated[str | None, typer.Option(help="New primary metric.")] = None,
    metrics: Annotated[str | None, typer.Option(help="Comma-separated metrics shown.")] = None,
    rule: Annotated[str | None, typer.Option(help="best or latest.")] = None,
    baseline: Annotated[
        str | None, typer.Option(help="The baseline submission's id ('none': no baseline).")
    ] = None,
    json_: JSON = False,
) -> None:
    """Change a benchmark's settings (its targets cannot change)."""
    changes = read_spec(spec) if spec is not None else {}
    for key, value in (
        ("name", name),
        ("description", description),
        ("primary_metric", primary_metric),
        ("metrics", split_list(metrics)),
        ("rule", rule),
    ):
        if value is not None:
            changes[key] = value
    if baseline is not None:
        changes["baseline_id"] = None if baseline.lower() == "none" else baseline
    if not changes:
        bad_input("nothing to change: give a spec file or options (see --help)")
    b = state(ctx).client().update_benchmark(bench, **changes)
    if json_:
        print_json(b.raw)
    else:
        out().print(render.benchmark(b.raw))


@benchmarks.command("delete")
def benchmarks_delete(
    ctx: typer.Context,
    bench: Annotated[str, typer.Argument(metavar="BENCH", help="The benchmark.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a benchmark and its targets (its submissions stay)."""
    _confirm(f"Delete benchmark {bench} and its targets", yes)
    state(ctx).client().delete_benchmark(bench)
    note(f"Deleted {bench}.")


# --------------------------------------------------------------------------------------------
# teams and keys
# --------------------------------------------------------------------------------------------


@teams.command("list")
def teams_list(ctx: typer.Context, json_: JSON = False) -> None:
    """Every team."""
    docs = [t.raw for t in state(ctx).client().teams()]
    if json_:
        print_json({"teams": docs})
    else:
        out().print(render.teams(docs))


@teams.command("create")
def teams_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The team's name.")],
    json_: JSON = False,
) -> None:
    """Create a team; prints its id."""
    t = state(ctx).client().create_team(name)
    if json_:
        print_json(t.raw)
    else:
        note(f"Created team {name!r}")
        out().print(t.team_id, markup=False)


@keys.command("list")
def keys_list(ctx: typer.Context, json_: JSON = False) -> None:
    """Every API key (never the secrets)."""
    docs = [k.raw for k in state(ctx).client().keys()]  # noqa: SIM118 (a method, not a dict)
    if json_:
        print_json({"keys": docs})
    else:
        out().print(render.keys(docs))


@keys.command("create")
def keys_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Who holds the key.")],
    team: Annotated[str | None, typer.Option(help="The team the key submits for.")] = None,
    json_: JSON = False,
) -> None:
    """Create a submitter key; prints the new secret once (store it now)."""
    k = state(ctx).client().create_key(name, team_id=team)
    if json_:
        print_json(k.raw)
        return
    note(f"Created key {k.key_id} for {name!r}; its secret is shown this once:")
    out().print(k.key, markup=False)


@keys.command("revoke")
def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (not the secret).")],
) -> None:
    """Revoke a submitter key."""
    state(ctx).client().revoke_key(key_id)
    note(f"Revoked {key_id}.")


def register(app: typer.Typer) -> None:
    panel = "Administration"
    app.add_typer(benchmarks, name="benchmarks", rich_help_panel="Benchmarks")
    app.add_typer(teams, name="teams", rich_help_panel=panel)
    app.add_typer(keys, name="keys", rich_help_panel=panel)
