"""The check of a ``callback_url`` when a submission or comparison is accepted."""

from __future__ import annotations

from service.api.errors import ApiError
from service.notifications.policy import CallbackRefused, resolve_checked
from service.settings import Settings
from service.store import ApiKeyRecord, Store

__all__ = ["check_callback"]


def check_callback(store: Store, settings: Settings, key: ApiKeyRecord, url: str) -> None:
    """422 ``callback_not_allowed`` when ``url`` may not be called (scheme, unresolvable
    host, refused address), 422 ``webhook_secret_missing`` when ``key`` has no secret to sign
    with. Resolves the host: blocking, call it off the event loop."""
    try:
        resolve_checked(url, settings)
    except CallbackRefused as exc:
        raise ApiError(422, str(exc), code="callback_not_allowed", field="callback_url") from None
    if store.webhook_secret(key.key_id) is None:
        raise ApiError(
            422,
            "a callback_url needs a webhook secret to sign its events, and this API key has "
            "none: create one with POST /v1/webhook-secret (once), then submit again",
            code="webhook_secret_missing",
            field="callback_url",
        )
