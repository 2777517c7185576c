"""Retrieval quality with the real embedding model, end to end through the MCP client.

A corpus of varied software-engineering lessons is saved through ``save_lesson``;
paraphrased queries that share few or no words with their target lesson must
find it near the top of ``recall_lessons``. Votes, tag filters and
``min_confidence`` are checked against the same corpus.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from stores.engine.ranking import lexical_terms
from tests.support.corpus import CORPUS, QUERIES
from tests.support.helpers import call

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=(
        "ranking quality, the same whichever era carries the call; both eras' recall is in "
        "test_lesson_tools and tests/process/test_eras.py"
    ),
)

TOP1_REQUIRED = 0.8
# A query may share at most this many (crudely stemmed) words with its target lesson.
MAX_SHARED_WORDS = 3


async def save_corpus(client: Client, confidence: dict[str, float] | None = None) -> dict[str, str]:
    """Save every lesson through the tool; return key -> id. None may merge into another."""
    ids: dict[str, str] = {}
    for lesson in CORPUS:
        result = await call(
            client,
            "save_lesson",
            problem=lesson.problem,
            resolution=lesson.resolution,
            tags=list(lesson.tags),
            confidence=(confidence or {}).get(lesson.key, 0.7),
        )
        assert result["merged"] is False, f"{lesson.key!r} merged into an earlier lesson"
        ids[lesson.key] = result["id"]
    assert len(set(ids.values())) == len(CORPUS)
    return ids


async def recall(client: Client, query: str, **kwargs: Any) -> list[dict[str, Any]]:
    return (await call(client, "recall_lessons", query=query, **kwargs))["lessons"]


def test_the_corpus_is_large_and_its_queries_are_paraphrases() -> None:
    keys = [lesson.key for lesson in CORPUS]
    assert len(keys) == len(set(keys))
    assert len(CORPUS) >= 60
    assert len(QUERIES) >= 12
    assert len(CORPUS) - len(QUERIES) >= 50
    assert set(QUERIES) <= set(keys)
    by_key = {lesson.key: lesson for lesson in CORPUS}
    for key, query in QUERIES.items():
        shared = stems(query) & stems(f"{by_key[key].problem} {by_key[key].resolution}")
        assert len(shared) <= MAX_SHARED_WORDS, (
            f"query for {key!r} copies the lesson's words {sorted(shared)}"
        )


def stems(text: str) -> set[str]:
    """Content words, roughly stemmed, as the full-text index would match them."""
    out = set()
    for term in lexical_terms(text, max_terms=1000):
        for suffix in ("ing", "ed", "es", "s"):
            if term.endswith(suffix) and not term.endswith("ss") and len(term) > len(suffix) + 2:
                term = term[: -len(suffix)]
                break
        out.add(term)
    return out


@pytest.mark.model
async def test_paraphrased_queries_find_their_lesson_near_the_top(client: Client) -> None:
    ids = await save_corpus(client)
    by_id = {ids[lesson.key]: lesson for lesson in CORPUS}

    ranks: dict[str, int | None] = {}
    report = []
    for key, query in QUERIES.items():
        got = await recall(client, query, limit=10)
        got_ids = [hit["id"] for hit in got]
        rank = got_ids.index(ids[key]) + 1 if ids[key] in got_ids else None
        ranks[key] = rank
        if rank != 1:
            top3 = "\n".join(
                f"      {i}. [{hit['score']:.3f}] {by_id[hit['id']].key}: {hit['problem']}"
                for i, hit in enumerate(got[:3], start=1)
            )
            report.append(
                f"  query:    {query}\n  expected: {key}: {by_id[ids[key]].problem}\n"
                f"  rank:     {rank}\n  top 3:\n{top3}"
            )

    top1 = sum(r == 1 for r in ranks.values()) / len(ranks)
    top3 = sum(r is not None and r <= 3 for r in ranks.values()) / len(ranks)
    summary = f"top-1 {top1:.0%}, top-3 {top3:.0%} over {len(ranks)} queries"
    print(summary)
    print("\n\n".join(report))
    details = summary + "\n\n" + "\n\n".join(report)
    assert top3 == 1.0, "some targets fell out of the top 3:\n" + details
    assert top1 >= TOP1_REQUIRED, "too few targets ranked first:\n" + details


@pytest.mark.model
async def test_votes_reorder_two_equally_relevant_fixes(client: Client) -> None:
    """Two fixes for one problem rank about equally; whichever leads at first is downvoted and
    the other upvoted five times each, after which the other must lead."""
    await save_corpus(client)
    first = await call(
        client,
        "save_lesson",
        problem="Gunicorn workers are killed with WORKER TIMEOUT during slow report generation.",
        resolution="Raise the --timeout setting so slow requests can finish.",
        tags=["gunicorn", "python"],
        confidence=0.7,
    )
    second = await call(
        client,
        "save_lesson",
        problem="Gunicorn workers are killed with WORKER TIMEOUT during slow report generation.",
        resolution="Move report generation to a background job queue and return 202 immediately.",
        tags=["gunicorn", "python"],
        confidence=0.7,
    )
    assert first["merged"] is False and second["merged"] is False
    pair = {first["id"], second["id"]}
    query = "web server kills workers while building big reports"

    before = await recall(client, query, limit=5)
    top_two = [hit["id"] for hit in before[:2]]
    assert set(top_two) == pair, f"the two fixes should lead before voting: {[h['problem'] for h in before]}"
    leader, other = top_two

    for _ in range(5):
        await call(client, "downvote_lesson", id=leader)
        await call(client, "upvote_lesson", id=other)

    after = await recall(client, query, limit=5)
    assert after[0]["id"] == other, (
        f"the upvoted fix should lead after voting; got {[(h['resolution'], h['score']) for h in after[:2]]}"
    )
    assert after[0]["upvotes"] == 5 and after[0]["downvotes"] == 0
    demoted = await call(client, "get_lesson", id=leader)
    assert (demoted["upvotes"], demoted["downvotes"]) == (0, 5)
    assert all(hit["score"] < after[0]["score"] for hit in after if hit["id"] == leader)


CONFIDENCE_STEPS = (0.2, 0.4, 0.6, 0.8, 0.95)


@pytest.mark.model
async def test_tag_and_confidence_filters_restrict_recall(client: Client) -> None:
    confidence = {lesson.key: CONFIDENCE_STEPS[i % len(CONFIDENCE_STEPS)] for i, lesson in enumerate(CORPUS)}
    ids = await save_corpus(client, confidence)
    key_of = {v: k for k, v in ids.items()}
    tags_of = {lesson.key: set(lesson.tags) for lesson in CORPUS}

    def keys(hits: list[dict[str, Any]]) -> set[str]:
        return {key_of[hit["id"]] for hit in hits}

    # One tag: exactly the lessons carrying it, however the query reads.
    hits = await recall(client, "slow queries and locking problems", tags=["postgres"], limit=50)
    assert keys(hits) == {k for k, t in tags_of.items() if "postgres" in t}
    assert all("postgres" in hit["tags"] for hit in hits)

    # Several tags: only lessons carrying all of them, even when the query is about something else.
    hits = await recall(client, "browser layout is broken", tags=["python", "packaging"], limit=50)
    expected = {k for k, t in tags_of.items() if {"python", "packaging"} <= t}
    assert len(expected) >= 3
    assert keys(hits) == expected
    assert not any("css" in hit["tags"] for hit in hits)

    # Tags are matched case-insensitively, as they are stored lower-cased.
    hits = await recall(client, "container shutdown", tags=["Docker"], limit=50)
    assert keys(hits) == {k for k, t in tags_of.items() if "docker" in t}

    # A tag no lesson has gives nothing.
    assert await recall(client, "database connection pool", tags=["no-such-tag"]) == []

    # min_confidence: nothing less certain comes back, and everything at least that certain can.
    confident = {k for k, c in confidence.items() if c >= 0.8}
    assert 0 < len(confident) <= 50
    hits = await recall(client, "production problem", min_confidence=0.8, limit=50)
    assert all(hit["confidence"] >= 0.8 for hit in hits)
    assert keys(hits) == confident

    # Both together: tagged and confident enough.
    hits = await recall(client, "database trouble", tags=["database"], min_confidence=0.6, limit=50)
    expected = {k for k, t in tags_of.items() if "database" in t and confidence[k] >= 0.6}
    assert expected
    assert keys(hits) == expected
    assert all("database" in hit["tags"] and hit["confidence"] >= 0.6 for hit in hits)

    # A threshold above every lesson gives nothing.
    assert await recall(client, "anything at all", min_confidence=0.99) == []


# -- near-duplicates and dialog turns (issue 13) ------------------------------------------------

_CONSUMER = "The Kafka consumer of {service} rebalances in a loop after librdkafka {version}"
_FIX = "Processing exceeded max.poll.interval.ms; {person} set max_poll_records to {number} in {path}."
_BASE = {
    "service": "billing-api",
    "version": "2.3.1",
    "person": "Sven",
    "number": "50",
    "path": "/etc/app/consumer.properties",
}
# Siblings that differ from the base lesson by one entity; the last two are another problem.
_CHANGES = (
    {},
    {"version": "2.3.4"},
    {"version": "2.4.0"},
    {"version": "3.2.1"},
    {"number": "5"},
    {"number": "500"},
    {"path": "/srv/conf/consumer.properties"},
    {"path": "/opt/kafka/consumer.properties"},
    {"service": "search-service"},
    {"service": "ledger-worker"},
    {"person": "Amara"},
    {"person": "Ines"},
)
SIBLINGS: tuple[tuple[str, str], ...] = (
    *((_CONSUMER.format(**{**_BASE, **c}), _FIX.format(**{**_BASE, **c})) for c in _CHANGES),
    *(
        (
            f"The Kafka consumer of billing-api processes messages twice after restarts since librdkafka {v}",
            "Offsets were committed before processing finished; Sven set commit_interval_ms to 50 "
            "in /etc/app/consumer.properties.",
        )
        for v in ("2.3.4", "2.4.0")
    ),
)
# Each question paraphrases the problem and names the entity that tells its sibling apart.
SIBLING_QUESTIONS: dict[str, int] = {
    "event stream reader keeps giving up its partitions since 2.3.4": 1,
    "partitions keep being reassigned after moving to librdkafka 3.2.1": 3,
    "consumer group churn where max_poll_records ended up at 5": 4,
    "the rebalancing loop where max_poll_records went to 500": 5,
    "the rebalancing loop configured through /opt/kafka/consumer.properties": 7,
    "stream reader losing its partitions on ledger-worker": 9,
    "what did Ines change when the consumer kept rebalancing?": 11,
}

# A dialog saved turn by turn, as the retrieval evaluation saves one: every turn carries the
# speaker and the date, and most turns are small talk that says nothing else.
_SMALL_TALK = (
    "Later!",
    "Morning! Got a minute?",
    "Always, go on.",
    "Ha, nice.",
    "Talk soon!",
    "Bye! Say hi to everyone.",
    "Did you watch the match last night?",
    "Only the second half.",
    "Right, dinner time.",
    "Same here, busy week.",
    "Did you find anything good in there?",
    "Anyway, I should go.",
)
_NEWS = (
    ("Bruno", "The bench is done! I used larch, and it took thirteen hours in the end."),
    ("Farid", "I finally started violin lessons. My teacher is a retired session player called Lenny."),
    ("Bruno", "My sister is getting married in Lisbon next spring."),
    (
        "Farid",
        "Big news: we are moving to Maple Heights next month, because the landlord is selling the building.",
    ),
    ("Bruno", "Honestly the team, and they let me bring my dog to the office."),
    ("Farid", "I did something impulsive: I signed up for the Lakeside 10K trail race."),
    ("Bruno", "We tried Pho Minh last Saturday. I had the crab linguine."),
)


def _dialog() -> tuple[tuple[int, str, str], ...]:
    """(day, speaker, text): a session a day, four turns of small talk (the two speakers in
    turn) and one piece of news each, then a last session of small talk only."""
    sessions = [[*_SMALL_TALK[i % 3 : i % 3 + 4], news] for i, news in enumerate(_NEWS)]
    sessions.append(list(_SMALL_TALK))
    turns = []
    for day, session in enumerate(sessions, start=1):
        for i, turn in enumerate(session):
            speaker, text = turn if isinstance(turn, tuple) else (("Bruno", "Farid")[i % 2], turn)
            turns.append((day, speaker, text))
    return tuple(turns)


DIALOG = _dialog()
DIALOG_QUESTIONS: dict[str, str] = {
    "What wood did Bruno use?": _NEWS[0][1],
    "Who teaches Farid music?": _NEWS[1][1],
    "Where will Bruno's sister get married?": _NEWS[2][1],
    "Which neighbourhood is Farid moving to?": _NEWS[3][1],
    "Why did Bruno accept the job offer?": _NEWS[4][1],
    "Which race did Farid enter?": _NEWS[5][1],
    "Which restaurant did Bruno try?": _NEWS[6][1],
}


@pytest.mark.model
async def test_near_duplicates_are_told_apart_by_the_entity_the_question_names(client: Client) -> None:
    ids = []
    for problem, resolution in SIBLINGS:
        saved = await call(client, "save_lesson", problem=problem, resolution=resolution, tags=["kafka"])
        assert saved["merged"] is False
        ids.append(saved["id"])
    for question, target in SIBLING_QUESTIONS.items():
        got = [hit["id"] for hit in await recall(client, question, limit=3)]
        assert ids[target] in got, f"{question!r}: {[ids.index(i) for i in got]}"


@pytest.mark.model
async def test_dialog_questions_find_the_turn_that_answers_not_the_speakers_small_talk(
    client: Client,
) -> None:
    said: dict[str, str] = {}
    for day, speaker, text in DIALOG:
        saved = await call(
            client,
            "save_lesson",
            problem=f"{speaker} on {day} March 2024: {text}",
            resolution=text,
            context=f"conversation c01, session {day}, Bruno with Farid",
            tags=["dialog"],
        )
        said[saved["id"]] = text
    assert len(said) == len(DIALOG)
    for question, answer in DIALOG_QUESTIONS.items():
        got = [said[hit["id"]] for hit in await recall(client, question, limit=3)]
        assert answer in got, f"{question!r}: {got}"
