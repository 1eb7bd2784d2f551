"""Progress bars on stderr: the upload of a submission's body, then the job's progress."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from uqeval.cli.common import err


@contextlib.contextmanager
def upload_progress(show: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A callback ``(sent_bytes, total_bytes)`` drawing the upload bar (None when not shown)."""
    if not show:
        yield None
        return
    with Progress(
        TextColumn("upload"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err(),
        transient=False,
    ) as bar:
        task = bar.add_task("upload", total=None)

        def update(sent: int, total: int) -> None:
            bar.update(task, completed=sent, total=total or None)

        yield update


def _label(sub: Any) -> str:
    status = str(getattr(sub, "status", ""))
    position = getattr(sub, "queue_position", None)
    if status == "queued" and position is not None:
        return f"queued (position {position})"
    return status


@contextlib.contextmanager
def job_progress(show: bool) -> Iterator[Callable[[Any], None] | None]:
    """A callback ``(submission)`` drawing the job's bar: its status and percent done."""
    if not show:
        yield None
        return
    with Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=err(),
        transient=False,
    ) as bar:
        task = bar.add_task("waiting", total=100.0)

        def update(sub: Any) -> None:
            progress = getattr(sub, "progress", None)
            bar.update(
                task,
                description=_label(sub),
                completed=float(progress) if progress is not None else 0.0,
            )

        yield update
