"""The lessons contract, spoken to directly with deterministic vectors.

Every backend in ``BACKENDS`` must pass this file unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from stores import InvalidInputError, NotFoundError, Scope, Store
from stores.engine.lessons import LessonDraft, LessonPatch, RecallQuery
from tests.support.helpers import blend, vector

HERE = Scope(org="local", project="alpha")
THERE = Scope(org="local", project="beta")
OTHER_ORG = Scope(org="acme", project="alpha")


def draft(problem: str, resolution: str = "fixed it", **kw: object) -> LessonDraft:
    return LessonDraft(problem=problem, resolution=resolution, **kw)  # type: ignore[arg-type]


def recall(store: Store, scope: Scope, name: str, text: str = "", **kw: object) -> list[str]:
    hits = store.recall(scope, RecallQuery(text=text, vector=vector(name), **kw))  # type: ignore[arg-type]
    return [h.lesson.problem for h in hits]


def test_a_saved_lesson_reads_back_with_every_field(store: Store) -> None:
    expires = datetime.now(UTC) + timedelta(days=3)
    saved = store.save(
        HERE,
        draft("p1", "r1", context="ctx", tags=("a", "b"), confidence=0.8, source="me", expires_at=expires),
        vector("p1"),
    )
    lesson = store.get(HERE, saved.id)
    assert (lesson.problem, lesson.resolution, lesson.context, lesson.source) == ("p1", "r1", "ctx", "me")
    assert lesson.tags == ("a", "b")
    assert lesson.confidence == pytest.approx(0.8)
    assert lesson.project == "alpha"
    assert lesson.upvotes == lesson.downvotes == 0
    assert lesson.expires_at is not None and abs((lesson.expires_at - expires).total_seconds()) < 0.001
    assert saved.merged is False


def test_lessons_are_invisible_outside_their_project_and_org(store: Store) -> None:
    saved = store.save(HERE, draft("secret plan"), vector("x"))
    for scope in (THERE, OTHER_ORG):
        with pytest.raises(NotFoundError):
            store.get(scope, saved.id)
        with pytest.raises(NotFoundError):
            store.vote(scope, saved.id, up=True)
        with pytest.raises(NotFoundError):
            store.delete(scope, saved.id)
        assert recall(store, scope, "x", "secret plan") == []
        assert store.list(scope, (), 10, None).lessons == ()
    assert store.count(HERE.org, HERE.project) == 1


def test_a_near_duplicate_in_the_same_project_merges_instead_of_adding(store: Store) -> None:
    first = store.save(HERE, draft("cache stampede", tags=("cache",), confidence=0.4), vector("dup"))
    second = store.save(HERE, draft("cache stampede!", tags=("redis",), confidence=0.9), vector("dup", 0.05))
    assert second.merged is True and second.id == first.id
    lesson = store.get(HERE, first.id)
    assert lesson.tags == ("cache", "redis")
    assert lesson.confidence == pytest.approx(0.9)
    assert lesson.meta["merged_count"] == 1
    assert store.count(HERE.org, HERE.project) == 1
    # The same vector in another project is a different lesson.
    assert store.save(THERE, draft("cache stampede"), vector("dup")).merged is False


def test_distinct_lessons_are_not_merged(store: Store) -> None:
    a = store.save(HERE, draft("a"), vector("a"))
    b = store.save(HERE, draft("b"), vector("b"))
    assert not a.merged and not b.merged and a.id != b.id


def test_save_many_deduplicates_within_the_batch(store: Store) -> None:
    results = store.save_many(
        HERE,
        [
            (draft("one"), vector("one")),
            (draft("two"), vector("two")),
            (draft("One!"), vector("one", 0.05)),
        ],
    )
    assert [r.merged for r in results] == [False, False, True]
    assert results[2].id == results[0].id
    assert store.count(HERE.org, HERE.project) == 2


def test_save_many_keeping_ids_is_an_import_that_adds_nothing_twice(store: Store) -> None:
    """Each draft keeps its id, times and votes; an id the project holds, or the batch gave
    before, is skipped; the batch is one ``import`` commit, and a batch that adds nothing none."""
    made = datetime(2024, 1, 2, tzinfo=UTC)
    kept = draft("kept", id="01JB0000000000000000000001", created_at=made, upvotes=3, downvotes=1)
    other = draft("other", id="01JB0000000000000000000002")
    same_id = draft("same id, other text", id=kept.id)
    first = store.save_many(
        HERE, [(kept, vector("kept")), (other, vector("other")), (same_id, vector("x"))], keep_ids=True
    )
    assert [(r.id, r.merged, r.skipped) for r in first] == [
        (kept.id, False, False),
        (other.id, False, False),
        (kept.id, False, True),
    ]
    lesson = store.get(HERE, str(kept.id))
    assert (lesson.problem, lesson.created_at, lesson.updated_at) == ("kept", made, made)
    assert (lesson.upvotes, lesson.downvotes) == (3, 1)
    again = store.save_many(HERE, [(kept, vector("kept")), (other, vector("other"))], keep_ids=True)
    assert [r.skipped for r in again] == [True, True]
    assert store.count(HERE.org, HERE.project) == 2
    assert store.save_many(THERE, [(kept, vector("kept"))], keep_ids=True)[0].skipped is False
    with store.transaction(HERE, write=False) as tx:
        assert [c.kind for c in tx.commits(None, 10, None)] == ["import"]


def test_recall_orders_by_similarity_and_respects_limit(store: Store) -> None:
    q = vector("query")
    for i, w in enumerate([0.9, 0.5, 0.2, 0.7]):
        store.save(HERE, draft(f"lesson {i}"), blend(vector(f"noise{i}"), q, w))
    got = store.recall(HERE, RecallQuery(text="", vector=q, limit=3))
    assert [h.lesson.problem for h in got] == ["lesson 0", "lesson 3", "lesson 1"]
    assert got[0].score > got[1].score > got[2].score > 0


def test_lexical_match_lifts_a_lesson_with_the_query_words(store: Store) -> None:
    q = vector("q")
    store.save(HERE, draft("generic failure", "restart"), blend(vector("n1"), q, 0.5))
    store.save(
        HERE, draft("kafka consumer rebalance storm", "raise session timeout"), blend(vector("n2"), q, 0.5)
    )
    assert recall(store, HERE, "q", "kafka rebalance")[0] == "kafka consumer rebalance storm"


def test_votes_reorder_equally_relevant_lessons(store: Store) -> None:
    q = vector("q")
    a = store.save(HERE, draft("fix A"), blend(vector("a"), q, 0.6))
    b = store.save(HERE, draft("fix B"), blend(vector("b"), q, 0.6))
    first = recall(store, HERE, "q")[0]
    loser, winner = (a, b) if first == "fix A" else (b, a)
    for _ in range(4):
        store.vote(HERE, loser.id, up=False)
        store.vote(HERE, winner.id, up=True)
    assert recall(store, HERE, "q")[0] == store.get(HERE, winner.id).problem
    assert store.get(HERE, winner.id).upvotes == 4
    assert store.get(HERE, loser.id).downvotes == 4


def test_older_lessons_decay_below_fresh_equally_relevant_ones(store: Store) -> None:
    q = vector("q")
    old_time = datetime.now(UTC) - timedelta(days=365)
    store.save(HERE, draft("old fix", created_at=old_time), blend(vector("a"), q, 0.6))
    store.save(HERE, draft("new fix"), blend(vector("b"), q, 0.6))
    assert recall(store, HERE, "q") == ["new fix", "old fix"]


def test_expired_lessons_never_come_back(store: Store) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=30)
    saved = store.save(HERE, draft("short lived", expires_at=soon), vector("e"))
    assert recall(store, HERE, "e", "short lived") == ["short lived"]
    later = soon + timedelta(seconds=1)
    assert store.recall(HERE, RecallQuery(text="short lived", vector=vector("e"), now=later)) == []
    past = datetime.now(UTC) - timedelta(seconds=1)
    gone = store.save(HERE, draft("already gone", expires_at=past), vector("g"))
    with pytest.raises(NotFoundError):
        store.get(HERE, gone.id)
    assert "already gone" not in recall(store, HERE, "g", "already gone")
    assert [x.id for x in store.list(HERE, (), 10, None).lessons] == [saved.id]


def test_tag_and_confidence_filters_restrict_recall_and_list(store: Store) -> None:
    store.save(HERE, draft("both tags", tags=("x", "y"), confidence=0.9), vector("1"))
    store.save(HERE, draft("one tag", tags=("x",), confidence=0.9), vector("2"))
    store.save(HERE, draft("unsure", tags=("x", "y"), confidence=0.1), vector("3"))
    assert sorted(recall(store, HERE, "1", tags=("x", "y"))) == ["both tags", "unsure"]
    assert recall(store, HERE, "1", tags=("x", "y"), min_confidence=0.5) == ["both tags"]
    assert recall(store, HERE, "1", tags=("nope",)) == []
    listed = store.list(HERE, ("x", "y"), 10, None)
    assert sorted(x.problem for x in listed.lessons) == ["both tags", "unsure"]


def test_list_pages_newest_first_without_gaps_or_repeats(store: Store) -> None:
    ids = [store.save(HERE, draft(f"l{i}"), vector(f"l{i}")).id for i in range(7)]
    seen, cursor = [], None
    while True:
        page = store.list(HERE, (), 3, cursor)
        seen += [x.id for x in page.lessons]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids))


def test_update_changes_only_given_fields_and_can_clear_optional_ones(store: Store) -> None:
    saved = store.save(HERE, draft("p", "r", context="c", source="s", tags=("a",)), vector("u"))
    updated = store.update(
        HERE, saved.id, LessonPatch(resolution="r2", tags=("b",), clear=frozenset({"context"})), None
    )
    assert (updated.problem, updated.resolution, updated.context, updated.source) == ("p", "r2", None, "s")
    assert updated.tags == ("b",)
    assert updated.updated_at >= updated.created_at
    assert recall(store, HERE, "u", tags=("b",)) == ["p"]
    assert recall(store, HERE, "u", tags=("a",)) == []


def test_update_with_a_new_vector_moves_the_lesson_in_recall(store: Store) -> None:
    saved = store.save(HERE, draft("movable"), vector("before"))
    store.save(HERE, draft("anchor"), vector("anchor"))
    store.update(HERE, saved.id, LessonPatch(problem="moved"), vector("after"))
    assert recall(store, HERE, "after")[0] == "moved"


def test_delete_removes_the_lesson_everywhere(store: Store) -> None:
    saved = store.save(HERE, draft("doomed"), vector("d"))
    removed = store.delete(HERE, saved.id)
    assert removed.problem == "doomed"
    with pytest.raises(NotFoundError):
        store.get(HERE, saved.id)
    with pytest.raises(NotFoundError):
        store.delete(HERE, saved.id)
    assert recall(store, HERE, "d", "doomed") == []
    assert store.count("local") == 0


def test_a_vector_of_another_dimension_is_refused_and_changes_nothing(store: Store) -> None:
    store.save(HERE, draft("first"), vector("f"))
    with pytest.raises(InvalidInputError, match="384"):
        store.save(HERE, draft("wrong"), np.ones(768, dtype=np.float32))
    with pytest.raises(InvalidInputError, match="holds 384-dimension vectors but the query vector has 10"):
        store.recall(HERE, RecallQuery(text="x", vector=np.ones(10, dtype=np.float32)))
    assert store.count("local") == 1


def test_a_failed_batch_saves_nothing(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        store.save_many(HERE, [(draft("ok"), vector("ok")), (draft("bad"), np.full(384, np.nan))])
    assert store.count("local") == 0


def test_unknown_ids_are_not_found(store: Store) -> None:
    missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    for op in (
        lambda: store.get(HERE, missing),
        lambda: store.vote(HERE, missing, up=True),
        lambda: store.delete(HERE, missing),
        lambda: store.update(HERE, missing, LessonPatch(problem="x"), None),
    ):
        with pytest.raises(NotFoundError):
            op()
