"""The retrieval harness (benchmarks/eval_retrieval.py): halves, per-half metrics, the verdict, and
one small real run with the references.

Why: issue 24 judges every ranking change by the harness's test halves against plain cosine, plain
full-text and LEGACY. A wrong half, a wrong sum or a verdict that misses a failure would pass a
change that does harm, so the pure parts are checked on hand-made rows and the references on a
real store with the real model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import eval_references  # noqa: E402
import eval_report  # noqa: E402
import eval_retrieval  # noqa: E402
import eval_sets  # noqa: E402
from eval_scoring import Answer, evaluate  # noqa: E402

from lore_mcp.embedding.embedder import Embedder  # noqa: E402


def test_half_is_fixed_by_family_and_id_and_splits_about_evenly() -> None:
    # Values worked out once from the rule in issue 24; they must never change.
    assert [eval_sets.half("synthetic", f"q{i}") for i in range(6)] == [
        "dev",
        "test",
        "test",
        "dev",
        "test",
        "dev",
    ]
    assert eval_sets.half("conversations", "x") == eval_sets.half("conversations", "x")
    for family in ("synthetic", "conversations", "ops_runbook", "data_platform"):
        dev = sum(eval_sets.half(family, f"q{i:03d}") == "dev" for i in range(200))
        assert 80 <= dev <= 120, (family, dev)


def test_set_family_drops_only_a_size_suffix() -> None:
    assert eval_sets.set_family("synthetic-10k") == "synthetic"
    assert eval_sets.set_family("ops_runbook-10k") == "ops_runbook"
    assert eval_sets.set_family("data_platform-500") == "data_platform"
    assert eval_sets.set_family("conversations") == "conversations"
    assert eval_sets.expand_sets(["all-independent", "conversations"]) == [
        "synthetic-10k",
        "ops_runbook-10k",
        "data_platform-10k",
        "conversations",
        "team_chat-12",
    ]


def _question(qid: str, half: str, evidence: tuple[str, ...], kind: str = "k") -> eval_sets.EvalQuestion:
    return eval_sets.EvalQuestion(id=qid, project="eval", text=qid, kind=kind, evidence=evidence, half=half)


def test_metrics_per_half_are_computed_from_the_questions_of_that_half() -> None:
    questions = [
        _question("d1", "dev", ("a",)),  # rank 1
        _question("d2", "dev", ("b", "c"), kind="two"),  # b at 6, c missing
        _question("t1", "test", ("c",)),  # rank 3
        _question("t2", "test", ("d",)),  # missing
        _question("t3", "test", ()),  # unanswerable
    ]
    owners = {f"L{k}": [k] for k in "abcdz"}
    answers = [
        Answer(["La", "Lz"], [0.9, 0.1], 1.0),
        Answer(["Lz", "Lz", "Lz", "Lz", "Lz", "Lb"], [0.5] * 6, 1.0),
        Answer(["Lz", "Lz", "Lc"], [0.8, 0.7, 0.6], 1.0),
        Answer(["Lz"], [0.4], 1.0),
        Answer(["Lz"], [0.2], 1.0),
    ]
    scored = evaluate(questions, answers, owners, set())
    dev, test, every = (scored["halves"][h]["overall"] for h in ("dev", "test", "all"))
    assert (dev["n"], dev["hit@1"], dev["hit@5"], dev["hit@10"]) == (2, 0.5, 0.5, 1.0)
    assert dev["recall@10"] == pytest.approx((1 + 0.5) / 2, abs=1e-4)
    assert dev["mrr"] == pytest.approx((1 + 1 / 6) / 2, abs=1e-4)
    assert (test["n"], test["hit@1"], test["hit@5"]) == (2, 0.0, 0.5)
    assert test["mrr"] == pytest.approx(1 / 3 / 2, abs=1e-4)
    assert (every["n"], every["hit@5"]) == (4, 0.5)
    assert scored["overall"] == every
    assert scored["halves"]["dev"]["by_kind"]["two"]["n"] == 1
    assert scored["halves"]["test"]["unanswerable"]["n"] == 1
    assert scored["halves"]["dev"]["unanswerable"] is None
    assert [r["half"] for r in scored["questions"]] == ["dev", "dev", "test", "test", "test"]


def _row(
    variant: str, dev: float, test: float, metric: str = "hit", target: float | None = None
) -> dict[str, Any]:
    keys = ("recall@5", "recall@10") if metric == "recall" else ("hit@5",)
    halves = {
        h: {"overall": {"n": 10, **{k: v for k in keys}}, "by_kind": {}}
        for h, v in (("dev", dev), ("test", test))
    }
    return {
        "set": "s-10k",
        "variant": variant,
        "metric": metric,
        "target": target,
        "halves": halves,
        "by_kind": {},
    }


def test_verdict_flags_shipped_below_a_reference_on_test_only() -> None:
    rows = [
        _row("shipped", dev=0.90, test=0.95),
        _row("cosine", dev=0.99, test=0.94),  # beats shipped on dev only: not a failure
        _row("fulltext", dev=0.50, test=0.96),  # beats shipped on test: a failure
        _row("LEGACY", dev=0.80, test=0.95),  # a tie is not a failure
    ]
    failed = eval_report.failures(rows)
    assert [c.what for c in failed] == ["hit@5: shipped >= fulltext"]
    text = "\n".join(eval_report.verdict_section(rows))
    assert "**s-10k: fails** 1 of 3 checks" in text and "shipped >= fulltext: 0.950 < 0.960" in text
    table = "\n".join(eval_report.verdict_tables(rows))
    assert "| shipped | 0.900 | 0.950 |" in table and "| fulltext | 0.500 | 0.960 |" in table


def test_verdict_checks_the_target_and_both_recalls() -> None:
    rows = [_row(v, dev=0.99, test=0.96, target=0.97) for v in eval_report.VERDICT_ROWS]
    assert [c.what for c in eval_report.failures(rows)] == ["hit@5 >= 0.97 (target)"]
    conv = [_row("shipped", 0.6, 0.6, "recall"), _row("LEGACY", 0.5, 0.61, "recall")]
    assert [c.what for c in eval_report.failures(conv)] == [
        "recall@5: shipped >= LEGACY",
        "recall@10: shipped >= LEGACY",
    ]
    # cosine and fulltext were not run: not judged, so neither a pass nor a failure.
    assert sum(not c.judged for c in eval_report.set_checks(conv)) == 4


def test_fts5_query_quotes_every_word() -> None:
    assert eval_references.fts5_query('say "hi" NOT x-y?') == '"say" OR """hi""" OR "NOT" OR "x-y?"'
    assert eval_references.fts5_query(" ?! ") is None


FIXTURE_SET = """
SERVICES = ["billing", "search", "checkout", "inventory", "payments", "gateway"]
FIXES = ["raise the pool size", "restart the worker", "pin the client version", "add an index", "clear the cache"]


