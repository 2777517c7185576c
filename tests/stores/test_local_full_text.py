"""The local file's full-text half of recall: scoped before bm25, and bm25 left as FTS5 has it.

``LocalLessons.word_keys`` finds a project's best full-text matches. It used to rank the whole
file's matches by bm25 and keep the project's among the first few (k x 4), so a small project's
matches were crowded out by a busy one's, and every match in the file was weighed (20k matches
of a common word took 40 ms at 250k lessons). Now each match's scope is read from an index first
and bm25 weighs only the project's live matches. bm25 itself must not change: its statistics
(row count, average length, each term's rows) stay the whole file's and cover the lesson's four
texts alone, so these tests compute it by FTS5's formula and compare. A file written before the
index (schema 10) gains it on opening and answers as a new file does. Vectors come from the model.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lore_mcp.embedding.embedder import Embedder
from stores import Store, open_local_store
from stores.engine import ranking
from stores.engine.lessons import LessonDraft, RecallQuery, Scope

BUSY, QUIET = Scope("local", "busy"), Scope("local", "quiet")
# Short texts rank first for a word: the busy project's fill the file's best matches.
BUSY_TEXTS = [f"zorb kwix plam {i}" for i in range(40)]
QUIET_TEXTS = [
    "zorb stalls the nightly export when the archive volume is nearly full of old snapshots",
    "the queue consumer drops zorb frames after a broker restart and never asks again for them",
    "rotate the signing key before zorb tokens expire, or every client is logged out at once",
]
NEVER = "nothing here mentions the word at all, only a restart of the broker"
PARAMS = ranking.RankingParams(min_candidates=5)  # k = 5 full-text keys: 20 of the file's before


def fill(store: Store, embedder: Embedder) -> None:
    for scope, texts in ((BUSY, BUSY_TEXTS), (QUIET, [*QUIET_TEXTS, NEVER])):
        vectors = embedder.encode_documents(texts)
        for text, vec in zip(texts, vectors, strict=True):
            store.save(scope, LessonDraft(problem=text, resolution="see the runbook"), vec)


def pks(store: Store, texts: list[str]) -> list[int]:
    with store._backend.conns.reading() as conn:  # type: ignore[attr-defined]
        found = dict(conn.execute("SELECT problem, pk FROM lessons").fetchall())
    return [found[t] for t in texts]


def word_keys(store: Store, scope: Scope, text: str, k: int = 5) -> list[int]:
    backend = store._backend  # type: ignore[attr-defined]
    terms = ranking.lexical_terms(text, params=backend.ranking)
    return list(backend.word_keys(scope, RecallQuery(text=text), terms, k, datetime.now(UTC)))


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Store:
    opened = open_local_store(tmp_path / "lore.db", ranking_params=PARAMS)
    fill(opened, embedder)
    return opened


def test_a_small_projects_matches_are_not_crowded_out_by_a_busy_ones(store: Store) -> None:
    try:
        # Before: the file's 20 best were all the busy project's, so the quiet one got none.
        assert set(word_keys(store, QUIET, "zorb")) == set(pks(store, QUIET_TEXTS))
        busy = word_keys(store, BUSY, "zorb")
        assert len(busy) == 5 and set(busy) <= set(pks(store, BUSY_TEXTS))
    finally:
        store.close()


def test_recall_in_the_small_project_returns_only_its_own_lessons(store: Store, embedder: Embedder) -> None:
    try:
        query = RecallQuery(text="zorb", limit=10).with_vector(embedder.encode_query("zorb"))
        found = {hit.lesson.problem for hit in store.recall(QUIET, query)}
        assert set(QUIET_TEXTS) <= found <= {*QUIET_TEXTS, NEVER}
    finally:
        store.close()


def expected_bm25(store: Store, word: str) -> dict[int, float]:
    """FTS5's bm25 (k1 1.2, b 0.75) over the whole file, each row's length the words of its four
    texts (problem, resolution, context, tags), computed here from the saved texts."""
    with store._backend.conns.reading() as conn:  # type: ignore[attr-defined]
        rows = conn.execute("SELECT pk, problem, resolution, context, tags FROM lessons").fetchall()
    words = {pk: " ".join([p, r, c or "", *json.loads(t)]).split() for pk, p, r, c, t in rows}
    average = sum(len(w) for w in words.values()) / len(words)
    having = [pk for pk, w in words.items() if word in w]
    idf = math.log((len(words) - len(having) + 0.5) / (len(having) + 0.5))
    idf = idf if idf > 0 else 1e-6  # a word in most rows (FTS5's floor)
    return {
        pk: -idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(words[pk]) / average))
        for pk in having
        for f in [words[pk].count(word)]
    }


@pytest.mark.parametrize("word", ["zorb", "restart"])
def test_bm25_is_fts5s_over_the_whole_file_and_the_lessons_texts_alone(store: Store, word: str) -> None:
    try:
        want = expected_bm25(store, word)
        with store._backend.conns.reading() as conn:  # type: ignore[attr-defined]
            got = dict(
                conn.execute(
                    "SELECT rowid, bm25(lessons_fts) FROM lessons_fts WHERE lessons_fts MATCH ?",
                    [f'"{word}"'],
                ).fetchall()
            )
        assert got.keys() == want.keys()
        for pk, score in want.items():
            assert got[pk] == pytest.approx(score, rel=1e-9)
        # The scope's matches, best bm25 first (ties to the smaller pk).
        quiet = set(pks(store, [*QUIET_TEXTS, NEVER])) & want.keys()
        assert word_keys(store, QUIET, word) == sorted(quiet, key=lambda pk: (want[pk], pk))
    finally:
        store.close()


def test_a_file_at_schema_10_gains_the_index_and_answers_as_a_new_one(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.sqlite import migrations as local_db

    with monkeypatch.context() as old:
        old.setattr(local_db, "MIGRATIONS", local_db.MIGRATIONS[:10])
        old.setattr(local_db, "SCHEMA_VERSION", 10)
        made = open_local_store(tmp_path / "old.db", ranking_params=PARAMS)
        fill(made, embedder)
        made.close()
    reopened = open_local_store(tmp_path / "old.db", ranking_params=PARAMS)
    fresh = open_local_store(tmp_path / "new.db", ranking_params=PARAMS)
    fill(fresh, embedder)
    try:
        with reopened._backend.conns.reading() as conn:  # type: ignore[attr-defined]
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "lessons_pk_scope" in names
        query = RecallQuery(text="zorb", limit=10).with_vector(embedder.encode_query("zorb"))
        for scope in (QUIET, BUSY):
            assert word_keys(reopened, scope, "zorb") == word_keys(fresh, scope, "zorb")
            # (Scores move by a millionth with the seconds between the two files' saves.)
            old_hits = [
                (h.lesson.problem, pytest.approx(h.score, abs=1e-5)) for h in reopened.recall(scope, query)
            ]
            assert old_hits == [(h.lesson.problem, h.score) for h in fresh.recall(scope, query)]
    finally:
        reopened.close()
        fresh.close()
