"""Vector checks shared by the backends."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stores.errors import InvalidInputError


def unit_vector(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """The float32 unit vector (cosine as dot); NaN or infinity, poisoning all, is InvalidInputError."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vec)):
        raise InvalidInputError("A vector must hold only finite numbers.")
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


def check_dimension(dim: int, top: int) -> int:
    """``dim``, which vector storage takes from 1 to ``top`` (the backend's) dimensions."""
    if not 1 <= dim <= top:
        raise InvalidInputError(f"A vector must have between 1 and {top} dimensions, not {dim}.")
    return dim


def check_query(stored: int | None, query: int) -> None:
    """A query vector of another dimension than the store's (None: no vectors yet) is refused."""
    if stored is not None and query != stored:
        raise InvalidInputError(
            f"This store holds {stored}-dimension vectors but the query vector has {query}: "
            "the database was created with a different embedding model."
        )
