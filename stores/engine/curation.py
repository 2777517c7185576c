"""Curating a project's lessons: every near-identical pair (plain cosine similarity, not recall's
blend), found in blocks of ``BLOCK`` rows, and pairs kept apart (``kept_pairs``, never listed again)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import numpy as np

from stores.engine.lesson_rows import SCOPE, SqlLessonTx, live_row

BLOCK = 512  # rows of the similarity matrix computed at once: 512 x 50,000 lessons is 100 MB of float32

Pair = tuple[str, str, float]  # the smaller id, the other, their cosine similarity


def similar_pairs(
    ids: list[str], vectors: np.ndarray, threshold: float, kept: set[tuple[str, str]]
) -> list[Pair]:
    """Pairs of ``ids`` at ``threshold`` or more, but ``kept`` ones, most similar (then ids) first."""
    found: list[Pair] = []
    for start in range(0, len(ids), BLOCK):
        sims = vectors[start : start + BLOCK] @ vectors.T
        rows, cols = np.nonzero(sims >= threshold)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if j > start + i:
                a, b = sorted((ids[start + i], ids[j]))
                if (a, b) not in kept:
                    found.append((a, b, float(sims[i, j])))
    return sorted(found, key=lambda p: (-p[2], p[0], p[1]))


def duplicate_pairs(reading: contextlib.AbstractContextManager[SqlLessonTx], threshold: float) -> list[Pair]:
    """``Store.duplicate_pairs``, computed after the read ends so it lasts just two statements."""
    with reading as tx:
        found = tx.live_vectors()
        kept = {
            (r["a"], r["b"])
            for r in tx.sql.rows(f"SELECT a, b FROM kept_pairs WHERE {SCOPE}", tx.scope.params)
        }
    present = [(i, raw) for i, raw in found if raw]
    if len(present) < 2:
        return []
    matrix = np.stack([np.frombuffer(raw, dtype=np.float32) for _, raw in present])
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return similar_pairs([i for i, _ in present], matrix, threshold, kept)


def keep_pair(writing: contextlib.AbstractContextManager[SqlLessonTx], a: str, b: str) -> None:
    """``stores.Store.keep_pair`` in the project write ``writing`` opens: both must be live; idempotent."""
    a, b = sorted((a, b))
    with writing as tx:
        for lesson_id in (a, b):
            live_row(tx, lesson_id, embedding=False)
        at = tx.sql.stamp(datetime.now(UTC))
        tx.sql.rows(
            "INSERT INTO kept_pairs (org_id, project, a, b, at, actor) "
            "VALUES (:org, :project, :a, :b, :at, :actor) ON CONFLICT DO NOTHING",
            {**tx.scope.params, "a": a, "b": b, "at": at, "actor": tx.scope.actor},
        )
