"""Share links of a benchmark's leaderboard: admins create, list and revoke read-only links.

A link opens the benchmark's board page (``/ui/benchmarks/{id}?share=TOKEN``) and its CSV
export without a key; nothing else. The token is returned once, at creation; the store keeps
only its SHA-256 (:mod:`service.store.sharelinks`). A revoked link answers 404.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Response
from fastapi.responses import JSONResponse

from service.api.deps import AdminDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors, links
from service.api.schemas import ShareLinkCreated, ShareLinkInfo, ShareLinkList
from service.store import Store

router = APIRouter(tags=["benchmarks"])

BenchId = Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")]


def _bench(store: Store, bench_id: str) -> None:
    if store.get_benchmark(bench_id) is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")


@router.post(
    "/v1/benchmarks/{bench_id}/share-links",
    operation_id="createShareLink",
    summary="Create a read-only share link to a benchmark's leaderboard page",
    status_code=201,
    response_model=ShareLinkCreated,
    responses={
        **errors(401, 403, 404, 413, 422, 503),
        **links(
            201,
            revokeShareLink={
                "bench_id": "$response.body#/benchmark_id",
                "link_id": "$response.body#/link_id",
            },
        ),
    },
)
def create_share_link(bench_id: BenchId, admin: AdminDep, store: StoreDep) -> JSONResponse:
    """A new link to the board's web page, viewable without a key while the link lives. The
    token is in this answer only."""
    _bench(store, bench_id)
    link, token = store.create_share_link(bench_id)
    created = ShareLinkCreated(
        link_id=link.link_id,
        benchmark_id=bench_id,
        token=token,
        url=f"/ui/benchmarks/{quote(bench_id, safe='')}?share={quote(token, safe='')}",
        created_at=link.created_at,
    )
    return JSONResponse(created.model_dump(), status_code=201)


@router.get(
    "/v1/benchmarks/{bench_id}/share-links",
    operation_id="listShareLinks",
    summary="List a benchmark's share links",
    response_model=ShareLinkList,
    responses=errors(401, 403, 404, 422, 503),
)
def list_share_links(bench_id: BenchId, admin: AdminDep, store: StoreDep) -> ShareLinkList:
    """The live links, oldest first: ids and creation times, never the tokens."""
    _bench(store, bench_id)
    return ShareLinkList(
        links=[
            ShareLinkInfo(link_id=s.link_id, benchmark_id=s.bench_id, created_at=s.created_at)
            for s in store.list_share_links(bench_id)
        ]
    )


@router.delete(
    "/v1/benchmarks/{bench_id}/share-links/{link_id}",
    operation_id="revokeShareLink",
    summary="Revoke a share link",
    status_code=204,
    response_class=Response,
    responses=errors(401, 403, 404, 422, 503),
)
def revoke_share_link(
    bench_id: BenchId,
    link_id: Annotated[str, Path(min_length=1, max_length=100, description="The link id.")],
    admin: AdminDep,
    store: StoreDep,
) -> Response:
    """The link stops working at once (its page answers 404)."""
    if not store.revoke_share_link(bench_id, link_id):
        raise ApiError(404, f"no share link {link_id!r} on benchmark {bench_id!r}", field="link_id")
    return Response(status_code=204)
