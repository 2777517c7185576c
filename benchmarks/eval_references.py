"""The two plain references of ``eval_retrieval.py``: exact cosine and plain full-text.

Why: a ranking is only worth its parts if it beats what anyone gets for free from the same
model and the same index (issue 24). Both references read what the store itself wrote, in the
same database and for the same questions as the shipped ranking, but go around the ranking:

- ``cosine``: every lesson vector of the project, read once, against the query vector of the
  same ``Embedder`` (``encode_query``, as ``LessonService.recall`` embeds a query), by one exact
  numpy product; top 10.
- ``fulltext``: BM25 of the store's own full-text index. SQLite: FTS5's ``bm25(lessons_fts)``
  over ``lessons_fts`` with the query's words each double-quoted and OR-ed. Postgres:
  ``ts_rank_cd`` over the ``tsv`` column for ``websearch_to_tsquery`` of the words OR-ed, which is
  not BM25 (no length normalisation by default, no IDF): the output labels it so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from eval_scoring import Answer

K_MAX = 10
REFERENCES = ("cosine", "fulltext")
FULLTEXT_METHOD = {
    "local": "BM25 (FTS5 bm25 over lessons_fts, words OR-ed)",
    "postgres": "ts_rank_cd over tsv, websearch_to_tsquery of the words OR-ed (not BM25)",
}
_WORD = re.compile(r"\w+")


def fts5_query(text: str) -> str | None:
    """The query's words for FTS5 MATCH: each whitespace-separated word double-quoted (a ``"``
    inside doubled) and OR-ed, so no word is read as FTS5 syntax; None when it has no word."""
    words = [w for w in text.split() if _WORD.search(w)]
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def websearch_query(text: str) -> str | None:
    """The query's words OR-ed for Postgres ``websearch_to_tsquery``; None when it has none."""
    words = _WORD.findall(text)
    return " or ".join(words) if words else None


def top_cosine(ids: Sequence[str], unit: np.ndarray, query: np.ndarray, k: int = K_MAX) -> Answer:
    """The ``k`` lessons whose (unit) vectors are nearest the query's, exactly, best first."""
    if not len(ids):
        return Answer([], [], 0.0)
    q = query.astype(np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    sims = unit @ q
    top = np.argpartition(-sims, min(k, len(ids)) - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return Answer([ids[i] for i in top], [float(sims[i]) for i in top], 0.0)


def unit_rows(vectors: list[np.ndarray]) -> np.ndarray:
    """Vectors stacked and scaled to length 1 (a zero vector stays zero)."""
    matrix = np.stack(vectors).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class References:
    """Cosine and full-text over one loaded database, for one org; open, ask, close."""

    def __init__(self, org: str, path: str, url: str | None = None) -> None:
        self._org = org
        self._url = url
        self._conn: Any = self._connect(path, url)
        self._vectors: dict[str, tuple[list[str], np.ndarray]] = {}

    @staticmethod
    def _connect(path: str, url: str | None) -> Any:
        if url is None:
            # The store's own SQLite build (sqlean): the index is FTS5 with contentless_delete,
            # newer than some Pythons' sqlite3. Nothing is written through this connection.
            import sqlean

            return sqlean.connect(path)
        import psycopg

        return psycopg.connect(url, autocommit=True)

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        if self._url is not None:
            sql = sql.replace("?", "%s")
            with self._conn.cursor() as cur:
                cur.execute("SELECT set_config('lore.org', %s, false)", (self._org,))
                return list(cur.execute(sql, params))
        return list(self._conn.execute(sql, params))

    def project_vectors(self, project: str) -> tuple[list[str], np.ndarray]:
        """Ids and unit vectors of every lesson of ``project`` (read once, then kept)."""
        if project not in self._vectors:
            if self._url is None:
                sql = (
                    "SELECT l.id, e.embedding FROM lessons AS l JOIN lesson_embeddings AS e ON e.pk = l.pk "
                    "WHERE l.org_id = ? AND l.project = ? ORDER BY l.pk"
                )
                rows = [
                    (i, np.frombuffer(v, dtype=np.float32)) for i, v in self._rows(sql, (self._org, project))
                ]
            else:
                sql = (
                    "SELECT id, embedding::real[] FROM lessons WHERE org_id = ? AND project = ? "
                    "AND embedding IS NOT NULL ORDER BY pk"
                )
                rows = [
                    (i, np.asarray(v, dtype=np.float32)) for i, v in self._rows(sql, (self._org, project))
                ]
            ids = [i for i, _ in rows]
            self._vectors[project] = (ids, unit_rows([v for _, v in rows]) if rows else np.zeros((0, 1)))
        return self._vectors[project]

    def cosine(self, project: str, query_vector: np.ndarray, k: int = K_MAX) -> Answer:
        ids, unit = self.project_vectors(project)
        return top_cosine(ids, unit, query_vector, k)

    def fulltext(self, project: str, text: str, k: int = K_MAX) -> Answer:
        """The best ``k`` lessons of ``project`` by plain full-text rank of the query's words."""
        if self._url is None:
            match = fts5_query(text)
            sql = (
                "SELECT l.id, f.score FROM (SELECT rowid, bm25(lessons_fts) AS score FROM lessons_fts "
                "WHERE lessons_fts MATCH ?) AS f JOIN lessons AS l ON l.pk = f.rowid "
                "WHERE l.org_id = ? AND l.project = ? ORDER BY f.score, l.pk LIMIT ?"
            )
            sign = -1.0  # FTS5's bm25 is lower for better matches
        else:
            match = websearch_query(text)
            sql = (
                "SELECT id, ts_rank_cd(tsv, q) AS score FROM lessons, websearch_to_tsquery('english', ?) AS q "
                "WHERE tsv @@ q AND org_id = ? AND project = ? ORDER BY score DESC, pk LIMIT ?"
            )
            sign = 1.0
        if match is None:
            return Answer([], [], 0.0)
        rows = self._rows(sql, (match, self._org, project, k))
        return Answer([r[0] for r in rows], [sign * float(r[1]) for r in rows], 0.0)


def ask_references(
    refs: References,
    questions: Sequence[Any],
    encode_query: Callable[[str], np.ndarray],
    names: Sequence[str] = REFERENCES,
) -> dict[str, list[Answer]]:
    """Each reference's answers to every question (``question.project``, ``question.text``),
    with each answer's latency in milliseconds."""
    out: dict[str, list[Answer]] = {name: [] for name in names}
    for q in questions:
        for name in names:
            started = time.perf_counter()
            if name == "cosine":
                answer = refs.cosine(q.project, encode_query(q.text))
            else:
                answer = refs.fulltext(q.project, q.text)
            answer.ms = (time.perf_counter() - started) * 1000
            out[name].append(answer)
    return out
