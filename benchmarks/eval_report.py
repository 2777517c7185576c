"""The Markdown report of ``eval_retrieval.py``, and the verdict on the test halves.

Why a module of its own: the verdict is the rule issue 24 judges a ranking by (on the test half
of every set, the shipped ranking at least as good as plain cosine, plain full-text and
``LEGACY``, and the hit@5 targets met), so it is written once, as pure functions over the JSON
rows, and tested on hand-made rows (tests/benchmarks/test_eval_harness.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

SHIPPED = "shipped"
LEGACY = "LEGACY"
# The rows of the verdict table, in order: the shipped ranking, then the three references.
VERDICT_ROWS = (SHIPPED, "cosine", "fulltext", LEGACY)
REFERENCE_NAMES = VERDICT_ROWS[1:]
# The conversations' kind of question about when something happened (benchmarks/conversations.py).
WHEN_KIND = "temporal"
HALF_COLUMNS = ("dev", "test", "all")


def label(variant: str) -> str:
    """The name a ``--variants`` entry has in the output: ``final`` is what Lore ships,
    ``baseline`` the ranking before the rework (``LEGACY``); others keep their spelling."""
    return {"final": SHIPPED, "baseline": LEGACY}.get(variant, variant)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def metric_keys(metric: str) -> tuple[str, ...]:
    """What the verdict compares: hit@5 on lesson sets, recall@5 and @10 on conversations."""
    return ("recall@5", "recall@10") if metric == "recall" else ("hit@5",)


def figure(row: dict[str, Any], half: str, key: str, kind: str | None = None) -> float | None:
    """One metric of one result row on one half (of one kind of question); None if not asked."""
    summary = row.get("halves", {}).get(half, {})
    summary = summary.get("by_kind", {}).get(kind, {}) if kind else summary.get("overall", {})
    return summary.get(key) if summary.get("n") else None


@dataclass(frozen=True)
class Check:
    """One comparison of the verdict: what was compared, the two figures, and whether it held."""

    what: str
    measured: float | None
    bar: float | None

    @property
    def judged(self) -> bool:
        return self.measured is not None and self.bar is not None

    @property
    def ok(self) -> bool:
        return self.judged and self.measured >= self.bar  # type: ignore[operator]


def set_checks(rows: Sequence[dict[str, Any]]) -> list[Check]:
    """The verdict's comparisons for one set's result rows, on the test half only.

    A reference that was not run, or a test half that was not asked, gives a check that is not
    judged (neither passed nor failed); dev figures are never looked at.
    """
    by_name = {r["variant"]: r for r in rows}
    shipped = by_name.get(SHIPPED)
    first = rows[0]
    checks = []
    for key in metric_keys(first.get("metric", "hit")):
        mine = figure(shipped, "test", key) if shipped else None
        for ref in REFERENCE_NAMES:
            theirs = figure(by_name[ref], "test", key) if ref in by_name else None
            checks.append(Check(f"{key}: shipped >= {ref}", mine, theirs))
    target = first.get("target")
    if target is not None and first.get("metric", "hit") == "hit":
        mine = figure(shipped, "test", "hit@5") if shipped else None
        checks.append(Check(f"hit@5 >= {target} (target)", mine, target))
    if first.get("metric") == "recall" and any(WHEN_KIND in r.get("by_kind", {}) for r in rows):
        mine = figure(shipped, "test", "recall@5", WHEN_KIND) if shipped else None
        theirs = figure(by_name[LEGACY], "test", "recall@5", WHEN_KIND) if LEGACY in by_name else None
        checks.append(Check(f"'{WHEN_KIND}' (when) questions recall@5: shipped >= {LEGACY}", mine, theirs))
    return checks


def failures(rows: Sequence[dict[str, Any]]) -> list[Check]:
    """The judged checks of one set that did not hold."""
    return [c for c in set_checks(rows) if c.judged and not c.ok]


def by_set(results: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        out.setdefault(r["set"], []).append(r)
    return out


def verdict_tables(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    """Per set: shipped and the three references x the compared metric x dev and test."""
    for name, rows in by_set(results).items():
        keys = metric_keys(rows[0].get("metric", "hit"))
        by_name = {r["variant"]: r for r in rows}
        columns = [f"{k} {h}" for k in keys for h in ("dev", "test")]
        yield f"**{name}** (questions: dev {half_n(rows[0], 'dev')}, test {half_n(rows[0], 'test')})"
        yield ""
        yield "| Ranking | " + " | ".join(columns) + " |"
        yield "|---|" + "---:|" * len(columns)
        for variant in VERDICT_ROWS:
            row = by_name.get(variant)
            cells = [fmt(figure(row, h, k)) if row else "not run" for k in keys for h in ("dev", "test")]
            yield f"| {variant} | " + " | ".join(cells) + " |"
        yield ""


def half_n(row: dict[str, Any], half: str) -> int:
    return int(row.get("halves", {}).get(half, {}).get("overall", {}).get("n", 0))


def verdict_section(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    """'Verdict on test halves': per set, whether every check held, and every failure."""
    yield "Verdict on test halves"
    yield ""
    for name, rows in by_set(results).items():
        checks = set_checks(rows)
        failed = [c for c in checks if c.judged and not c.ok]
        unjudged = [c for c in checks if not c.judged]
        if failed:
            yield f"- **{name}: fails** {len(failed)} of {len(checks)} checks:"
            for c in failed:
                yield f"  - {c.what}: {fmt(c.measured)} < {fmt(c.bar)}"
        elif checks and not unjudged:
            yield f"- {name}: passes all {len(checks)} checks"
        else:
            yield f"- {name}: no failure among {len(checks) - len(unjudged)} judged checks"
        for c in unjudged:
            yield f"  - not judged (not run, or that half not asked): {c.what}"
    yield ""


def header(report: dict[str, Any]) -> Iterator[str]:
    yield (
        f"Lore retrieval evaluation, {report['timestamp']}: via {report['config']['via']}, "
        f"store {report['config']['store']}, code {report['code_fingerprint']['before']}, "
        f"load average {report['load_average_before']} -> {report['load_average_after']}"
    )
    yield ""
    if report["code_fingerprint"]["before"] != report["code_fingerprint"]["after"]:
        yield "**Warning: Lore's sources changed during the run; the numbers mix two versions.**"
        yield ""
    methods = report.get("fulltext_method")
    if methods:
        yield f"References run beside every variant: cosine (exact, same model), fulltext ({methods}), LEGACY."
        yield ""


def overall_table(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    yield (
        "| Set | Variant | Half | Lessons | Stored | Merged | Lost | Questions | hit@1 | hit@5 | hit@10 | R@5 "
        "| R@10 | MRR | hit@5, evidence kept (n) | recall p50 ms |"
    )
    yield "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for r in results:
        m = r["merge"]
        for h in HALF_COLUMNS:
            o = r["halves"][h]["overall"]
            if not o["n"]:
                continue
            yield (
                f"| {r['set']} | {r['variant']} | {h} | {r['lessons']:,} | {m['stored']:,} | {fmt(m['merged'])} | "
                f"{m['lost']} | {o['n']} | {fmt(o['hit@1'])} | {fmt(o['hit@5'])} | {fmt(o['hit@10'])} | "
                f"{fmt(o['recall@5'])} | {fmt(o['recall@10'])} | {fmt(o['mrr'])} | {fmt(o.get('hit@5_kept'))} "
                f"({o['n_kept']}) | {r['latency_ms']['p50']:.1f} |"
            )


def kind_table(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    yield "By kind of question (synthetic: the entity that tells the target apart; conversations: the question type)"
    yield ""
    yield "| Set | Variant | Half | Kind | n | hit@1 | hit@5 | hit@10 | R@5 | R@10 | MRR | all@10 |"
    yield "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for r in results:
        for h in HALF_COLUMNS:
            for kind, s in r["halves"][h]["by_kind"].items():
                yield (
                    f"| {r['set']} | {r['variant']} | {h} | {kind} | {s['n']} | {fmt(s['hit@1'])} | "
                    f"{fmt(s['hit@5'])} | {fmt(s['hit@10'])} | {fmt(s['recall@5'])} | {fmt(s['recall@10'])} | "
                    f"{fmt(s['mrr'])} | {fmt(s.get('all@10'))} |"
                )


def unanswerable_table(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    rows = [(r, h, r["halves"][h]["unanswerable"]) for r in results for h in HALF_COLUMNS]
    rows = [x for x in rows if x[2]]
    if not rows:
        return
    yield "Unanswerable questions (no evidence; not in the numbers above)"
    yield ""
    yield (
        "| Set | Variant | Half | n | with a trap | trap@1 | trap@5 | mean top score, answerable / unanswerable "
        "| top-score AUC |"
    )
    yield "|---|---|---|---:|---:|---:|---:|---|---:|"
    for r, h, u in rows:
        yield (
            f"| {r['set']} | {r['variant']} | {h} | {u['n']} | {u['with_trap']} | {fmt(u['trap@1'])} | "
            f"{fmt(u['trap@5'])} | {fmt(u['top_score_answerable_mean'])} / "
            f"{fmt(u['top_score_unanswerable_mean'])} | {fmt(u['top_score_auc'])} |"
        )
    yield ""


def targets_table(results: Sequence[dict[str, Any]]) -> Iterator[str]:
    """Issue 13's targets, as before the halves: on every question asked, for the rankings run."""
    yield "Targets (issue 13; every question asked)"
    yield ""
    yield "| Target | Set | Variant | Measured | Met |"
    yield "|---|---|---|---:|---|"
    for r in results:
        if r["variant"] in REFERENCE_NAMES[:2]:
            continue
        m = r["merge"]
        yield f"| 0 lessons lost | {r['set']} | {r['variant']} | {m['lost']} | {'yes' if m['lost'] == 0 else '**no**'} |"
        if m.get("restatements"):
            yield (
                f"| true duplicates merge (into the lesson they restate) | {r['set']} | {r['variant']} | "
                f"{fmt(m['restatements_merged'])} of {m['restatements']} "
                f"({fmt(m['restatements_into_original'])}) | - |"
            )
        target = r.get("target_all")
        if target is not None:
            hit5 = r["overall"]["hit@5"]
            met = "yes" if hit5 >= target else "**no**"
            yield f"| hit@5 >= {target} | {r['set']} | {r['variant']} | {hit5:.3f} | {met} |"


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report: verdict first (what a change is judged by), then every figure."""
    results = report["results"]
    lines = [*header(report), "Shipped ranking against the references, by half", ""]
    lines += [*verdict_tables(results), *verdict_section(results)]
    lines += ["Every figure, by half", "", *overall_table(results), ""]
    lines += [*kind_table(results), "", *unanswerable_table(results), *targets_table(results)]
    return "\n".join(lines)
