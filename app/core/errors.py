"""The service's one error hierarchy: every refusal and failure a client can be told.

Each error carries the HTTP status it answers with, a stable machine `code` and a
readable message. The HTTP server has one handler for `ServiceError`; the terminal
client shows `message`. The status rule:

- 400 the body is not JSON, or the `Host` header names no host this server answers to;
  401 missing or wrong bearer key or token; 403 an admin's route (`/metrics`) asked by
  another user; 404 unknown graph, thread, run or message (another user's thread or run
  is unknown too: no one learns it exists);
- 409 the thread's state does not allow it now (a run in progress, a run id taken, a
  finished run cancelled, another graph's thread, user messages it already holds,
  answers awaited, nothing pending, an interrupt id not pending);
- 408 the body did not arrive in time (AGENT_BODY_TIMEOUT_S);
- 410 a run whose events have expired; 413 body too large, or too many messages in one
  request; 415 a body (or a POST) that is not declared JSON; 431 a request head over
  64 KiB; 429 too many runs waiting (a thread's queue, or this process's, is full), or a
  user's limit reached (runs at once, requests a minute, tokens a day);
  422 the request itself is wrong (a bad answer, a message too long or not text, no
  user message, a bad id);
- 502 a run that failed (`/api/chat`); 503 the service is shutting down, its database
  does not answer now (`storage_unavailable`, with `Retry-After`), it has as many
  connections open as it takes (AGENT_MAX_CONNECTIONS), (client side) cannot be
  reached, or (at start-up) cannot reach its database.

Every code is an `ErrorCode`, the list `docs/api.md` gives (a test holds the two together).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeGuard, get_args

ErrorCode = Literal[
    # the request cannot be read, or may not be made (400, 401, 408, 413, 415, 431)
    "malformed_json",
    "bad_content_length",
    "client_disconnected",
    "bad_host",
    "unauthorized",
    "body_timeout",
    "body_too_large",
    "too_many_messages",
    "headers_too_large",
    "unsupported_media_type",
    # no such thing (404)
    "unknown_graph",
    "unknown_thread",
    "unknown_run",
    "unknown_message",
    "unknown_user",
    "unknown_item",
    "unknown_version",
    "metrics_off",
    "not_found",
    "method_not_allowed",
    # the thread's state refuses it now (409), or no longer keeps it (410)
    "thread_busy",
    "run_exists",
    "user_exists",
    "no_new_message",
    "run_finished",
    "wrong_graph",
    "awaiting_answers",
    "nothing_pending",
    "unknown_interrupt",
    "run_expired",
    "thread_exists",
    "run_active",
    "assistant_exists",
    "system_assistant",
    # too many runs already waiting, or a user's limit reached (429)
    "queue_full",
    "too_many_runs",
    "rate_limited",
    "quota_exceeded",
    # an admin's route asked by another user (403)
    "admin_only",
    # the request itself is wrong (422)
    "invalid_body",
    "bad_thread_id",
    "bad_run_id",
    "bad_last_event_id",
    "no_user_message",
    "duplicate_message",
    "message_too_large",
    "unsupported_content",
    "message_xor_resume",
    "bad_title",
    "invalid_answer",
    "duplicate_answer",
    "invalid_request",
    "unsupported",
    "unknown_node",
    "invalid_update",
    # the framework's own refusals besides 404 and 405 (a static file it may not read: 401)
    "http_400",
    "http_401",
    "http_error",
    # the service is stopping, full, or its database does not answer now (503; a run's
    # RUN_ERROR says `storage_unavailable` too)
    "shutting_down",
    "too_many_connections",
    "storage_unavailable",
    # a run's RUN_ERROR (and a /api/chat run's 502); a queued run's refusal keeps its code
    "model_not_configured",
    "model_error",
    "recursion_limit",
    "internal_error",
    "cancelled",
    "not_resumable",
    "run_failed",
    # never sent by the server: the terminal client's, and the database's at start-up
    "unreachable",
    "bad_response",
    "database_unreachable",
    "database_read_only",
]
ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))


def is_error_code(value: Any) -> TypeGuard[ErrorCode]:
    """Whether `value` is a code of this version (a newer replica or server may send others)."""
    return value in ERROR_CODES


def run_error_code(value: Any) -> ErrorCode:
    """A RUN_ERROR's code as this version knows it: `run_failed` when it has none, or one
    this version has no name for (written by a newer replica on the same database)."""
    return value if is_error_code(value) else "run_failed"


class ServiceError(Exception):
    """A refusal or failure with its HTTP status, machine code and readable message."""

    status: ClassVar[int] = 500

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        if status is not None:
            self.status = status  # type: ignore[misc]
        self.headers = headers


class BadRequest(ServiceError):
    """The body cannot be read at all (400)."""

    status = 400


class Unauthorized(ServiceError):
    """Missing or wrong bearer key (401)."""

    status = 401


class Forbidden(ServiceError):
    """A route for admins, asked by another user (403)."""

    status = 403


class RequestTimeout(ServiceError):
    """The body did not arrive within its deadline; the connection is closed (408)."""

    status = 408


class NotFound(ServiceError):
    """No such graph, thread or run (404)."""

    status = 404


class Conflict(ServiceError):
    """The thread's state refuses the request now (409); nothing was changed."""

    status = 409


class Gone(ServiceError):
    """What was asked for existed but is no longer kept (410)."""

    status = 410


class TooMany(ServiceError):
    """Too many runs are already waiting; `Retry-After` says when to try again (429)."""

    status = 429


class TooLarge(ServiceError):
    """The body is over the limit (413)."""

    status = 413


class UnsupportedMediaType(ServiceError):
    """The request's `Content-Type` is not JSON where JSON (or nothing) is wanted (415)."""

    status = 415


class Invalid(ServiceError):
    """The request itself is wrong (422); nothing was changed."""

    status = 422


class RunFailed(ServiceError):
    """A run ended with RUN_ERROR; `code` is the event's code (502)."""

    status = 502


class Unavailable(ServiceError):
    """The service takes no new work now: it is shutting down, or full (503)."""

    status = 503


class Unreachable(Unavailable):
    """A client could not reach the service (503)."""


class StorageUnavailable(Unavailable):
    """The database AGENT_DB names cannot be reached (503): at start-up, a configuration
    error; while serving, a request it failed (`storage_unavailable()`). The message names
    the database without its password, or not at all."""


# What a client is told to wait before trying again: the pool reconnects within seconds.
STORAGE_RETRY_AFTER_S = 5
STORAGE_LOST = "the database does not answer now; retry in a few seconds"


def storage_unavailable(message: str = STORAGE_LOST) -> StorageUnavailable:
    """503 `storage_unavailable`, with when to try again: the database failed a request."""
    return StorageUnavailable(
        "storage_unavailable", message, headers={"Retry-After": str(STORAGE_RETRY_AFTER_S)}
    )
