"""The shared ranking helpers: the short cuts recall takes must not change its answer."""

from __future__ import annotations

import random

from stores import ranking

WORDS = "kafka rebalance consumer timeout retry webhook signature stripe pool socket".split()


def exhaustive(candidates, terms, limit):
    """Every candidate scored, the way recall ranked before ``ranking.best``."""
    scored = [
        (round(ranking.relevance(sim, ranking.coverage(terms, text)) * factor, 6), lesson_id)
        for lesson_id, sim, factor, text in candidates
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [(lesson_id, score) for score, lesson_id in scored[:limit]]


def test_best_gives_what_scoring_every_candidate_gives() -> None:
    rng = random.Random(7)
    for trial in range(300):
        terms = rng.sample(WORDS, rng.randint(0, 4))
        candidates = []
        for i in range(rng.randint(0, 60)):
            # Coarse values make exact ties (same score, ids decide) common.
            sim = None if rng.random() < 0.2 else rng.choice([0.1, 0.3, 0.5, 0.5, 0.7, 0.9, 1.2, -0.1])
            factor = rng.choice([0.25, 0.5, 0.75, 1.0, 1.2])
            text = " ".join(rng.sample(WORDS, rng.randint(0, 5)))
            candidates.append((f"id{rng.randint(0, 40):02d}-{i}", sim, factor, text))
        limit = rng.randint(1, 8)
        assert ranking.best(candidates, terms, limit) == exhaustive(candidates, terms, limit), trial


def test_rare_terms_fill_the_budget_rarest_first() -> None:
    terms = ["common", "rare", "middling", "absent", "stopword"]
    postings = {"common": 5000.0, "rare": 3.0, "middling": 900.0, "absent": 0.0, "stopword": None}
    assert ranking.rare_terms(terms, postings, budget=1000) == ["rare", "middling"]
    assert ranking.rare_terms(terms, postings, budget=10_000) == ["rare", "middling", "common"]
    # The rarest term is searched even when it alone is over the budget.
    assert ranking.rare_terms(["common", "absent"], postings, budget=10) == ["common"]
    assert ranking.rare_terms(["absent", "stopword"], postings) == []
