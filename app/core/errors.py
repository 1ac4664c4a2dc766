"""The service's one error hierarchy: every refusal and failure a client can be told.

Each error carries the HTTP status it answers with, a stable machine `code` and a
readable message. The HTTP server has one handler for `ServiceError`; the terminal
client shows `message`. The status rule:

- 400 the body is not JSON; 401 missing or wrong bearer key; 404 unknown graph or thread;
- 409 the thread's state does not allow it now (a run in progress, a run id taken, a
  finished run cancelled, another graph's thread, answers awaited, nothing pending, an
  interrupt id not pending);
- 410 a run whose events have expired; 413 body too large; 422 the request itself is
  wrong (a bad answer, a message too long or not text, no new user message, a bad id);
- 502 a run that failed (`/api/chat`); 503 the service is shutting down, (client side)
  cannot be reached, or (at start-up) cannot reach its database.
"""

from __future__ import annotations

from typing import ClassVar


class ServiceError(Exception):
    """A refusal or failure with its HTTP status, machine code and readable message."""

    status: ClassVar[int] = 500

    def __init__(
        self,
        code: str,
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


class NotFound(ServiceError):
    """No such graph, thread or run (404)."""

    status = 404


class Conflict(ServiceError):
    """The thread's state refuses the request now (409); nothing was changed."""

    status = 409


class Gone(ServiceError):
    """What was asked for existed but is no longer kept (410)."""

    status = 410


class TooLarge(ServiceError):
    """The body is over the limit (413)."""

    status = 413


class Invalid(ServiceError):
    """The request itself is wrong (422); nothing was changed."""

    status = 422


class RunFailed(ServiceError):
    """A run ended with RUN_ERROR; `code` is the event's code (502)."""

    status = 502


class Unavailable(ServiceError):
    """The service takes no new work now: it is shutting down (503)."""

    status = 503


class Unreachable(Unavailable):
    """A client could not reach the service (503)."""


class StorageUnavailable(Unavailable):
    """The database AGENT_DB names cannot be reached (503); at start-up, a configuration
    error. The message names the database without its password."""
