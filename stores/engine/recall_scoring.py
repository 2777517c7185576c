"""The end of every backend's recall: candidate rows in, ranked lessons out, so both rank alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from stores.engine import ranking
from stores.engine.lesson_tx import lesson_of
from stores.engine.lessons import RecallQuery, Scope, ScoredLesson, WordMatches


class TwoStepRecall:
    """``recall``: words first, then vectors (awaited); a backend supplies ``_word_keys``, ``rank``."""

    _ranking: ranking.RankingParams

    def recall(self, scope: Scope, query: RecallQuery) -> list[ScoredLesson]:
        return self.rank(scope, query, self.match_words(scope, query))

    def match_words(self, scope: Scope, query: RecallQuery) -> WordMatches:
        """Recall's full-text candidates: they need no vector, so they are found while it embeds."""
        now = query.now or datetime.now(UTC)
        k = ranking.candidate_count(query.limit, self._ranking)
        terms = ranking.lexical_terms(query.text, params=self._ranking)
        keys = self._word_keys(scope, query, terms, k, now) if terms else []
        return WordMatches(terms=tuple(terms), keys=tuple(keys), now=now)

    def _word_keys(
        self, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Row keys of the best full-text matches of ``terms``, at most ``k``."""
        raise NotImplementedError

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> list[ScoredLesson]:
        raise NotImplementedError


def scored_lessons(
    rows: Sequence[Mapping[str, Any]],
    query: RecallQuery,
    terms: list[str],
    now: datetime,
    params: ranking.RankingParams,
) -> list[ScoredLesson]:
    """The best ``rows`` (``near``: found by vector), best first; only those become lessons."""
    kept = [row for row in rows if row["confidence"] >= query.min_confidence]
    by_id = {row["id"]: row for row in kept}
    candidates = [
        (
            row["id"],
            row["sim"],
            ranking.weight(
                updated_at=row["updated_at"],
                now=now,
                confidence=row["confidence"],
                upvotes=row["upvotes"],
                downvotes=row["downvotes"],
                params=params,
            ),
            " ".join((row["problem"], row["resolution"], row["context"] or "", " ".join(row["tags"]))),
        )
        for row in kept
    ]
    nearest = {row["id"] for row in kept if row["near"]}
    best = ranking.best(candidates, terms, query.limit, params, nearest, ranking.names(query.text, params))
    return [ScoredLesson(lesson=lesson_of(by_id[i]), score=score) for i, score in best]
