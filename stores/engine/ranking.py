"""How recall ranks lessons, shared by every backend so they agree.

``relevance = 0.75 * similarity + 0.25 * lexical``: the cosine of the lesson's vector to the query's, seen
from the scope's anchor, and the rarity-weighted share of the query's terms in the lesson's text
(``stores.engine.terms``). The full-text index (FTS5, tsvector) only finds candidates; scores are computed
here, so they are the same on every backend. Final scores multiply relevance by bounded factors (``weight``),
so weak signals decide near-ties but never bury a strong match.

Rarity: a term weighs its BM25 IDF among the recall's nearest vectors (not the full-text matches, which the
backends' indexes find differently), so the entity only the right lesson has weighs most; entities (digits,
identifiers, paths, names) weigh triple. Redundancy: a candidate with the same query terms as a better nearest
one, whose words overlap it by half (Jaccard), differs only in what the question does not ask; its score times
0.8 keeps one answer said six ways from pushing out the one asked for. Anchor: similarity is measured from the
mean of the scope's newest lessons, as a project's lessons share a direction and a short lesson, mostly that
direction, looked like every question. Each part was measured with ``benchmarks/eval_retrieval.py`` and is a
``RankingParams`` switch; ``LEGACY`` is the ranking before them."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime

import numpy as np

from stores.engine.ranking_params import ANCHOR_SAMPLE, DEFAULT, LEGACY, POSTINGS_BUDGET, RankingParams
from stores.engine.terms import Matcher, is_entity, lexical_terms, names, vocabulary

# Re-exported: the backends and the evaluation use them as ``ranking.<name>``.
__all__ = ["ANCHOR_SAMPLE", "DEFAULT", "LEGACY", "POSTINGS_BUDGET", "RankingParams", "is_entity"]
__all__ += ["lexical_terms", "names"]


def candidate_count(limit: int, params: RankingParams = DEFAULT) -> int:
    """How many candidates each signal contributes before the final ordering."""
    return max(params.min_candidates, limit * 5)


def query_entities(terms: list[str], names: Collection[str], params: RankingParams) -> set[str]:
    """The terms ``rare_terms`` takes first (none unless ``entities_first``)."""
    return {t for t in terms if is_entity(t, names)} if params.entities_first else set()


def candidate_terms(
    chosen: list[str], terms: list[str], names: Collection[str], params: RankingParams
) -> list[str]:
    """``chosen`` (which bound the work) plus the query's entities, to order full-text candidates;
    common words are left out, as the index would read all their postings to weigh them."""
    if not params.lexical_entities:
        return chosen
    return chosen + [t for t in terms if t not in chosen and is_entity(t, names)]


def full_text_terms(
    text: str, terms: list[str], postings: dict[str, float], params: RankingParams
) -> tuple[list[str], list[str]]:
    """The terms that find full-text candidates (``rare_terms``) and order them (``candidate_terms``)."""
    said = names(text, params)
    entities = query_entities(terms, said, params)
    chosen = rare_terms(terms, postings, params.postings_budget, entities, rarest=params.rarest_over_budget)
    return chosen, candidate_terms(chosen, terms, said, params)


def rare_terms(
    terms: list[str],
    postings: dict[str, float],
    budget: int = POSTINGS_BUDGET,
    entities: Collection[str] = (),
    rarest: bool = True,
) -> list[str]:
    """Terms finding lexical candidates, rarest first while their postings fit ``budget`` (``rarest``:
    the first even over it): ranking every match of a common word costs more than the rest of recall.
    ``entities`` come first: a question paraphrases a lesson's words but repeats its numbers and names."""
    present = sorted((t for t in terms if postings.get(t)), key=postings.__getitem__)
    first = [t for t in present if t in entities and postings[t] <= budget]
    chosen: list[str] = []
    total = 0.0
    for term in first + [t for t in present if t not in first]:
        if (chosen or not rarest) and total + postings[term] > budget:
            break
        chosen.append(term)
        total += postings[term]
    return chosen


def anchor(sample: np.ndarray) -> np.ndarray:
    """The rows' sum over their number plus one, so a one-lesson scope is not centred onto its lesson."""
    rows = np.asarray(sample, dtype=np.float64)
    mean: np.ndarray = rows.sum(axis=0) / (rows.shape[0] + 1)
    return mean.astype(np.float32)


def centred_similarities(query: np.ndarray, vectors: np.ndarray, origin: np.ndarray) -> list[float | None]:
    """Each ``vectors`` row's cosine to ``query`` seen from ``origin`` (None at it); see Anchor."""
    q = np.asarray(query, dtype=np.float32) - origin
    m = np.asarray(vectors, dtype=np.float32) - origin
    norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
    return [float(d / n) if n > 0 else None for d, n in zip(m @ q, norms, strict=True)]


