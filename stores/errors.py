"""Errors a store raises.

Stores know nothing of MCP; the server maps each class to one stable wire code
(see ``lore_mcp.errors``). Each message is a sentence a person can act on.
"""

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
