"""Full-text candidates when a question paraphrases the lesson's words but repeats its entities.

A question's rarest word is often one the lesson never used ("rotation" for "renewal"), so
candidates are found by the question's entities first and ordered by them
(``stores.engine.ranking.rare_terms``, ``candidate_terms``). The rotation lessons share the
query's vector, so they are the nearest and always the same pool (an approximate index
returns any of a set of equal vectors); the others are a little further away and the
target further still: only the full-text side can bring the target in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from stores import Scope, Store, open_local_store, open_postgres_store
from stores.engine.lessons import LessonDraft, RecallQuery
from stores.engine.ranking import RankingParams
from tests.support.helpers import blend, vector
from tests.support.stores import empty_postgres

HERE = Scope(org="local", project="alpha")
# A small budget and pool, so 70 lessons behave as 100,000 do with the shipped ones.
PARAMS = RankingParams(postings_budget=30, min_candidates=5, centring=False)
QUESTION = "certificate rotation breaks the handshake where chain_depth went to 15"
TARGET = "TLS handshake fails for the edge proxy: chain_depth set to 15"
WORDS = [
    "amber", "basalt", "cobalt", "dahlia", "ember", "fjord", "garnet", "heron", "indigo", "juniper",
    "kestrel", "lichen", "marble", "nectar", "onyx", "pewter", "quartz", "russet", "sable", "tundra",
    "umber", "violet", "willow", "xenon", "yarrow", "zircon",
]  # fmt: skip


def lessons() -> list[str]:
    rotation = [f"Key rotation job {w} stalls overnight" for w in WORDS[:20]]
    chains = [
        f"TLS handshake fails for gateway {w}: chain_depth set to {20 + i}" for i, w in enumerate(WORDS[:24])
    ]
    fifteen = [f"Batch size 15 overflows queue {w}" for w in WORDS[:25]]
    return [*rotation, *chains, *fifteen, TARGET]


def open_with(backend: str, tmp_path: Path, request: pytest.FixtureRequest, params: RankingParams) -> Store:
    if backend == "local":
        return open_local_store(tmp_path / "lore.db", ranking_params=params)
    return open_postgres_store(request.getfixturevalue("postgres_url"), ranking_params=params)


@pytest.fixture
def filled(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The lessons saved (and on Postgres, analysed, so term postings are estimated)."""
    if backend == "postgres":
        empty_postgres(request.getfixturevalue("postgres_url"))
    store = open_with(backend, tmp_path, request, PARAMS)
    try:
        same, elsewhere = vector("same"), vector("elsewhere")
        for text in lessons():
            away = 0.1 if text == TARGET else 0.0 if "rotation" in text else 0.05
            vec = blend(same, elsewhere, away)
            store.save(HERE, LessonDraft(problem=text, resolution="see the runbook"), vec)
    finally:
        store.close()
    if backend == "postgres":
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as conn:
            conn.execute("ANALYZE lessons")
    yield backend


def first(store: Store) -> str:
    [hit] = store.recall(HERE, RecallQuery(text=QUESTION, vector=vector("same"), limit=1))
    return hit.lesson.problem


def test_the_questions_entities_find_the_lesson_its_rare_word_misses(
    filled: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_with(filled, tmp_path, request, PARAMS)
    try:
        assert first(store) == TARGET
    finally:
        store.close()


def test_without_entities_first_the_paraphrased_word_finds_only_other_lessons(
    filled: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # "rotation" is the rarest term and fills the budget: every candidate is a rotation
    # lesson, and the target, a little further from the query's vector, is never seen.
    # (On Postgres, a login that cannot read the planner's statistics counts every term
    # as rare and searches them all: there the switch makes no difference.)
    old = replace(PARAMS, entities_first=False, lexical_entities=False)
    store = open_with(filled, tmp_path, request, old)
    try:
        if filled == "postgres" and not _reads_statistics(request.getfixturevalue("postgres_url")):
            pytest.skip("this login cannot read the planner's statistics")
        assert first(store) != TARGET
    finally:
        store.close()


def test_a_question_of_common_words_alone_searches_its_rarest(
    filled: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Every word of the question is in 25 lessons, over a budget of 10. Its rarest is searched all
    # the same and brings in the chain lessons that share its words; with ``rarest_over_budget`` off,
    # the five nearest vectors, rotation lessons, are all the candidates. Both stores agree.
    if filled == "postgres" and not _reads_statistics(request.getfixturevalue("postgres_url")):
        pytest.skip("this login cannot read the planner's statistics")
    question = RecallQuery(text="TLS handshake fails", vector=vector("same"), limit=1)
    found = {}
    for rarest in (True, False):
        store = open_with(
            filled, tmp_path, request, replace(PARAMS, postings_budget=10, rarest_over_budget=rarest)
        )
        try:
            [hit] = store.recall(HERE, question)
            found[rarest] = hit.lesson.problem
        finally:
            store.close()
    assert found[True].startswith("TLS handshake fails")
    assert found[False].startswith("Key rotation job")


def _reads_statistics(url: str) -> bool:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        return bool(row.fetchone()[0])  # type: ignore[index]