def relevance(similarity: float | None, lexical: float, params: RankingParams = DEFAULT) -> float:
    """Blend cosine similarity (None when the vector is unknown) and the lexical score (0..1)."""
    vec = max(0.0, min(1.0, similarity)) if similarity is not None and similarity == similarity else 0.0
    return params.vector_weight * vec + params.lexical_weight * lexical


def coverage(terms: list[str], text: str) -> float:
    """Share of the query ``terms`` that occur in ``text``, every term weighing the same."""
    if not terms:
        return 0.0
    found = Matcher(terms, LEGACY).found(text)
    return sum(1 for t in terms if t in found) / len(terms)


def _lexical(
    texts: Sequence[str],
    terms: list[str],
    params: RankingParams,
    pool: Sequence[bool] | None,
    names: Collection[str],
) -> tuple[list[float], list[set[str]]]:
    """Each text's lexical score (0..1), the weight of its terms over the pool's and the query's
    entities, and the terms it has. A word no pooled text has counts only where found, so pooled
    texts score alike whatever else is a candidate (``open_total``: in that text's total too)."""
    if not terms or not texts:
        return [0.0] * len(texts), [set() for _ in texts]
    matcher = Matcher(terms, params)
    found = [matcher.found(text) for text in texts]
    counted = (
        [f for f, inside in zip(found, pool, strict=True) if inside] if pool is not None else []
    ) or found
    n, df = len(counted), Counter(t for f in counted for t in f)
    weights: dict[str, float] = {}
    for term in dict.fromkeys(terms):  # weighed by rarity among the ``counted`` texts
        w = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5)) if params.rarity else 1.0
        weights[term] = w * params.entity_weight if is_entity(term, names) else w
    if not params.rarity:
        total = sum(weights.values())
        return [min(1.0, sum(weights[t] for t in f) / total) for f in found], found
    # Entities count even where the pool lacks them: they still tell the lesson that has them.
    counted_terms = {t for t in weights if df[t] or is_entity(t, names)}
    total = sum(weights[t] for t in counted_terms) or max(weights.values())
    if not params.open_total:
        return [min(1.0, sum(weights[t] for t in f) / total) for f in found], found
    return [
        sum(weights[t] for t in f) / (total + sum(weights[t] for t in f if t not in counted_terms))
        for f in found
    ], found


def best(
    candidates: Sequence[tuple[str, float | None, float, str]],
    terms: list[str],
    limit: int,
    params: RankingParams = DEFAULT,
    nearest: Collection[str] | None = None,
    names: Collection[str] = (),
) -> list[tuple[str, float]]:
    """The ``limit`` best (id, similarity, weight, text) ``candidates`` as (id, score rounded to 6
    places), ties to the smaller id; rarity counts among ``nearest`` (all if None)."""
    pool = [c[0] in nearest for c in candidates] if nearest is not None and params.nearest_pool else None
    lexical, found = _lexical([c[3] for c in candidates], terms, params, pool, names)
    scores = [
        relevance(sim, lex, params) * factor
        for (_, sim, factor, _), lex in zip(candidates, lexical, strict=True)
    ]
    if params.redundancy_penalty < 1.0:
        scores = _demote_redundant(candidates, scores, found, pool, limit, params)
    scored = sorted((-round(score, 6), c[0]) for c, score in zip(candidates, scores, strict=True))
    return [(lesson_id, -negated) for negated, lesson_id in scored[:limit]]


def _demote_redundant(
    candidates: Sequence[tuple[str, float | None, float, str]],
    scores: list[float],
    found: list[set[str]],
    pool: Sequence[bool] | None,
    limit: int,
    params: RankingParams,
) -> list[float]:
    """Scores with redundant candidates demoted (see Redundancy) by ``pool`` ones; the walk stops
    after ``limit`` undemoted ones, as every later one scores below them either way."""
    order = sorted(range(len(candidates)), key=lambda i: (-round(scores[i], 6), candidates[i][0]))
    kept: dict[frozenset[str], list[frozenset[str]]] = {}  # query terms -> words of kept candidates
    out = list(scores)
    undemoted = 0
    for i in order:
        if undemoted == limit:
            break
        terms = frozenset(found[i])
        words = vocabulary(candidates[i][3], False, False)
        if any(_overlap(words, other) >= params.redundancy_overlap for other in kept.get(terms, ())):
            out[i] = scores[i] * params.redundancy_penalty
            continue
        undemoted += 1
        if pool is None or pool[i]:
            kept.setdefault(terms, []).append(words)
    return out


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two word sets."""
    shared = len(a & b)
    union = len(a) + len(b) - shared
    return shared / union if union else 1.0


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
