"""An in-memory index of lesson vectors for exact cosine search: sqlite-vec's scan took 55 ms for
100k 384-d vectors, over the 25 ms recall budget. One block per scope, so a search reads only its
project's rows, contiguous (gathering a large project's rows out of one shared matrix took most of
a recall at 250k). Vectors are held as int8 with a scale per row, a quarter of float32's memory
(96 MB, not 384 MB, for 250k 384-d vectors); a search returns every row whose int8 score could be
among the float32 best (``SCORE_MARGIN``) and the caller rescores those from ``lesson_embeddings``,
which stays the truth. Not thread-safe: the owning store serialises access."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from stores.engine.vectors import unit_vector

# Twice what an int8 score may stray from the float32 one (on the scale corpus: 0.0002 typically,
# 0.0021 at most over 3M pairs): rows within it of the k-th best score are candidates.
SCORE_MARGIN = 0.01
_CHUNK = 8192  # rows widened to float32 at a time for a batch's product (12 MB at 384-d)


@dataclass(frozen=True)
class IndexedRow:
    """What the index keeps per lesson besides its vector."""

    key: int
    scope: str
    expires_at: float  # epoch seconds; +inf when the lesson never expires
    confidence: float


def quantised(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows made unit length, as int8 codes and the float32 scale that multiplies them back."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    peak = np.abs(matrix).max(axis=1) if matrix.size else np.zeros(len(matrix), np.float32)
    scales = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    return np.rint(matrix / scales[:, None]).astype(np.int8), scales


class _Block:
    """One scope's rows, dense: codes, scales, keys, expiry and confidence (no per-key dict: at 250k
    rows the dicts held more memory than the keys' arrays)."""

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.codes = np.zeros((0, dim), np.int8)
        self.scales = np.zeros(0, np.float32)
        self.keys = np.zeros(0, np.int64)
        self.expires = np.zeros(0, np.float64)
        self.confidence = np.zeros(0, np.float32)
        self.head, self.tails = dim // 3, np.zeros(0, np.float32)  # each row's norm past its head

    def append(self, rows: list[IndexedRow], codes: np.ndarray, scales: np.ndarray) -> None:
        """Add rows this block does not hold (the caller removed any it replaces)."""
        end = self.n + len(rows)
        if end > len(self.keys):
            capacity = max(end, 2 * len(self.keys), 64)
            for name in _COLUMNS:
                old = getattr(self, name)
                grown = np.zeros((capacity, *old.shape[1:]), old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
        self.codes[self.n : end], self.scales[self.n : end] = codes, scales
        self.keys[self.n : end] = [r.key for r in rows]
        self.expires[self.n : end] = [r.expires_at for r in rows]
        self.confidence[self.n : end] = [r.confidence for r in rows]
        self.tails[self.n : end] = np.linalg.norm(codes[:, self.head :].astype(np.float32), axis=1)
        self.n = end

    def remove(self, keys: np.ndarray) -> None:
        """Drop the rows of ``keys`` it holds, keeping the rest dense and in order."""
        keep = ~np.isin(self.keys[: self.n], keys)
        kept = int(keep.sum())
        if kept < self.n:
            for name in _COLUMNS:
                column = getattr(self, name)
                column[:kept] = column[: self.n][keep]
            self.n = kept

    def scores(self, queries: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """int8 cosine scores, (queries, rows). One query is summed by ``einsum`` (no BLAS call: its
        threads wait for a core on a busy machine); a batch widens ``_CHUNK`` rows at a time."""
        whole = 2 * len(rows) >= self.n  # most rows: score all of them rather than copy these out
        codes = self.codes[: self.n] if whole else self.codes[rows]
        out: np.ndarray
        if len(queries) == 1:
            out = np.einsum("ij,j->i", codes, queries[0])[None, :]
        else:
            out = np.empty((len(queries), len(codes)), np.float32)
            for start in range(0, len(codes), _CHUNK):
                out[:, start : start + _CHUNK] = queries @ codes[start : start + _CHUNK].astype(np.float32).T
        scores: np.ndarray = (out[:, rows] if whole else out) * self.scales[rows]
        return scores


# The block's arrays holding one entry per row, kept in step.
_COLUMNS = ("codes", "scales", "keys", "expires", "confidence", "tails")


class VectorIndex:
    """Candidates for exact cosine search over unit vectors, filtered by scope, expiry and confidence."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._blocks: dict[str, _Block] = {}
        self._top = -1  # the highest key held: a row above it is new (SQLite gives rising keys)

    def __len__(self) -> int:
        return sum(block.n for block in self._blocks.values())

    def put(self, rows: list[IndexedRow], vectors: np.ndarray) -> None:
        """Add or replace lessons' vectors (one row each), a batch at a time when loading. A
        lesson never changes scope, so a replaced one is looked for in its own block only."""
        if vectors.shape != (len(rows), self.dim):
            raise ValueError(f"vectors have shape {vectors.shape}, index holds {self.dim} dimensions")
        codes, scales = quantised(vectors)
        by_scope: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            by_scope.setdefault(row.scope, []).append(i)
        for scope, picked in by_scope.items():
            block = self._blocks.setdefault(scope, _Block(self.dim))
            keys = np.array([rows[i].key for i in picked], np.int64)
            if keys.min() <= self._top:
                block.remove(keys)
            block.append([rows[i] for i in picked], codes[picked], scales[picked])
            self._top = max(self._top, int(keys.max()))

    def remove(self, keys: Collection[int]) -> None:
        """Drop these lessons, wherever they are."""
        held = np.fromiter(keys, np.int64)
        if held.size:
            for block in self._blocks.values():
                block.remove(held)

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
        """(key, int8 score) of ``scope``'s live rows within ``allowed`` that may be among the ``k``
        best: the ``k`` best and any within ``SCORE_MARGIN`` of the ``k``-th, best first."""
        block = self._blocks.get(scope)
        if block is None or k <= 0:
            return []
        rows = self._live(block, now, min_confidence, allowed)
        if rows.size == 0:
            return []
        sims = block.scores(unit_vector(query)[None, :], rows)[0]
        if rows.size > k:
            floor = np.partition(sims, rows.size - k)[rows.size - k] - SCORE_MARGIN
            rows, sims = rows[sims >= floor], sims[sims >= floor]
        order = np.argsort(-sims, kind="stable")
        return [(int(block.keys[r]), float(s)) for r, s in zip(rows[order], sims[order], strict=True)]

    def nearest_many(
        self, scope: str, queries: np.ndarray, *, now: float, min_similarity: float = -1.0
    ) -> list[list[tuple[int, float]]]:
        """Per query row, the live keys whose int8 score is within ``SCORE_MARGIN`` of
        ``min_similarity`` or above, best first, in a few products per batch to keep loads fast."""
        block = self._blocks.get(scope)
        rows = self._live(block, now, 0.0, None) if block is not None else np.zeros(0, np.int64)
        if block is None or rows.size == 0:
            return [[] for _ in range(len(queries))]
        if len(queries) == 1:  # a save: a row's int8 score is at most its head's + its tail's norm x q's
            q, h = np.asarray(queries[0], np.float32), block.head
            head = np.einsum("ij,j->i", block.codes[: block.n, :h], q[:h])[rows]
            bound = (head + block.tails[rows] * float(np.linalg.norm(q[h:]))) * block.scales[rows]
            rows = rows[bound >= min_similarity - SCORE_MARGIN - 1e-4]  # (1e-4: float32 rounding)
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(queries), 64):
            sims = block.scores(np.asarray(queries[start : start + 64], dtype=np.float32), rows)
            for row in sims:
                hits = np.flatnonzero(row >= min_similarity - SCORE_MARGIN)
                ranked = sorted(
                    zip(row[hits].tolist(), rows[hits].tolist(), strict=True), key=lambda p: -p[0]
                )
                out.append([(int(block.keys[j]), sim) for sim, j in ranked])
        return out

    @staticmethod
    def _live(
        block: _Block, now: float, min_confidence: float, allowed: Collection[int] | None
    ) -> np.ndarray:
        """Positions of the block's unexpired rows at ``min_confidence`` or more, within ``allowed``."""
        rows = np.arange(block.n)
        if allowed is not None:
            rows = rows[np.isin(block.keys[: block.n], np.fromiter(allowed, np.int64))]
        mask = block.expires[rows] > now
        if min_confidence > 0:
            mask &= block.confidence[rows] >= min_confidence
        return rows[mask]
