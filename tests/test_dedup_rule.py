"""The merge rule itself: a new lesson merges only when it adds nothing (stores.dedup)."""

from __future__ import annotations

import pytest

from stores.dedup import adds_nothing, content_tokens, merge_target, normalised

BASE = (
    "Redis client of billing-api times out during failover in staging",
    "Set the client's retry_on_timeout and reconnect to the new primary after failover.",
    None,
)


def with_problem(problem: str) -> tuple[str, str, str | None]:
    return (problem, BASE[1], BASE[2])


@pytest.mark.parametrize(
    "variant",
    [
        # one service name, environment, version, number, path or person apart
        "Redis client of search-service times out during failover in staging",
        "Redis client of billing-api times out during failover in production",
        "Redis client 5.0.1 of billing-api times out during failover in staging",
        "Redis client of billing-api times out after 30 seconds during failover in staging",
        "Redis client of billing-api times out during failover in staging reading /etc/redis/sentinel.conf",
        "Redis client of billing-api times out during failover in staging, reported by Priya",
        "Redis client of billing-api does not time out during failover in staging",
    ],
)
def test_a_lesson_that_differs_by_one_entity_adds_something(variant: str) -> None:
    assert not adds_nothing(with_problem(variant), BASE)


@pytest.mark.parametrize(
    "variant",
    [
        "redis client of BILLING-API times out during failover in staging",
        "Redis   client of billing-api\ttimes out during failover in staging.",
        "Redis client of billing-api times out during failover, in staging!",
    ],
)
def test_the_same_text_in_other_case_spacing_and_punctuation_adds_nothing(variant: str) -> None:
    assert adds_nothing(with_problem(variant), BASE)


def test_a_shorter_restatement_of_a_stored_lesson_adds_nothing() -> None:
    shorter = ("Redis client of billing-api times out in staging", "Set retry_on_timeout.", None)
    assert adds_nothing(shorter, BASE)


def test_a_new_context_adds_something_even_when_the_text_is_the_same() -> None:
    assert not adds_nothing((BASE[0], BASE[1], "Only with redis-py 4.6 on Kubernetes"), BASE)
    assert adds_nothing((BASE[0], BASE[1], "in staging"), BASE)


def test_a_compound_and_its_loose_parts_do_not_cover_each_other() -> None:
    stored = ("billing api times out in staging", "retry", None)
    assert not adds_nothing(("billing-api times out", "retry", None), stored)
    compound = ("billing-api times out in staging", "retry", None)
    assert not adds_nothing(("billing api times out", "retry", None), compound)


def test_a_number_inside_a_version_does_not_cover_the_same_number_alone() -> None:
    stored = ("indexer fails after the upgrade to 6.20.8", "batch size is now 8", None)
    assert not adds_nothing(
        ("indexer fails after the upgrade to 6.20.8", "batch size is now 20", None), stored
    )


def test_function_words_carry_nothing_but_negations_do() -> None:
    assert "the" not in content_tokens("the cache")
    assert {"not", "never", "no"} <= content_tokens("not never no")


def test_normalised_ignores_case_spacing_and_punctuation_only() -> None:
    assert normalised("  Hello,   WORLD! ") == normalised("hello world")
    assert normalised("v1.2") != normalised("v1.3")


def test_merge_target_takes_the_most_similar_candidate_that_loses_nothing() -> None:
    same = with_problem(BASE[0].upper())
    other = with_problem("Redis client of search-service times out during failover in staging")
    candidates = [("other", 0.99, other), ("same-a", 0.95, BASE), ("same-b", 0.97, BASE)]
    assert merge_target(same, candidates) == "same-b"
    assert merge_target(other, [("base", 0.99, BASE)]) is None
    assert merge_target(same, []) is None
