"""Store errors: each class one stable wire code (``lore_mcp.errors``), each message a sentence to act on."""

from __future__ import annotations


class StoreError(Exception):
    """Base class for every failure a store anticipates."""


class NotFoundError(StoreError):
    """The named record does not exist in the caller's scope (or has expired)."""


class InvalidInputError(StoreError):
    """The request is malformed for this store (for example a vector of the wrong dimension)."""


class ConflictError(StoreError):
    """The request clashes with the stored state."""


class UnavailableError(StoreError):
    """The database cannot be reached or is busy beyond the retry budget."""


def refuse_newer_schema(applied: set[int], known: int) -> None:
    """Stop before touching a database migrated by a newer Lore than this one."""
    newest = max(applied, default=0)
    if newest > known:
        raise UnavailableError(
            f"This Lore database is at schema version {newest}, newer than this Lore "
            f"understands ({known}); upgrade lore-memory."
        )
