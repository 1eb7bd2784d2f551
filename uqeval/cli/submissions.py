"""``uqeval login``, ``submit``, ``status``, ``results``, ``list``, ``cancel``, ``delete``."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from uqeval.cli import options as O
from uqeval.cli import render
from uqeval.cli.common import bad_input, err, note, out, print_json, state
from uqeval.cli.files import (
    ColumnMap,
    add_targets,
    parse_pairs,
    read_prediction,
    read_targets,
    split_list,
)
from uqeval.cli.options import JSON
from uqeval.cli.progress import job_progress, upload_progress
from uqeval.errors import BadRequest

if TYPE_CHECKING:
    from uqeval.client import Client
    from uqeval.models import Submission

PANEL = "Submissions"


# --------------------------------------------------------------------------------------------
# login
# --------------------------------------------------------------------------------------------


def login(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", help="The server (asked when not given).")
    ] = None,
    key_stdin: Annotated[
        bool,
        typer.Option("--key-stdin", help="Read the key from stdin (one line) instead of asking."),
    ] = False,
) -> None:
    """Save the server's URL and your API key in the config file (mode 0600), after checking
    the key against the server."""
    from uqeval import config

    st = state(ctx)
    default_url, _ = config.resolve(st.url, None)
    url = url or st.url
    if url is None:
        if not sys.stdin.isatty() and not key_stdin:
            bad_input("login: give --url (stdin is not a terminal to ask it)")
        url = url or typer.prompt("Server URL", default=default_url, err=True)
    url = url.strip().rstrip("/")
    if key_stdin:
        key = sys.stdin.readline().strip()
    elif st.key:
        key = st.key
    else:
        if not sys.stdin.isatty():
            bad_input("login: stdin is not a terminal; pass the key with --key-stdin")
        key = typer.prompt("API key", hide_input=True, err=True).strip()
    if not key:
        bad_input("login: the key is empty")
    from uqeval.client import Client

    with Client(url, key, retries=st.retries if st.retries is not None else 2) as client:
        client.submissions(limit=1)  # AuthError (exit 3) for a wrong key, before saving it
    path = config.save_config(url, key)
    note(f"Logged in to {url}; saved to {path} (readable by you only).")


# --------------------------------------------------------------------------------------------
# submit
# --------------------------------------------------------------------------------------------


def _metadata(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            bad_input(f"--metadata {text}: no such file", field="metadata")
        text = path.read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        bad_input(f"--metadata must be a JSON object: {exc}", field="metadata")
    if not isinstance(doc, dict):
        bad_input("--metadata must be a JSON object ({...})", field="metadata")
    return doc


def read_input(
    file: Path,
    *,
    kind: str | None,
    targets: Path | None,
    col: list[str] | None,
    columns: str | None,
    prefix: list[str] | None,
    prob_prefix: str | None,
    y_col: str | None,
    labels_col: str | None,
    levels: str | None,
) -> tuple[str, dict[str, Any]]:
    """The kind and the named arrays of a prediction file with its mapping flags and the
    targets file (shared by ``submit`` and ``evaluate``)."""
    from uqeval.arrays import infer_kind

    prefixes = parse_pairs(prefix or [], "--prefix")
    if prob_prefix:
        prefixes["probs"] = prob_prefix
    level_values: list[float] | None = None
    if levels is not None:
        try:
            level_values = [float(v) for v in split_list(levels) or []]
        except ValueError:
            bad_input(f"--levels must be comma-separated numbers; found {levels!r}", field="levels")
    mapping = ColumnMap(
        col=parse_pairs(col or [], "--col"),
        columns=split_list(columns),
        prefixes=prefixes,
        y_col=y_col,
        labels_col=labels_col,
        levels=level_values,
    )
    arrays = read_prediction(file, mapping)
    if kind is None:
        try:
            kind = infer_kind(list(arrays))
        except BadRequest as exc:
            bad_input(
                f"{file.name}: {exc.message.replace('give kind=', 'give --kind')}", field="kind"
            )
    target_values = None if targets is None else read_targets(targets, "targets")
    add_targets(arrays, kind, target_values)
    return kind, arrays


def wait_with_progress(client: Client, sub_id: str, *, show: bool = True) -> Submission:
    """Wait for ``sub_id`` to end, with a progress bar on stderr."""
    try:
        with job_progress(show) as update:
            return client.wait(sub_id, progress=update)
    except KeyboardInterrupt:
        note(f"Stopped waiting; the job goes on: uqeval status {sub_id}")
        raise


def submit(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The prediction: .npz (members named as in the API: mean, std, ...; y or "
            "labels), .parquet or .csv (one row per sample; see the column flags).",
            show_default=False,
        ),
    ],
    kind: O.Kind = None,
    benchmark: Annotated[
        str | None, typer.Option(help="Evaluate against this benchmark's hidden targets.")
    ] = None,
    targets: O.Targets = None,
    metrics: O.Metrics = None,
    bootstrap: O.Bootstrap = 0,
    stability: O.Stability = False,
    repeats: O.Repeats = None,
    curves: O.Curves = False,
    seed: O.Seed = None,
    estimators: O.Estimators = None,
    model_name: Annotated[
        str | None, typer.Option(help="The model's name (default: the file's name).")
    ] = None,
    metadata: Annotated[
        str | None, typer.Option(help="A JSON object kept with the submission (or @file.json).")
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="Readable by every key; ranked on the leaderboard.")
    ] = False,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="Resending with the same key never submits twice (default: a new one, printed)."
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Show the upload and the job's progress; print the result."),
    ] = False,
    json_: JSON = False,
    upload_threshold: Annotated[
        int,
        typer.Option(
            min=1,
            help="Bodies of this many bytes or more go by the resumable upload (in parts, "
            "each checked and sent again on failure).",
        ),
    ] = 64 << 20,
    resume_upload: Annotated[
        str | None,
        typer.Option(
            metavar="UPLOAD_ID",
            help="Resume this interrupted upload (give the same file and options): only the "
            "parts the server lacks are sent.",
        ),
    ] = None,
    col: O.Col = None,
    columns: O.Columns = None,
    prefix: O.Prefix = None,
    prob_prefix: O.ProbPrefix = None,
    y_col: O.YCol = None,
    labels_col: O.LabelsCol = None,
    levels: O.Levels = None,
) -> None:
    """Submit a prediction file for evaluation; with --wait, follow it and print the result."""
    st = state(ctx)
    kind, arrays = read_input(
        file,
        kind=kind,
        targets=targets,
        col=col,
        columns=columns,
        prefix=prefix,
        prob_prefix=prob_prefix,
        y_col=y_col,
        labels_col=labels_col,
        levels=levels,
    )
    if benchmark is not None:
        given = [
            flag
            for flag, on in (
                ("--metrics", metrics is not None),
                ("--bootstrap", bootstrap > 0),
                ("--stability", stability),
                ("--curves", curves),
                ("--seed", seed is not None),
            )
            if on
        ]
        if given:
            bad_input(
                f"{', '.join(given)}: a benchmark sets the analyses of its submissions; "
                "leave them out with --benchmark",
                field="analyses",
            )
    elif "y" not in arrays and "labels" not in arrays:
        bad_input(
            f"{file.name} holds no targets: give --targets FILE, --benchmark ID, or a y "
            "(labels) member/column",
            field="targets",
        )
    if idempotency_key is None:
        idempotency_key = uuid.uuid4().hex
        note(
            f"Idempotency key: {idempotency_key}  (pass it with --idempotency-key to retry "
            "without submitting twice)"
        )
    options: dict[str, Any] = {}
    if metrics is not None:
        options["metrics"] = split_list(metrics) or "all"
    if bootstrap:
        options["bootstrap"] = bootstrap
    if stability or repeats is not None:
        options["stability"] = repeats if repeats is not None else True
    if curves:
        options["curves"] = True
    if seed is not None:
        options["seed"] = seed
    if estimators is not None:
        options["estimators"] = "all" if estimators.strip() == "all" else split_list(estimators)
    client = st.client()
    client.upload_threshold_bytes = upload_threshold
    with upload_progress(wait) as on_upload:
        sub = client.submit(
            arrays,
            kind=kind,
            benchmark=benchmark,
            model_name=model_name or file.stem,
            metadata=_metadata(metadata),
            visibility="public" if public else "private",
            idempotency_key=idempotency_key,
            upload_progress=on_upload,
            upload_id=resume_upload,
            **options,
        )
    if getattr(sub, "replayed", False):
        note(f"{sub.id}: already submitted with this idempotency key (the earlier submission)")
    if not wait:
        if json_:
            print_json(sub.raw)
            return
        position = getattr(sub, "queue_position", None)
        where = f", position {position} in the queue" if position is not None else ""
        note(f"Submitted {sub.id} ({sub.status}{where}); follow it with: uqeval status {sub.id}")
        out().print(sub.id, markup=False)
        return
    final = wait_with_progress(client, sub.id)
    show_result(final.raw, json_)


def show_result(doc: dict[str, Any], json_: bool) -> None:
    """A succeeded submission's result: the table on stdout, or its JSON document."""
    result = doc.get("result") or {}
    if json_:
        print_json(result)
        return
    title = f"{doc.get('id')} · {doc.get('model_name')} · {doc.get('kind')} · n = {doc.get('n')}"
    out().print(render.result(result, title=title))


