"""Scoring of ``eval_retrieval.py``: where each question's evidence came back, summed up per set,
per kind of question and per half.

Why pure functions over plain rows: the numbers a ranking change is judged on must be checkable
by hand on a tiny example (tests/benchmarks/test_eval_harness.py), with no model or store.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_sets import HALVES, EvalQuestion
from run import percentiles


@dataclass
class Answer:
    """What one recall returned: lesson ids best first, their scores, and its latency."""

    ids: list[str]
    scores: list[float]
    ms: float


def score_question(
    q: EvalQuestion, answer: Answer, owners: dict[str, list[str]], lost: set[str]
) -> dict[str, Any]:
    """Ranks (1-based) at which each evidence item and trap item came back."""
    ranked_keys = [owners.get(lesson_id, []) for lesson_id in answer.ids]
    first: dict[str, int] = {}
    for rank, keys in enumerate(ranked_keys, 1):
        for key in keys:
            first.setdefault(key, rank)
    out: dict[str, Any] = {
        "id": q.id,
        "kind": q.kind,
        "half": q.half,
        "question": q.text,
        "evidence": list(q.evidence),
        "ranks": {key: first.get(key) for key in q.evidence},
        "lost_evidence": [key for key in q.evidence if key in lost],
        "top": [keys[0] if keys else None for keys in ranked_keys[:3]],
        "top_score": answer.scores[0] if answer.scores else None,
        "ms": round(answer.ms, 2),
    }
    if q.trap:
        out["trap_rank"] = min((first[k] for k in q.trap if k in first), default=None)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """hit@k, recall@k, MRR (and all@10 for several-evidence questions) over answerable rows."""
    n = len(rows)
    if n == 0:
        return {"n": 0}

    def first_rank(row: dict[str, Any]) -> int | None:
        ranks = [r for r in row["ranks"].values() if r is not None]
        return min(ranks) if ranks else None

    def recall_at(row: dict[str, Any], k: int) -> float:
        ranks = row["ranks"].values()
        return sum(1 for r in ranks if r is not None and r <= k) / len(row["ranks"])

    firsts = [first_rank(r) for r in rows]
    out: dict[str, Any] = {"n": n}
    for k in (1, 5, 10):
        out[f"hit@{k}"] = round(sum(1 for f in firsts if f is not None and f <= k) / n, 4)
    for k in (5, 10):
        out[f"recall@{k}"] = round(statistics.fmean(recall_at(r, k) for r in rows), 4)
    out["mrr"] = round(statistics.fmean(1 / f if f else 0.0 for f in firsts), 4)
    multi = [r for r in rows if len(r["ranks"]) > 1]
    if multi:
        out["all@10"] = round(sum(1 for r in multi if recall_at(r, 10) == 1.0) / len(multi), 4)
    # The ranking alone: questions none of whose evidence was lost on write.
    kept = [f for f, r in zip(firsts, rows, strict=True) if not r.get("lost_evidence")]
    out["n_kept"] = len(kept)
    if kept:
        out["hit@5_kept"] = round(sum(1 for f in kept if f is not None and f <= 5) / len(kept), 4)
        out["mrr_kept"] = round(statistics.fmean(1 / f if f else 0.0 for f in kept), 4)
    return out


def auc(positives: list[float], negatives: list[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half)."""
    if not positives or not negatives:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in positives for q in negatives)
    return round(wins / (len(positives) * len(negatives)), 4)


def unanswerable_summary(
    answerable: list[dict[str, Any]], unanswerable: list[dict[str, Any]]
) -> dict[str, Any]:
    trapped = [r for r in unanswerable if "trap_rank" in r]
    top = [r["top_score"] for r in answerable if r["top_score"] is not None]
    top_neg = [r["top_score"] for r in unanswerable if r["top_score"] is not None]
    return {
        "n": len(unanswerable),
        "with_trap": len(trapped),
        "trap@1": round(sum(1 for r in trapped if r["trap_rank"] == 1) / len(trapped), 4)
        if trapped
        else None,
        "trap@5": round(sum(1 for r in trapped if (r["trap_rank"] or 99) <= 5) / len(trapped), 4)
        if trapped
        else None,
        "top_score_answerable_mean": round(statistics.fmean(top), 4) if top else None,
        "top_score_unanswerable_mean": round(statistics.fmean(top_neg), 4) if top_neg else None,
        "top_score_auc": auc(top, top_neg),
    }


def metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall, by kind and unanswerable figures of some scored rows (one half, or all)."""
    answerable = [r for r in rows if r["evidence"]]
    unanswerable = [r for r in rows if not r["evidence"]]
    kinds = sorted({r["kind"] for r in answerable})
    return {
        "overall": summarise(answerable),
        "by_kind": {kind: summarise([r for r in answerable if r["kind"] == kind]) for kind in kinds},
        "unanswerable": unanswerable_summary(answerable, unanswerable) if unanswerable else None,
    }


def by_half(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``metrics`` for ``dev``, ``test`` and ``all``; a half with no questions asked has n = 0."""
    out = {name: metrics([r for r in rows if r["half"] == name]) for name in HALVES}
    out["all"] = metrics(rows)
    return out


def evaluate(
    questions: Sequence[EvalQuestion],
    answers: Sequence[Answer],
    owners: dict[str, list[str]],
    lost: set[str],
) -> dict[str, Any]:
    """Every metric of one (set, variant): for all questions asked at the top level (as before
    halves existed) and under ``halves`` for ``dev``, ``test`` and ``all``."""
    rows = [score_question(q, a, owners, lost) for q, a in zip(questions, answers, strict=True)]
    halves = by_half(rows)
    return {
        **halves["all"],
        "halves": halves,
        "latency_ms": percentiles([a.ms for a in answers]),
        "questions": rows,
    }
