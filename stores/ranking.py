"""How recall ranks lessons, shared by every backend so they agree.

A lesson's relevance blends two signals: cosine similarity of its vector to the
query vector, and its rank in the lexical (full-text) match. Ranks rather than raw
lexical scores are used because SQLite's bm25 and Postgres's ts_rank live on
different scales; ranks are comparable across backends.

The final score multiplies relevance by three bounded factors, so a strongly
relevant lesson is never buried by weak signals, while ties and near-ties are
decided by freshness, confidence and the crowd:

- decay: ``0.5 + 0.5 * 2 ** (-age_days / half_life_days)`` (1.0 new, 0.75 at one
  half-life, never below 0.5);
- confidence: ``0.5 + 0.5 * confidence``;
- votes: ``1 + 0.2 * tanh((upvotes - downvotes) / 3)`` (between 0.8 and 1.2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

VECTOR_WEIGHT = 0.75
LEXICAL_WEIGHT = 0.25
# Lexical rank r contributes (K + 1) / (K + r): 1.0 for the best match, fading with rank.
LEXICAL_RANK_K = 5


@dataclass(frozen=True)
class RankingParams:
    """Knobs for the final score; ``half_life_days`` comes from LORE_DECAY_HALF_LIFE_DAYS."""

    half_life_days: float = 30.0


def candidate_count(limit: int) -> int:
    """How many candidates each signal contributes before the final ordering."""
    return max(50, limit * 5)


def relevance(similarity: float | None, lexical_rank: int | None) -> float:
    """Blend cosine similarity (None when not a vector candidate) and a 1-based lexical rank."""
    vec = max(0.0, min(1.0, similarity)) if similarity is not None else 0.0
    lex = (LEXICAL_RANK_K + 1) / (LEXICAL_RANK_K + lexical_rank) if lexical_rank is not None else 0.0
    return VECTOR_WEIGHT * vec + LEXICAL_WEIGHT * lex


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
    seen: dict[str, None] = {}
    word = []
    for ch in text.lower() + " ":
        if ch.isalnum():
            word.append(ch)
            continue
        if word:
            term = "".join(word)
            word = []
            if len(term) > 1 and term not in _STOPWORDS:
                seen.setdefault(term, None)
    return list(seen)[:max_terms]


def merge_ranked(
    vector_hits: Iterable[tuple[int, float]], lexical_hits: Iterable[int]
) -> dict[int, tuple[float | None, int | None]]:
    """Union of both candidate lists: key -> (similarity or None, lexical rank or None)."""
    merged: dict[int, tuple[float | None, int | None]] = {}
    for key, sim in vector_hits:
        merged[key] = (sim, None)
    for rank, key in enumerate(lexical_hits, start=1):
        sim = merged.get(key, (None, None))[0]
        merged[key] = (sim, rank)
    return merged


# Common English words that match nearly every lesson and only slow lexical search down.
_STOPWORDS = frozenset(
    """a an and are as at be but by can do does for from had has have how i if in into is it its me my no not of on or our so that the their them then there
    these they this to was we were what when where which while who why will with you your""".split()  # noqa: SIM905
)
