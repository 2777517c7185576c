"""How recall ranks lessons, shared by every backend so they agree.

A lesson's relevance blends two signals: cosine similarity of its vector to the
query vector, and lexical coverage, the share of the query's words found in the
lesson's text. The full-text index (FTS5 on SQLite, tsvector on Postgres) only
finds lexical candidates; the score itself is computed here, from the text, so it
is the same on every backend. Coverage rather than a rank is used because the
best lexical match of a long query often shares one incidental word with it,
and a rank would give that match full marks.

The final score multiplies relevance by three bounded factors, so a strongly
relevant lesson is never buried by weak signals, while ties and near-ties are
decided by freshness, confidence and the crowd:

- decay: ``0.5 + 0.5 * 2 ** (-age_days / half_life_days)`` (1.0 new, 0.75 at one
  half-life, never below 0.5);
- confidence: ``0.5 + 0.5 * confidence``;
- votes: ``1 + 0.2 * tanh((upvotes - downvotes) / 3)`` (between 0.8 and 1.2).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

VECTOR_WEIGHT = 0.75
LEXICAL_WEIGHT = 0.25
# Words sharing their first STEM letters count as the same word ("rebalance", "rebalancing"):
# a crude stemmer that behaves identically everywhere.
STEM = 5
# At most about this many full-text matches are ranked per recall (see rare_terms).
POSTINGS_BUDGET = 2000


@dataclass(frozen=True)
class RankingParams:
    """Knobs for the final score; ``half_life_days`` comes from LORE_DECAY_HALF_LIFE_DAYS."""

    half_life_days: float = 30.0


def candidate_count(limit: int) -> int:
    """How many candidates each signal contributes before the final ordering."""
    return max(50, limit * 5)


def rare_terms(terms: list[str], postings: dict[str, float], budget: int = POSTINGS_BUDGET) -> list[str]:
    """The query terms that find lexical candidates: the rarest first, while their
    postings (matching lessons, counted or estimated) fit ``budget``.

    Common words match a large share of all lessons, and ranking every match costs
    more than the whole rest of recall, so candidates come from the rare terms;
    every term still counts in the score's coverage. The rarest term is always
    chosen, whatever its postings. Terms with no postings (zero or None) are left out.
    """
    chosen: list[str] = []
    total = 0.0
    for term in sorted((t for t in terms if postings.get(t)), key=postings.__getitem__):
        if chosen and total + postings[term] > budget:
            break
        chosen.append(term)
        total += postings[term]
    return chosen


def relevance(similarity: float | None, coverage: float) -> float:
    """Blend cosine similarity (None when the vector is unknown) and lexical coverage (0..1)."""
    vec = max(0.0, min(1.0, similarity)) if similarity is not None else 0.0
    return VECTOR_WEIGHT * vec + LEXICAL_WEIGHT * coverage


def coverage(terms: list[str], text: str) -> float:
    """Share of the query ``terms`` (from ``lexical_terms``) that occur in ``text``."""
    if not terms:
        return 0.0
    words = set(_words(text))
    stems = {w[:STEM] for w in words if len(w) >= STEM}
    hits = sum(1 for t in terms if t in words or (len(t) >= STEM and t[:STEM] in stems))
    return hits / len(terms)


def best(
    candidates: Sequence[tuple[str, float | None, float, str]], terms: list[str], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` best of ``candidates``, each (id, similarity, weight, text), as
    (id, score) best first; scores are rounded to 6 places and ties go to the smaller id.

    Coverage is the costly part of a score, and most candidates cannot reach the top:
    candidates are visited by the score they would have with full coverage, and the
    visit stops once that bound falls below the last place.
    """
    full = 1.0 if terms else 0.0
    bounded = sorted(candidates, key=lambda c: -relevance(c[1], full) * c[2])
    top: list[tuple[float, str]] = []  # (-score, id): best first
    for lesson_id, similarity, factor, text in bounded:
        if len(top) >= limit and relevance(similarity, full) * factor < -top[-1][0] - 1e-6:
            break  # (the margin covers the rounding: no later candidate can tie the last place)
        score = round(relevance(similarity, coverage(terms, text)) * factor, 6)
        bisect.insort(top, (-score, lesson_id))
        del top[limit:]
    return [(lesson_id, -negated) for negated, lesson_id in top]


def weight(
    *,
    updated_at: datetime,
    now: datetime,
    confidence: float,
    upvotes: int,
    downvotes: int,
    params: RankingParams,
) -> float:
    """The multiplier applied to relevance: decay x confidence x votes."""
    age_days = max(0.0, (now - updated_at).total_seconds() / 86_400)
    decay = 0.5 + 0.5 * 2 ** (-age_days / params.half_life_days)
    conf = 0.5 + 0.5 * confidence
    votes = 1 + 0.2 * math.tanh((upvotes - downvotes) / 3)
    return decay * conf * votes


def lexical_terms(text: str, max_terms: int = 16) -> list[str]:
    """Words of a query worth matching lexically: lower-cased, de-duplicated, no stopwords."""
    terms = dict.fromkeys(w for w in _words(text) if len(w) > 1 and w not in _STOPWORDS)
    return list(terms)[:max_terms]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_WORD = re.compile(r"[^\W_]+")

# Common English words that match nearly every lesson and only slow lexical search down.
_STOPWORDS = frozenset(
    """a an and are as at be but by can do does for from had has have how i if in into is it its me my no not of on or our so that the their them then there
    these they this to was we were what when where which while who why will with you your
    about after again all also any before been being did does doing just more most only other
    out over same some such than too up very get gets got one""".split()
)