# --------------------------------------------------------------------------------------------
# status, results, list, cancel, delete
# --------------------------------------------------------------------------------------------


def status(
    ctx: typer.Context,
    sub_id: Annotated[str, typer.Argument(metavar="ID", help="The submission.")],
    json_: JSON = False,
) -> None:
    """A submission's status, progress and timings."""
    sub = state(ctx).client().get(sub_id)
    if json_:
        print_json(sub.raw)
    else:
        out().print(render.submission(sub.raw))


def results(
    ctx: typer.Context,
    sub_id: Annotated[str, typer.Argument(metavar="ID", help="The submission.")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the job to end first.")] = False,
    json_: JSON = False,
) -> None:
    """The results of a succeeded submission (exit 5 if it failed or was cancelled)."""
    client = state(ctx).client()
    if wait:
        sub = wait_with_progress(client, sub_id)
        show_result(sub.raw, json_)
        return
    sub = client.get(sub_id)
    if not sub.succeeded:
        client.result(sub_id)  # raises: JobFailed (exit 5), or "not finished" (exit 2)
    show_result(sub.raw, json_)


def list_(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option(help="Only these: queued, running, succeeded, failed, cancelled.")
    ] = None,
    benchmark: Annotated[
        str | None, typer.Option(help="Only submissions on this benchmark.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many (newest first).")] = 0,
    json_: JSON = False,
) -> None:
    """Your team's submissions, newest first."""
    client = state(ctx).client()
    page = client.submissions(status=status, benchmark=benchmark, limit=limit, offset=offset)
    if json_:
        print_json(page.raw)
    else:
        out().print(render.submissions(page.raw))


