"""Final submissions of a benchmark: GET /v1/benchmarks/{bench_id}/finals.

Each team's finals are the submissions that rank on the benchmark's private board once it is
closed: those it marked (``PATCH /v1/submissions/{id} {"final": true}``, at most the
benchmark's ``max_final``), else its best ``max_final`` public submissions by the primary
metric's public value. An admin sees every team's; a submitter its own team's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from service.api import access
from service.api.deps import KeyDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.schemas import FinalsList, FinalSubmission, TeamFinals

router = APIRouter(tags=["benchmarks"])


@router.get(
    "/v1/benchmarks/{bench_id}/finals",
    operation_id="getFinals",
    summary="The final submissions of a benchmark",
    response_model=FinalsList,
    responses=errors(401, 404, 422, 503),
)
def get_finals(
    bench_id: Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")],
    key: KeyDep,
    store: StoreDep,
) -> FinalsList:
    """The submissions that rank on the private board, per team, each with how it was chosen
    (``explicit``: marked by the team; ``default``: one of its best public submissions by the
    primary metric's public value, the team having marked none). Admins: every team;
    submitters: their own team."""
    bench = store.get_benchmark(bench_id)
    if bench is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    finals = store.finals(bench_id)
    if key.role != "admin":
        own = access.team_scope(key)
        finals = {t: s for t, s in finals.items() if t == own}
    ids = [s for subs in finals.values() for s, _ in subs]
    names = {r.id: r.model_name for r in store.get_submissions(ids) if r is not None}
    teams = [
        TeamFinals(
            team_id=team,
            submissions=[
                FinalSubmission(id=s, model_name=names.get(s, ""), chosen=how)  # type: ignore[arg-type]
                for s, how in subs
            ],
        )
        for team, subs in sorted(finals.items())
    ]
    return FinalsList(benchmark_id=bench_id, max_final=bench.max_final, teams=teams)
