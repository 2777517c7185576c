"""``benchmarks/sets/team_chat``: a conversational evaluation set whose answers are decided by its slots.

Everything is recomputed here from what ``build`` returns (the lessons' and questions' slots), so a
generator bug that plants a second right turn, or dates a "when" answer wrongly, fails a test.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date, timedelta
from functools import cache

from benchmarks.sets.team_chat import KINDS, build

SEED = 7
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")


@cache
def corpus(seed: int = SEED) -> dict[str, list[dict]]:
    return build(size=12, questions=500, seed=seed)


def by_key() -> dict[str, dict]:
    return {lesson["key"]: lesson for lesson in corpus()["lessons"]}


def test_keys_and_ids_are_unique() -> None:
    lessons, questions = corpus()["lessons"], corpus()["questions"]
    assert len({lesson["key"] for lesson in lessons}) == len(lessons)
    assert len({q["id"] for q in questions}) == len(questions) == 500


def test_lessons_have_the_save_shape() -> None:
    for lesson in corpus()["lessons"]:
        assert (
            lesson["problem"]
            == f"{lesson['slots']['speaker']} ({lesson['created_at'][:10]}): {lesson['resolution']}"
        )
        assert lesson["context"].startswith(
            f"chat {lesson['project']}, session {lesson['slots']['session']}, "
        )
        assert lesson["tags"] == ["chat"]


def test_evidence_exists_and_belongs_to_the_question_project() -> None:
    lessons = by_key()
    for q in corpus()["questions"]:
        assert len(q["evidence"]) == (
            0 if q["kind"] == "unanswerable" else 2 if q["kind"] == "two-turn" else 1
        )
        for key in q["evidence"] + q.get("trap", []):
            assert lessons[key]["project"] == q["project"]


def test_every_kind_occurs_in_its_share() -> None:
    counts = Counter(q["kind"] for q in corpus()["questions"])
    assert set(counts) == set(KINDS)
    assert min(counts.values()) >= 50


def test_the_slots_decide_exactly_one_right_turn() -> None:
    """No other turn of the project holds the fact and key the question asks (updates: the latest does)."""
    holders: dict[tuple[str, str, str], list[dict]] = {}
    for lesson in corpus()["lessons"]:
        if lesson["slots"]["fact"]:
            holders.setdefault(
                (lesson["project"], lesson["slots"]["fact"], lesson["slots"]["key"]), []
            ).append(lesson)
    for q in corpus()["questions"]:
        key = "|".join(v for k, v in q["asks"].items() if k != "fact")
        found = holders.get((q["project"], q["asks"]["fact"], key), [])
        if q["kind"] == "unanswerable":
            assert found == [] and q["trap"], q
        elif q["kind"] == "update":
            latest = max(found, key=lambda lesson: lesson["created_at"])
            assert q["evidence"] == [latest["key"]] and len(found) >= 2
            assert set(q["trap"]) == {lesson["key"] for lesson in found} - {latest["key"]}
            assert q["answer"] in latest["problem"]  # on-call: the speaker is the answer
            if q["asks"]["fact"] != "oncall":
                said = rf"\b{re.escape(q['answer'])}\b"
                assert not any(
                    re.search(said, lesson["resolution"]) for lesson in found if lesson is not latest
                )
        else:
            assert sorted(lesson["key"] for lesson in found) == sorted(q["evidence"]), q


def test_unanswerable_keys_are_never_said_in_the_chat() -> None:
    text: dict[str, str] = {}
    for lesson in corpus()["lessons"]:
        text[lesson["project"]] = text.get(lesson["project"], "") + " " + lesson["resolution"].lower()
    for q in corpus()["questions"]:
        if q["kind"] == "unanswerable":
            for name in [v for k, v in q["asks"].items() if k not in ("fact", "me")]:
                assert not re.search(rf"\b{re.escape(name.lower())}\b", text[q["project"]]), q


def resolve(phrase: str, said: date) -> date:
    """The test's own reading of a relative date (next/last <weekday> exclude the day itself)."""
    words = phrase.split()
    if words[0] in ("next", "last") and words[1].lower() in DAYS:
        step = 1 if words[0] == "next" else -1
        day = said + timedelta(days=step)
        while day.strftime("%A").lower() != words[1].lower():
            day += timedelta(days=step)
        return day
    offsets = {"this morning": 0, "later today": 0, "yesterday": -1, "the day before yesterday": -2}
    offsets |= {"tomorrow": 1, "in three days": 3, "two weeks from today": 14}
    return said + timedelta(days=offsets[phrase])


def test_when_answers_follow_from_the_evidence_turn() -> None:
    lessons = by_key()
    whens = [q for q in corpus()["questions"] if q["kind"] == "when"]
    for q in whens:
        turn = lessons[q["evidence"][0]]
        assert q["slots"]["base_date"] == turn["created_at"][:10]
        assert q["slots"]["relative"] in turn["resolution"]
        assert (
            q["answer"]
            == resolve(q["slots"]["relative"], date.fromisoformat(turn["created_at"][:10])).isoformat()
        )
    assert len({q["slots"]["relative"] for q in whens}) >= 8


def test_two_turn_questions_name_one_turn_and_the_answer_is_in_the_other() -> None:
    lessons = by_key()
    for q in corpus()["questions"]:
        if q["kind"] == "two-turn":
            first, second = (lessons[k] for k in q["evidence"])
            assert first["created_at"] < second["created_at"]
            assert q["answer"] in second["resolution"] and q["answer"] not in first["resolution"]
            assert (
                q["slots"]["person"] in first["resolution"] and q["slots"]["person"] in second["resolution"]
            )
            assert q["slots"]["person"] not in q["text"]


def test_created_at_follows_session_and_turn_order() -> None:
    per_project: dict[str, list[dict]] = {}
    for lesson in corpus()["lessons"]:
        per_project.setdefault(lesson["project"], []).append(lesson)
    assert len(per_project) == 12
    for lessons in per_project.values():
        order = sorted(
            lessons, key=lambda lesson: (int(lesson["slots"]["session"]), int(lesson["slots"]["turn"]))
        )
        times = [lesson["created_at"] for lesson in order]
        assert times == sorted(times) and len(set(times)) == len(times)
        sessions = Counter(lesson["slots"]["session"] for lesson in lessons)
        assert 20 <= len(sessions) <= 40 and all(6 <= n <= 16 for n in sessions.values())
        assert len({lesson["created_at"][:10] for lesson in lessons}) == len(sessions)


def test_a_seed_gives_one_corpus_and_another_seed_another() -> None:
    assert build(size=12, questions=500, seed=SEED) == corpus()
    other = corpus(SEED + 1)
    assert other["lessons"] != corpus()["lessons"] and other["questions"] != corpus()["questions"]


def test_few_turns_repeat_word_for_word() -> None:
    lessons = corpus()["lessons"]
    problems = {" ".join(lesson["problem"].lower().split()) for lesson in lessons}
    turns = Counter(" ".join(lesson["resolution"].lower().split()) for lesson in lessons)
    assert len(problems) == len(lessons)
    assert sum(n - 1 for n in turns.values()) / len(lessons) < 0.01
