"""The ranking's switches and limits, apart so ``terms`` can read them without a cycle."""

from __future__ import annotations

from dataclasses import dataclass

# At most about this many full-text matches are ranked per recall (see ranking.rare_terms).
POSTINGS_BUDGET = 2000
ANCHOR_SAMPLE = 128  # a scope's anchor is the mean of (at most) this many of its newest live lessons


@dataclass(frozen=True)
class RankingParams:
    """Switches so the evaluation can measure each part; defaults are what Lore ships."""

    half_life_days: float = 30.0
    entity_terms: bool = True  # numbers (single digits too), versions, identifiers and paths are query terms
    max_terms: int = 48  # at most this many query terms count (long questions name the telling entity late)
    # Words about lessons ("root cause", "fix") are not terms: they tell no lesson apart.
    meta_stopwords: bool = True
    # A number inside a version or path ("3" in "3.8.1") also counts as that number.
    compound_digits: bool = False
    # Words match after a light suffix stripping ("queries" is "query"), not only by prefix.
    stemming: bool = True
    rarity: bool = True  # terms weigh by their rarity among the candidates (else every term weighs the same)
    nearest_pool: bool = True  # rarity is counted among the nearest vectors only (else among all candidates)
    names: bool = True  # capitalised words inside a sentence are names, and weigh as entities
    # Extra weight of entities: terms with a digit, identifiers, paths, names (1.0: none).
    entity_weight: float = 3.0
    centring: bool = True  # vector similarity is measured from the scope's anchor (anchor), not the origin
    vector_weight: float = 0.75
    lexical_weight: float = 0.25
    min_candidates: int = 50  # each signal contributes at least this many candidates
    # Full-text candidates ordered by entities too (``candidate_terms``): the one with the question's number first.
    lexical_entities: bool = True
    # Entities within budget find full-text candidates before rarer words (``rare_terms``).
    entities_first: bool = True
    # Total postings the full-text candidates' terms may have (``rare_terms``).
    postings_budget: int = POSTINGS_BUDGET
    # A question whose every term is over the budget still searches its rarest (docs/ranking.md).
    rarest_over_budget: bool = True
    # An unpooled word joins its lesson's total too, raising a score without saturating it.
    open_total: bool = True
    # Factor for a sibling of a better candidate (1.0: none), so one answer does not fill the list.
    redundancy_penalty: float = 0.8
    # Two candidates are that alike when their words overlap at least this much (Jaccard).
    redundancy_overlap: float = 0.5


# The ranking before issue 13: every word the same, no digits or identifiers, 16 terms.
LEGACY = RankingParams(
    centring=False,
    names=False,
    entity_weight=1.0,
    entity_terms=False,
    max_terms=16,
    meta_stopwords=False,
    compound_digits=True,
    stemming=False,
    rarity=False,
    open_total=False,
    redundancy_penalty=1.0,
    lexical_entities=False,
    entities_first=False,
)
DEFAULT = RankingParams()