def cancel(
    ctx: typer.Context,
    sub_id: Annotated[str, typer.Argument(metavar="ID", help="The submission.")],
    json_: JSON = False,
) -> None:
    """Cancel a queued or running submission."""
    sub = state(ctx).client().cancel(sub_id)
    if json_:
        print_json(sub.raw)
    else:
        out().print(f"{sub.id}: {sub.status}", markup=False)


def delete(
    ctx: typer.Context,
    sub_id: Annotated[str, typer.Argument(metavar="ID", help="The submission.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a submission and its data (asks first unless --yes)."""
    if not yes:
        if not sys.stdin.isatty():
            bad_input("delete asks for confirmation: pass --yes")
        if not typer.confirm(f"Delete {sub_id} and its data?", err=True):
            note("Not deleted.")
            raise typer.Exit(0)
    state(ctx).client().delete(sub_id)
    err().print(f"Deleted {sub_id}.", markup=False)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel=PANEL)(login)
    app.command(rich_help_panel=PANEL)(submit)
    app.command(rich_help_panel=PANEL)(status)
    app.command(rich_help_panel=PANEL)(results)
    app.command("list", rich_help_panel=PANEL)(list_)
    app.command(rich_help_panel=PANEL)(cancel)
    app.command(rich_help_panel=PANEL)(delete)
