"""How recall ranks lessons, shared by every backend so they agree.

A lesson's relevance blends two signals: cosine similarity of its vector to the
query vector, seen from the scope's anchor, and a lexical score, the rarity-weighted
share of the query's terms found in the lesson's text:
``relevance = 0.75 * similarity + 0.25 * lexical``. The full-text index (FTS5 on
SQLite, tsvector on Postgres) only finds lexical candidates; the score itself is
computed here, from the candidates' text and vectors, so it is the same on every
backend.

Terms and how a text matches them: ``stores.engine.terms``.

Rarity: a term weighs its BM25 inverse document frequency among the recall's
nearest vectors, the lessons the query is choosing between: a word every one of them
shares (the component, the speaker's name) weighs little, the one entity only the
right lesson has weighs most. Entities (terms with a digit, identifiers, paths, and
names: capitalised words inside a sentence) weigh triple. The lexical score is the
weight of the terms a lesson has over the weight of the terms the nearest lessons
have plus the query's entities; a word no nearest lesson has counts, where a lesson
has it, in both that lesson's part and its total, so it raises the score without
saturating it at 1 and a lesson that also has the asked-for environment still
outranks one that lacks it. Counting
among the nearest vectors only, not the full-text matches, keeps both backends'
scores equal: their full-text indexes split and stem words differently, so they find
different full-text candidates.

Redundancy (``redundancy_penalty``): going down the ranking, a candidate with the same
query terms as a better nearest-vector candidate already kept, whose words overlap that
one's by half or more (Jaccard), is a sibling that differs only in what the question
does not ask about (another service, environment, speaker's aside); its score is
multiplied by 0.8, so one answer said six ways does not fill the list and push out the
lesson that is actually asked for. Only nearest candidates demote, so a candidate's
score still depends only on itself and the nearest vectors.

Anchor (``anchor``, ``centred_similarities``): similarity is measured from the mean
of the scope's newest lessons rather than from the origin. Every lesson of a project
shares a direction (the speakers' names and dates of a dialog, a team's templates);
a short lesson is mostly that direction and so looked like every question.

The final score multiplies relevance by three bounded factors, so a strongly
relevant lesson is never buried by weak signals, while ties and near-ties are
decided by freshness, confidence and the crowd:

- decay: ``0.5 + 0.5 * 2 ** (-age_days / half_life_days)`` (1.0 new, 0.75 at one
  half-life, never below 0.5);
- confidence: ``0.5 + 0.5 * confidence``;
- votes: ``1 + 0.2 * tanh((upvotes - downvotes) / 3)`` (between 0.8 and 1.2).

Every part was measured with ``benchmarks/eval_retrieval.py``
(``benchmarks/eval-ablation.json``); each is a switch in ``RankingParams`` so that
evaluation can turn it off, and ``LEGACY`` is the ranking before them.
"""

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
    """The terms that order the full-text candidates: the ``chosen`` rare terms, and with
    ``lexical_entities`` every entity of the query (``is_entity``) besides.

    Only the chosen terms decide which lessons are candidates (they bound the work);
    the entities decide which of them come first. Common words are left out of the
    ordering: the full-text index would read all their postings to weigh them.
    """
    if not params.lexical_entities:
        return chosen
    return chosen + [t for t in terms if t not in chosen and is_entity(t, names)]


def full_text_terms(
    text: str, terms: list[str], postings: dict[str, float], params: RankingParams
) -> tuple[list[str], list[str]]:
    """What a backend's full-text search needs: the terms that find candidates
    (``rare_terms``, entities first) and the terms that order them (``candidate_terms``).
    ``postings`` are the terms' matching lessons, counted or estimated by the backend."""
    said = names(text, params)
    chosen = rare_terms(terms, postings, params.postings_budget, query_entities(terms, said, params))
    return chosen, candidate_terms(chosen, terms, said, params)


def rare_terms(
    terms: list[str],
    postings: dict[str, float],
    budget: int = POSTINGS_BUDGET,
    entities: Collection[str] = (),
) -> list[str]:
    """The query terms that find lexical candidates: the rarest first, while their
    postings (matching lessons, counted or estimated) fit ``budget``.

    Common words match a large share of all lessons, and ranking every match costs
    more than the whole rest of recall, so candidates come from the rare terms;
    every term still counts in the score. The first term is always chosen,
    whatever its postings. Terms with no postings (zero or None) are left out.
    ``entities`` that fit the budget come before words however rare the words: a
    question paraphrases a lesson's words but repeats its numbers, identifiers and
    names, so a rare word of the question is often one the lesson does not have.
    """
    present = sorted((t for t in terms if postings.get(t)), key=postings.__getitem__)
    first = [t for t in present if t in entities and postings[t] <= budget]
    chosen: list[str] = []
    total = 0.0
    for term in first + [t for t in present if t not in first]:
        if chosen and total + postings[term] > budget:
            break
        chosen.append(term)
        total += postings[term]
    return chosen


