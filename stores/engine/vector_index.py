"""An in-memory matrix of lesson vectors for exact cosine search: sqlite-vec's scan took 55 ms for
100k 384-d vectors, over the 25 ms recall budget; a numpy product takes 10 ms. ``lesson_embeddings``
stays the truth. Not thread-safe: the owning store serialises access."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from stores.engine.vectors import unit_vector


@dataclass(frozen=True)
class IndexedRow:
    """What the index keeps per lesson besides its vector."""

    key: int
    scope: str
    expires_at: float  # epoch seconds; +inf when the lesson never expires
    confidence: float


class VectorIndex:
    """Exact cosine search over unit vectors, filtered by scope, expiry and confidence."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._scope_codes: dict[str, int] = {}
        self.load([], np.zeros(0, dtype=np.float32))

    def __len__(self) -> int:
        return self._n

    def upsert(self, row: IndexedRow, vector: np.ndarray) -> None:
        """Add or replace one lesson's vector (normalised here so search is a dot product)."""
        vec = unit_vector(vector)
        if vec.shape[0] != self.dim:
            raise ValueError(f"vector has {vec.shape[0]} dimensions, index holds {self.dim}")
        pos = self._pos.get(row.key)
        if pos is None:
            self._grow_to(self._n + 1)
            pos = self._n
            self._n += 1
            self._pos[row.key] = pos
        self._vectors[pos] = vec
        self._keys[pos] = row.key
        self._scopes[pos] = self._scope_codes.setdefault(row.scope, len(self._scope_codes))
        self._expires[pos] = row.expires_at
        self._confidence[pos] = row.confidence

    def load(self, rows: list[IndexedRow], vectors: np.ndarray) -> None:
        """Replace the whole index: per-row upserts made a first recall at 100k take 4 s."""
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(rows), self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        self._n = len(rows)
        self._vectors = matrix
        self._keys = np.array([r.key for r in rows], dtype=np.int64)
        codes = [self._scope_codes.setdefault(r.scope, len(self._scope_codes)) for r in rows]
        self._scopes = np.array(codes, dtype=np.int32)
        self._expires = np.array([r.expires_at for r in rows], dtype=np.float64)
        self._confidence = np.array([r.confidence for r in rows], dtype=np.float32)
        self._pos: dict[int, int] = {int(k): i for i, k in enumerate(self._keys)}

    def remove(self, key: int) -> None:
        """Drop a lesson; the last row moves into its slot so the matrix stays dense."""
        pos = self._pos.pop(key, None)
        if pos is None:
            return
        last = self._n - 1
        if pos != last:
            for name in _COLUMNS:
                getattr(self, name)[pos] = getattr(self, name)[last]
            self._pos[int(self._keys[pos])] = pos
        self._n = last

    def search(
        self,
        scope: str,
        query: np.ndarray,
        k: int,
        *,
        now: float,
        min_confidence: float = 0.0,
        allowed: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` (key, similarity) of ``scope``'s live rows, best first, within ``allowed``."""
        code = self._scope_codes.get(scope)
        if code is None or self._n == 0 or k <= 0:
            return []
        q = unit_vector(query)
        held = None if allowed is None else [self._pos[key] for key in allowed if key in self._pos]
        positions = None if held is None else np.array(held, dtype=np.int64)
        candidates = np.flatnonzero(self._live_mask(code, now, min_confidence, positions))
        if candidates.size == 0:
            return []
        rows = positions[candidates] if positions is not None else candidates
        # A small project's rows copied; a large one's via the whole product (cheaper than copying).
        whole = positions is None and 4 * candidates.size >= self._n
        cand_sims = (self._vectors[: self._n] @ q)[candidates] if whole else self._vectors[rows] @ q
        if candidates.size > k:
            top = np.argpartition(-cand_sims, k - 1)[:k]
            candidates, cand_sims = candidates[top], cand_sims[top]
        order = np.argsort(-cand_sims, kind="stable")
        rows = positions[candidates[order]] if positions is not None else candidates[order]
        return [(int(self._keys[r]), float(s)) for r, s in zip(rows, cand_sims[order], strict=True)]

    def nearest_many(
        self, scope: str, queries: np.ndarray, *, now: float, k: int = 1, min_similarity: float = -1.0
    ) -> list[list[tuple[int, float]]]:
        """Per query row, up to ``k`` nearest live keys at ``min_similarity`` or more, best first, in
        a few matrix products per batch (not a scan per vector) to keep bulk loads fast."""
        code = self._scope_codes.get(scope)
        if code is None or self._n == 0:
            return [[] for _ in range(len(queries))]
        live = np.flatnonzero(self._live_mask(code, now, 0.0, None))
        if live.size == 0:
            return [[] for _ in range(len(queries))]
        # Only the scope's live rows: a batch costs its project's size, not the whole store's.
        matrix = self._vectors[live]
        k = min(k, len(live))
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(queries), 64):
            sims = np.asarray(queries[start : start + 64], dtype=np.float32) @ matrix.T  # (chunk, live)
            top = (
                np.argpartition(-sims, k - 1, axis=1)[:, :k]
                if k < len(live)
                else np.tile(np.arange(len(live)), (sims.shape[0], 1))
            )
            for i, row in enumerate(top):
                ranked = sorted(((float(sims[i, j]), int(live[j])) for j in row), key=lambda p: (-p[0], p[1]))
                out.append([(int(self._keys[j]), sim) for sim, j in ranked if sim >= min_similarity])
        return out

    def similarities(self, keys: Collection[int], query: np.ndarray) -> dict[int, float]:
        """Cosine similarity of the query to each indexed key (keys not indexed are left out)."""
        found, matrix = self.vectors(keys)
        if not found:
            return {}
        return dict(zip(found, (matrix @ unit_vector(query)).tolist(), strict=True))

    def vectors(self, keys: Collection[int]) -> tuple[list[int], np.ndarray]:
        """The indexed keys among ``keys`` and their unit vectors, one row each, in that order."""
        found = [(key, pos) for key in keys if (pos := self._pos.get(key)) is not None]
        matrix = self._vectors[[pos for _, pos in found]] if found else np.zeros((0, self.dim), np.float32)
        return [key for key, _ in found], matrix

    def _live_mask(
        self, code: int, now: float, min_confidence: float, positions: np.ndarray | None
    ) -> np.ndarray:
        sl = positions if positions is not None else slice(0, self._n)
        mask: np.ndarray = (self._scopes[sl] == code) & (self._expires[sl] > now)
        if min_confidence > 0:
            mask &= self._confidence[sl] >= min_confidence
        return mask

    def _grow_to(self, size: int) -> None:
        capacity = self._vectors.shape[0]
        if size <= capacity:
            return
        for name in _COLUMNS:
            setattr(self, name, _resized(getattr(self, name), max(size, capacity * 2, 256)))


# The arrays holding one entry per row, kept in step.
_COLUMNS = ("_vectors", "_keys", "_scopes", "_expires", "_confidence")


def _resized(arr: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros((capacity, *arr.shape[1:]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out
