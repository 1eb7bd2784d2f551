"""Request and response models of the HTTP API (the OpenAPI document is generated from them).

One module per resource, as in :mod:`service.api.routes`; the pieces they share (the strict
base, constrained types, the error answer) are in :mod:`.common`. Every model is importable from
this package.

Request models are strict: unknown fields are refused (``extra="forbid"``), numbers must be JSON
numbers (a string such as ``"1.5"`` is refused), and NaN or ±inf are refused everywhere. The
prediction models are built from :data:`service.kinds.KIND_FIELDS`, so the API accepts exactly
the kinds and fields that the worker evaluates. Response models are descriptive: they document
the shape of each answer and let fields added by newer workers through.
"""

from __future__ import annotations

from service.analyses import Analyses, BootstrapOptions, StabilityOptions
from service.api.schemas.admin import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyInfo,
    ApiKeyList,
    TeamCreate,
    TeamInfo,
    TeamList,
)
from service.api.schemas.benchmarks import (
    BenchmarkBootstrap,
    BenchmarkCreate,
    BenchmarkInfo,
    BenchmarkList,
    BenchmarkRequest,
    BenchmarkSettings,
    BenchmarkUpdate,
    FinalsList,
    FinalSubmission,
    QuotaOptions,
    TeamFinals,
)
from service.api.schemas.catalogue import MetricCatalogue, MetricInfo
from service.api.schemas.common import (
    KINDS,
    BenchmarkId,
    ErrorDetail,
    ErrorResponse,
    EstimatorName,
    Estimators,
    Kind,
    Matrix,
    MetricName,
    PlotLink,
    StrictModel,
    Tensor,
    Vector,
    Visibility,
)
from service.api.schemas.comparisons import (
    ComparisonAccepted,
    ComparisonCreate,
    ComparisonDetail,
)
from service.api.schemas.health import Health, Readiness
from service.api.schemas.leaderboards import (
    BaselineEntry,
    Leaderboard,
    LeaderboardEntry,
    RankStatus,
)
from service.api.schemas.notifications import (
    CallbackUrl,
    Delivery,
    DeliveryAttempt,
    DeliveryList,
    WebhookSecret,
)
from service.api.schemas.predictions import (
    EXAMPLE_ARRAYS,
    EXAMPLE_FIELDS,
    FIELD_DOCS,
    PREDICTION_MODELS,
    Prediction,
)
from service.api.schemas.sharelinks import ShareLinkCreated, ShareLinkInfo, ShareLinkList
from service.api.schemas.submissions import (
    Interval,
    MetricResult,
    ModelName,
    Provenance,
    Result,
    SubmissionAccepted,
    SubmissionCreate,
    SubmissionDetail,
    SubmissionFields,
    SubmissionPage,
    SubmissionRequest,
    SubmissionSummary,
    SubmissionUpdate,
)
from service.api.schemas.suites import (
    SuiteAggregate,
    SuiteCreate,
    SuiteExcluded,
    SuiteInfo,
    SuiteIntervals,
    SuiteLeaderboard,
    SuiteList,
    SuiteRow,
    SuiteTask,
    SuiteTaskInfo,
    SuiteUpdate,
)
from service.api.schemas.uploads import UploadCreate, UploadInfo, UploadPart
from service.store import Status

__all__ = [
    "EXAMPLE_ARRAYS",
    "EXAMPLE_FIELDS",
    "FIELD_DOCS",
    "KINDS",
    "PREDICTION_MODELS",
    "Analyses",
    "ApiKeyCreate",
    "ApiKeyCreated",
    "ApiKeyInfo",
    "ApiKeyList",
    "BaselineEntry",
    "BenchmarkBootstrap",
    "BenchmarkCreate",
    "BenchmarkId",
    "BenchmarkInfo",
    "BenchmarkList",
    "BenchmarkRequest",
    "BenchmarkSettings",
    "BenchmarkUpdate",
    "BootstrapOptions",
    "CallbackUrl",
    "ComparisonAccepted",
    "ComparisonCreate",
    "ComparisonDetail",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryList",
    "ErrorDetail",
    "ErrorResponse",
    "EstimatorName",
    "Estimators",
    "FinalSubmission",
    "FinalsList",
    "Health",
    "Interval",
    "Kind",
    "Leaderboard",
    "LeaderboardEntry",
    "Matrix",
    "MetricCatalogue",
    "MetricInfo",
    "MetricName",
    "MetricResult",
    "ModelName",
    "PlotLink",
    "Prediction",
    "Provenance",
    "QuotaOptions",
    "RankStatus",
    "Readiness",
    "Result",
    "ShareLinkCreated",
    "ShareLinkInfo",
    "ShareLinkList",
    "StabilityOptions",
    "Status",
    "StrictModel",
    "SubmissionAccepted",
    "SubmissionCreate",
    "SubmissionDetail",
    "SubmissionFields",
    "SubmissionPage",
    "SubmissionRequest",
    "SubmissionSummary",
    "SubmissionUpdate",
    "SuiteAggregate",
    "SuiteCreate",
    "SuiteExcluded",
    "SuiteInfo",
    "SuiteIntervals",
    "SuiteLeaderboard",
    "SuiteList",
    "SuiteRow",
    "SuiteTask",
    "SuiteTaskInfo",
    "SuiteUpdate",
    "TeamCreate",
    "TeamFinals",
    "TeamInfo",
    "TeamList",
    "Tensor",
    "UploadCreate",
    "UploadInfo",
    "UploadPart",
    "Vector",
    "Visibility",
    "WebhookSecret",
]
