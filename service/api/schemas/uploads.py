"""Resumable uploads: a large NPZ body sent in parts, each checked by its SHA-256."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.models import StrictModel

_ID = "upl_9f8e7d6c5b4a39281706f5e4"


class UploadCreate(StrictModel):
    """What is going to be uploaded: its size, optionally its SHA-256, its format and what the
    completed body creates."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "size": 2_400_000_512,
                    "sha256": None,
                    "content_type": "application/x-npz",
                    "content_encoding": None,
                    "purpose": "submission",
                }
            ]
        }
    )

    size: int = Field(
        ge=1,
        description="The body's size in bytes as sent (gzip-encoded when content_encoding is "
        "gzip); at most the service's max_upload_bytes (413 above).",
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The SHA-256 (hex) of the whole body as sent; checked at completion when "
        "given (422 on a mismatch).",
    )
    content_type: Literal["application/x-npz", "application/octet-stream"] = Field(
        default="application/x-npz",
        description="The body's format: a NumPy .npz archive, as for POST /v1/submissions.",
    )
    content_encoding: Literal["gzip"] | None = Field(
        default=None, description="gzip when the body (the concatenated parts) is gzip-encoded."
    )
    purpose: Literal["submission", "benchmark"] = Field(
        default="submission",
        description="What completing the upload does: POST /v1/submissions (any key) or "
        "POST /v1/benchmarks (an admin key) with the body.",
    )


class UploadInfo(BaseModel):
    """An upload in progress: its parts and which of them the service holds."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": _ID,
                    "size": 2_400_000_512,
                    "part_size": 67_108_864,
                    "parts": 36,
                    "received": [1, 2, 3],
                    "expires_at": "2026-01-02T12:00:00.000Z",
                    "url": f"/v1/uploads/{_ID}",
                }
            ]
        }
    )

    id: str = Field(description="The upload id.")
    size: int = Field(description="The body's size in bytes, as declared.")
    part_size: int = Field(
        description="The size of every part but the last (which holds the rest)."
    )
    parts: int = Field(description="The number of parts: ceil(size / part_size).")
    received: list[int] = Field(
        description="The parts the service holds (1-based, ascending): send the others."
    )
    expires_at: str = Field(
        description="When the upload and its parts are removed if not completed (UTC)."
    )
    url: str = Field(description="The upload's URL (relative).")


class UploadPart(BaseModel):
    """A part received and stored."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "part": 1,
                    "size": 67_108_864,
                    "sha256": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
                }
            ]
        }
    )

    part: int = Field(description="The part number (1-based).")
    size: int = Field(description="Its size in bytes.")
    sha256: str = Field(description="Its SHA-256 (hex), as checked against Content-Digest.")
