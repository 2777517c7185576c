"""Where failures become an MCP tool error ``CODE: sentence``: a stable code and an actionable sentence.
Unexpected exceptions are logged with traceback and reported without detail, so none leaves the server."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from stores import ConflictError, InvalidInputError, NotFoundError, StoreError, UnavailableError

logger = logging.getLogger("lore_mcp")

VALIDATION_ERROR = "VALIDATION_ERROR"
NOT_FOUND = "NOT_FOUND"
STALE_PLAN = "STALE_PLAN"
CONFLICT = "CONFLICT"
FORBIDDEN = "FORBIDDEN"
UNAUTHORIZED = "UNAUTHORIZED"
RATE_LIMITED = "RATE_LIMITED"
BUSY = "BUSY"  # refused for load: the caller's share of heavy work is taken (lore_mcp.transport.admission)
UNAVAILABLE = "UNAVAILABLE"
INTERNAL_ERROR = "INTERNAL_ERROR"

CODES = (
    *(VALIDATION_ERROR, NOT_FOUND, STALE_PLAN, CONFLICT, FORBIDDEN),
    *(UNAUTHORIZED, RATE_LIMITED, BUSY, UNAVAILABLE, INTERNAL_ERROR),
)


class LoreError(Exception):
    """An anticipated failure with its wire code, or ``code`` from another server (remote mode)."""

    code = INTERNAL_ERROR

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(LoreError):
    """The caller's arguments are wrong; the message says which and how to fix them."""

    code = VALIDATION_ERROR


class ModelUnavailable(LoreError):
    """The embedding model could not be loaded."""

    code = UNAVAILABLE


_STORE_CODES: dict[type[StoreError], str] = {
    NotFoundError: NOT_FOUND,
    InvalidInputError: VALIDATION_ERROR,
    ConflictError: CONFLICT,
    UnavailableError: UNAVAILABLE,
}


def describe(exc: BaseException) -> tuple[str, str]:
    """Map any exception to ``(code, message)``; logs the ones nobody anticipated."""
    if isinstance(exc, LoreError):
        return exc.code, exc.message
    if isinstance(exc, StoreError):
        from stores import PlanError, StalePlanError

        if isinstance(exc, PlanError):
            return describe(exc.error)[0], str(exc)
        if isinstance(exc, StalePlanError):
            return STALE_PLAN, str(exc)
        for cls, code in _STORE_CODES.items():
            if isinstance(exc, cls):
                return code, str(exc)
    if isinstance(exc, ValidationError):
        return VALIDATION_ERROR, validation_message(exc)
    logger.error("unexpected error", exc_info=exc)
    return INTERNAL_ERROR, "Lore hit an unexpected error; it was logged on the server. Try again."


def validation_message(exc: ValidationError) -> str:
    """Pydantic's errors as one sentence naming each field, without echoing the values."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in errors]
    return "Invalid arguments: " + "; ".join(parts) + "."


def wire_text(code: str, message: str) -> str:
    """The text of an MCP tool error."""
    return f"{code}: {message}"