def build(size, questions, seed):
    lessons = [
        {
            "key": f"L{i:02d}",
            "problem": f"The {SERVICES[i % 6]} service fails case {i} after deploys",
            "resolution": f"Fix {i}: {FIXES[i % 5]} on the {SERVICES[i % 6]} nodes",
            "context": None,
            "tags": ["ops"],
        }
        for i in range(size)
    ]
    lessons[7]["resolution"] += " and rotate the zyxquorp certificate"
    exact = lessons[11]["problem"] + "\\n" + lessons[11]["resolution"]
    return {
        "lessons": lessons,
        "questions": [
            {"id": "exact", "text": exact, "kind": "exact", "evidence": ["L11"]},
            {"id": "rare", "text": "what about zyxquorp", "kind": "rare", "evidence": ["L07"]},
        ],
    }
"""


async def test_real_run_has_every_reference_and_they_find_what_they_should(
    tmp_path: Path, embedder: Embedder
) -> None:
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "tiny.py").write_text(FIXTURE_SET)
    where = ["--workdir", str(tmp_path / "work"), "--sets-dir", str(tmp_path / "sets")]
    cfg = eval_retrieval.parse_args(["--sets", "tiny-30", "--via", "store", "--cache-dir", "", *where])
    assert cfg.cache_dir is None  # '' turns the cache off (it once wrote into the working directory)
    eval_set = eval_sets.build_set("tiny-30", cfg.set_options())
    assert len(eval_set.items) == 30 and eval_set.family == "tiny"
    with open(tmp_path / "servers.log", "w") as errlog:
        results = await eval_retrieval.run_set(cfg, eval_set, embedder, None, errlog)
    by_variant = {r["variant"]: r for r in results}
    assert list(by_variant) == ["shipped", "LEGACY", "cosine", "fulltext"]
    assert by_variant["cosine"]["merge"]["lost"] == 0
    cosine = {q["id"]: q for q in by_variant["cosine"]["questions"]}
    fulltext = {q["id"]: q for q in by_variant["fulltext"]["questions"]}
    assert cosine["exact"]["top"][0] == "L11"
    assert fulltext["rare"]["top"] == ["L07"]  # the only lesson with the word
    assert {q["half"] for q in cosine.values()} == {
        eval_sets.half("tiny", "exact"),
        eval_sets.half("tiny", "rare"),
    }
    report = {
        "timestamp": "t",
        "config": {"via": "store", "store": "local"},
        "code_fingerprint": {"before": "x", "after": "x"},
        "load_average_before": 0,
        "load_average_after": 0,
        "fulltext_method": eval_references.FULLTEXT_METHOD["local"],
        "results": results,
    }
    text = eval_report.render_markdown(report)
    assert "Verdict on test halves" in text and "| cosine |" in text