def anchor(sample: np.ndarray) -> np.ndarray:
    """The point a scope's similarities are measured from: the sum of the ``sample``
    vectors (its newest lessons, one row each) over their number plus one.

    The plus one shrinks the anchor towards the origin in small scopes, so a scope of one
    lesson is not centred onto that lesson. Postgres computes the same in SQL (the mean
    of the sample and one zero vector).
    """
    rows = np.asarray(sample, dtype=np.float64)
    mean: np.ndarray = rows.sum(axis=0) / (rows.shape[0] + 1)
    return mean.astype(np.float32)


def centred_similarities(query: np.ndarray, vectors: np.ndarray, origin: np.ndarray) -> list[float | None]:
    """Cosine similarity of each row of ``vectors`` to ``query``, both seen from ``origin``
    (None where either is at the origin itself); why: Anchor in the module docstring."""
    q = np.asarray(query, dtype=np.float32) - origin
    m = np.asarray(vectors, dtype=np.float32) - origin
    norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
    dots = m @ q
    return [float(d / n) if n > 0 else None for d, n in zip(dots, norms, strict=True)]


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
    """Each text's lexical score (0..1) for the query ``terms``, and the terms it has.

    With ``params.rarity`` a term's weight is ``log(1 + (n - df + 0.5) / (df + 0.5))``
    where ``df`` of the ``n`` texts of the pool hold it (``pool`` marks them; all texts
    when None or when it marks none), times ``params.entity_weight`` for entities
    (terms with a digit, identifiers, paths, and the query's ``names``). A score is
    the weight of the terms a text has over the weight of the terms the pool has and
    of the query's entities. A plain word no pooled text has counts only where it is
    found, so pooled texts score the same whatever else is a candidate: with
    ``params.open_total`` it is added to that text's total as well (its score rises
    towards 1 but keeps telling which pool terms the text lacks), else the score is
    capped at 1. Without rarity every term weighs the same and a score is the share of
    terms found.
    """
    if not terms or not texts:
        return [0.0] * len(texts), [set() for _ in texts]
    matcher = Matcher(terms, params)
    found = [matcher.found(text) for text in texts]
    counted = [f for f, inside in zip(found, pool, strict=True) if inside] if pool is not None else []
    weights, df = _weights(terms, counted or found, params, names)
    if not params.rarity:
        total = sum(weights.values())
        return [min(1.0, sum(weights[t] for t in f) / total) for f in found], found
    # The query's entities count even where the pool lacks them: a version or a
    # path no near lesson has still tells the lesson that has it from the rest.
    counted_terms = {t for t in weights if df[t] or is_entity(t, names)}
    total = sum(weights[t] for t in counted_terms) or max(weights.values())
    if not params.open_total:
        return [min(1.0, sum(weights[t] for t in f) / total) for f in found], found
    return [
        sum(weights[t] for t in f) / (total + sum(weights[t] for t in f if t not in counted_terms))
        for f in found
    ], found


def _weights(
    terms: list[str], counted: list[set[str]], params: RankingParams, names: Collection[str]
) -> tuple[dict[str, float], Counter[str]]:
    """Each term's weight among the ``counted`` texts (``_lexical``), and how many hold it."""
    n = len(counted)
    df = Counter(t for f in counted for t in f)
    weights: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        w = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5)) if params.rarity else 1.0
        weights[term] = w * params.entity_weight if is_entity(term, names) else w
    return weights, df


def best(
    candidates: Sequence[tuple[str, float | None, float, str]],
    terms: list[str],
    limit: int,
    params: RankingParams = DEFAULT,
    nearest: Collection[str] | None = None,
    names: Collection[str] = (),
) -> list[tuple[str, float]]:
    """The ``limit`` best of ``candidates``, each (id, similarity, weight, text), as
    (id, score) best first; scores are rounded to 6 places and ties go to the smaller id.
    Terms' rarity is counted among the ``nearest`` candidates (all when None): see Rarity.
    """
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
    """Scores with redundant candidates demoted (Redundancy in the module docstring); only
    candidates in the ``pool`` (all when None) are kept to demote others.

    The walk stops once ``limit`` candidates are not demoted: every later one scores
    below them whether demoted or not, so no result and no returned score changes.
    """
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
