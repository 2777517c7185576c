"""Lore's retrieval evaluation: one command, a Markdown table and a JSON file.

Why: recall is what Lore exists for. This harness saves evaluation sets the way an
agent would, asks their questions, and scores where the right lessons land, so a
ranking or dedup change is judged on numbers, not on a few hand-picked queries.

Sets (``--sets``, comma-separated):

- ``synthetic-1k``, ``synthetic-10k``, ``synthetic-100k`` (or ``synthetic-<n>``):
  engineering lessons in near-duplicate families that differ by exactly one entity
  (service, environment, version, number, path, person), with ~200 paraphrased
  questions that name the entity telling their target apart
  (``benchmarks/near_duplicates.py``). With ``--restatements N``, N true duplicates
  of its lessons (other case, spacing or punctuation, or a clause dropped) are saved
  after them; they should merge, and the harness counts how many did.
- ``<module>-<n>`` (``ops_runbook-10k``, ``data_platform-10k``): sets written independently of
  the generators above, one file each in ``benchmarks/sets/<module>.py`` with
  ``build(size, questions, seed)`` (``eval_sets.py`` says the shape); loaded into project
  ``eval``; hit@5 target 0.97 at 10k, judged on the test half. ``team_chat-<n>`` is a
  conversation set of that kind (``n`` chats, one project each, judged by recall).
- ``all-independent``: shorthand for every set issue 24's README table needs,
  ``synthetic-10k,ops_runbook-10k,data_platform-10k,conversations,team_chat-12``.
- ``conversations``: our own multi-session dialogs with dates
  (``benchmarks/eval_data/conversations.json``, written by
  ``benchmarks/conversations.py``); every turn is saved as a lesson and each
  question's evidence is one or two turns.

How a dialog turn becomes a lesson (the same on every path):

- problem: ``"<speaker> on <9 March 2024>: <turn text>"`` (who, when, what);
- resolution: the turn text (a lesson needs one; repeating the text keeps the
  vector about the content rather than about boilerplate);
- context: ``"conversation c01, session 3, 2024-03-09 19:30, Maya with Ben"``;
- tags: ``["dialog"]``; source: ``"conversation c01"``;
- project: one per conversation (``c01``...), or all in one with ``--conv-scope shared``;
- created_at: with ``--conv-dates created`` the session's date and time (a minute
  per turn); with ``--conv-dates text`` (default) the date is only in the text and
  the lesson is dated when it is saved, as ``save_lesson`` does over MCP.

Paths (``--via``):

- ``store``: in process. Lessons go through ``LessonService.save`` (validation,
  redaction, the store's dedup), with document vectors computed in batches first
  (and cached on disk, ``--cache-dir``) so loading is fast; dated turns are saved
  with ``store.save`` and the draft's ``created_at`` unless ``LessonService.save``
  accepts ``created_at`` itself. Questions go through ``LessonService.recall``.
- ``mcp``: a real ``lore-memory mcp`` over stdio with the SDK client: lessons are
  saved with ``save_lesson`` (dated turns with ``import_lessons``, the only tool that
  takes a date) for sets up to ``--mcp-save-limit`` lessons, larger sets are loaded
  in process as above; every question is asked with ``recall_lessons``.

``--save-via import`` loads every set through ``import_lessons`` instead (in process:
``Transfer.import_batch``), which today stores every lesson without dedup, so the
ranking can be measured on all lessons while the save path still loses some.

Metrics per (set, variant): hit@1/5/10 (some evidence in the top k), recall@5/10
(share of a question's evidence in the top k), MRR (first evidence, top 10), all@10
for two-turn questions, hit@5 over the questions none of whose evidence was lost on
write (the ranking alone), recall latency p50 (client side: over stdio for ``mcp``,
around ``LessonService.recall`` for ``store``), and the merge count: ``merged`` saves
(results that said merged=true) and ``lost`` lessons (saved texts that the store no
longer holds after normalising case, spacing and punctuation; true duplicates are not
counted as lost, but as merged or not). Unanswerable questions
have no evidence and are scored apart: how often the top hit is a turn of the
storyline the question wrongly attributes (trap@1/5), and how well the top score
separates answerable from unanswerable questions (AUC, 0.5 = not at all).

Halves: every question is ``dev`` or ``test``, once and forever, by
``eval_sets.half(family, question_id)`` (the SHA-256 of ``"<family>:<id>"``, even or odd; the
family is the set's name without its size). Ranking work may look at dev halves only; a change is
judged on the test halves of every set at once. Every figure is reported for ``dev``, ``test`` and
``all``; ``--half dev|test`` asks only that half's questions (the whole set is loaded either way).

References (``--references none`` turns them off): whatever ``--variants`` says, each set is also
asked, on the same loaded store, with ``cosine`` (exact cosine of the query vector to every
lesson vector of the project, same model), ``fulltext`` (BM25 of the store's own FTS5 index over
the query's words OR-ed; on Postgres ``ts_rank_cd`` over ``tsv``, labelled so) and ``LEGACY``
(``baseline``; asked in process even with ``--via mcp``). The shipped ranking (``final``) is
named ``shipped`` in the output. The report opens with a table per set (shipped, cosine,
fulltext, LEGACY x dev and test: hit@5 on lesson sets, R@5 and R@10 on conversations) and a
"Verdict on test halves" that lists every check the shipped ranking fails there.

Ranking variants (``--variants final,baseline,final+rarity=0,...``): each runs the
same questions on the same loaded store. On the ``store`` path a variant names the
``RankingParams`` the store is opened with (``variant_params``): ``final`` is the
ranking Lore ships, ``baseline`` the ranking before issue 13 (``stores.engine.ranking.LEGACY``),
and ``+field=value`` changes one part, so an ablation is one run:
``--variants baseline,final,final+rarity=0,final+centring=0``. The ``mcp`` path runs
the spawned server's own ranking, so it takes ``final`` only. Either way the variant
is also in the environment as ``LORE_RANKING_VARIANT``. ``--reload-per-variant`` loads
the set again for each variant, for variants that change what is stored.

    .venv/bin/python benchmarks/eval_retrieval.py --sets synthetic-1k,conversations --via store
    .venv/bin/python benchmarks/eval_retrieval.py --sets all-independent --via store   # issue 24's table
    .venv/bin/python benchmarks/eval_retrieval.py --sets synthetic-1k --via mcp --store postgres
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.to_thread
import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from eval_references import FULLTEXT_METHOD, REFERENCES, References, ask_references  # noqa: E402
from eval_report import label, render_markdown  # noqa: E402
from eval_scoring import Answer, evaluate  # noqa: E402
from eval_sets import (  # noqa: E402
    HIT5_TARGETS,
    SETS_DIR,
    EvalQuestion,
    EvalSet,
    Item,
    SetOptions,
    build_set,
    expand_sets,
)
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from run import code_fingerprint, load_average, log, lore_command  # noqa: E402

from lore_mcp.embedding.embedder import Embedder  # noqa: E402
from lore_mcp.services.lessons import LOCAL_ORG, LessonService  # noqa: E402
from stores import RankingParams, open_local_store, open_postgres_store  # noqa: E402
from stores.engine import ranking as ranking_module  # noqa: E402

K_MAX = 10
VARIANT_ENV = "LORE_RANKING_VARIANT"
CALL_TIMEOUT_S = 300.0
__all__ = ["HIT5_TARGETS", "main", "run_set", "variant_params"]


def variant_params(variant: str) -> RankingParams:
    """The ``RankingParams`` a ``--variants`` name stands for, on the ``store`` path.

    ``final`` is the ranking Lore ships (``RankingParams()``), ``baseline`` the ranking
    before issue 13 (``stores.engine.ranking.LEGACY``); either may be followed by ``+field=value``
    changes, e.g. ``final+rarity=0`` (one part off) or ``baseline+entity_terms=1``.
    Any other name is the shipped ranking (the variant is then only ``LORE_RANKING_VARIANT``).
    """
    base, *changes = variant.split("+")
    params = {"baseline": ranking_module.LEGACY, "final": ranking_module.DEFAULT}.get(
        base, ranking_module.DEFAULT
    )
    fields = {f.name: f for f in dataclasses.fields(RankingParams)}
    values: dict[str, Any] = {}
    for change in changes:
        name, _, text = change.partition("=")
        if name not in fields or not text:
            raise SystemExit(f"variant {variant!r}: {change!r} is not field=value of RankingParams")
        kind = type(getattr(params, name))
        values[name] = text.lower() in ("1", "true", "yes", "on") if kind is bool else kind(text)
    return dataclasses.replace(params, **values)


# -- where lessons are stored ---------------------------------------------------------------


@dataclass
class Target:
    """The database one set is loaded into: a SQLite file or a Postgres database."""

    store: str  # local | postgres
    path: Path
    url: str | None = None

    def open(self, ranking: RankingParams | None = None) -> Any:
        if self.url:
            return open_postgres_store(self.url, ranking_params=ranking)
        return open_local_store(self.path, ranking_params=ranking)

    def settle(self) -> None:
        """After a load, the planner statistics autovacuum would gather within a minute.

        Postgres chooses full-text candidates by the terms' estimated postings
        (``lore_term_postings``); right after a bulk load the estimates are those of the
        empty table: without this, recall would be measured as it answers in the first
        minute after a load rather than from then on. Nothing to do for SQLite, which
        counts postings exactly.
        """
        if self.url:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("ANALYZE lessons")

    def server_env(self, variant: str | None) -> dict[str, str]:
        env = {"LORE_DB_PATH": str(self.path), "LORE_PROJECT": "eval"}
        if self.url:
            env.update({"LORE_STORE": "postgres", "LORE_DATABASE_URL": self.url})
        if variant is not None:
            env[VARIANT_ENV] = variant
        for name in ("PYTHONPATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HOME"):
            if name in os.environ:  # the SDK passes only a safe subset of the environment
                env[name] = os.environ[name]
        return env


def start_postgres(workdir: Path, database_url: str | None) -> tuple[str, Any]:
    """--database-url, or a pgserver (PostgreSQL 16 + pgvector) in the work directory;
    (url, the pgserver to stop at the end or None)."""
    if database_url:
        return database_url, None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    import psycopg

    pgdata = workdir / "pgdata"
    pgdata.mkdir(exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
    server.cleanup()  # restart, so the setting takes effect
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri(), server


def fresh_database(base_url: str, name: str) -> str:
    """An empty database ``name`` on the server of ``base_url``; its URL."""
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url

    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_url(base_url).set(database=name).render_as_string(hide_password=False)


def make_target(cfg: Config, eval_set: EvalSet, pg_url: str | None) -> Target:
    safe = re.sub(r"[^a-z0-9]+", "_", eval_set.name.lower())
    path = cfg.workdir / f"{safe}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    url = fresh_database(pg_url, f"lore_eval_{safe}") if pg_url else None
    return Target(store=cfg.store, path=path, url=url)


# -- document vectors, computed in batches and cached ---------------------------------------


class BatchedEmbedder:
    """An ``Embedder`` whose document encodes are answered from vectors computed ahead in
    batches, so saves through ``LessonService.save`` do not embed one text at a time.
    Texts it has not seen are encoded by the real model; everything else is delegated."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._known: dict[str, np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def add(self, texts: Sequence[str], vectors: Sequence[np.ndarray]) -> None:
        self._known.update(zip(texts, vectors, strict=True))

    def encode_documents(self, texts: Sequence[str], *, bulk: bool = False) -> list[np.ndarray]:
        missing = [t for t in texts if t not in self._known]
        if missing:
            self.add(missing, self._inner.encode_documents(missing, bulk=bulk))
        return [self._known[t] for t in texts]

    async def aencode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        return await anyio.to_thread.run_sync(self.encode_documents, texts)


def embedding_texts(service: LessonService, items: Sequence[Item]) -> list[str]:
    """What the service will embed for each item (validated and redacted text)."""
    from lore_mcp.services.lessons import embedding_text

    texts = []
    for item in items:
        draft, _ = service.make_draft(**_draft_arguments(item))
        texts.append(embedding_text(draft.problem, draft.resolution))
    return texts


def precompute_items(
    embedder: BatchedEmbedder, service: LessonService, items: Sequence[Item], cfg: Config
) -> float:
    """Vectors for ``items``: the set's own lessons and its true duplicates apart, so the
    (large) first group's cache file is the same with or without ``--restatements``."""
    seconds = 0.0
    for group in ([x for x in items if x.restates is None], [x for x in items if x.restates]):
        if group:
            seconds += precompute(embedder, embedding_texts(service, group), cfg.cache_dir, cfg.batch)
    return seconds


def precompute(embedder: BatchedEmbedder, texts: list[str], cache_dir: Path | None, batch: int) -> float:
    """Vectors for ``texts``, from the cache file when it has them; seconds spent."""
    started = time.perf_counter()
    digest = hashlib.sha256(embedder.model_name.encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    cache = cache_dir / f"{digest.hexdigest()[:24]}.npy" if cache_dir else None
    if cache is not None and cache.exists():
        matrix = np.load(cache)
        if matrix.shape[0] == len(texts):
            embedder.add(texts, list(matrix))
            log(f"  vectors from cache {cache}")
            return time.perf_counter() - started
    vectors: list[np.ndarray] = []
    last = started
    for start in range(0, len(texts), batch):
        vectors.extend(embedder._inner.encode_documents(texts[start : start + batch]))
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            log(f"  embedded {len(vectors)}/{len(texts)} ({len(vectors) / (last - started):.0f}/s)")
    embedder.add(texts, vectors)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, np.stack(vectors).astype(np.float32))
    return time.perf_counter() - started


# -- saving -------------------------------------------------------------------------------------


@dataclass
class SaveLog:
    """What each save returned: the id an item landed under and whether it merged."""

    ids: dict[str, str] = field(default_factory=dict)
    merged: dict[str, bool | None] = field(default_factory=dict)
    similar: int = 0  # saves that reported near neighbours (when the product reports them)
    path: str = ""
    seconds: float = 0.0
    embed_seconds: float = 0.0


def _draft_arguments(item: Item) -> dict[str, Any]:
    args = item.arguments()
    args.pop("project")
    return args


async def load_in_process(target: Target, items: list[Item], embedder: Embedder, cfg: Config) -> SaveLog:
    store = target.open()
    log_ = SaveLog(path="LessonService.save (in process)")
    try:
        batched = BatchedEmbedder(embedder)
        service = LessonService(store, batched, default_project="eval")  # type: ignore[arg-type]
        log_.embed_seconds = await anyio.to_thread.run_sync(precompute_items, batched, service, items, cfg)
        takes_date = "created_at" in inspect.signature(service.save).parameters
        started = last = time.perf_counter()
        for n, item in enumerate(items, 1):
            if item.created_at is None or takes_date:
                extra = {"created_at": item.created_at} if item.created_at is not None else {}
                result = await service.save(**item.arguments(), **extra)
                log_.similar += bool(getattr(result, "similar", None))
            else:
                log_.path = "LessonService.make_draft + store.save with created_at (in process)"
                draft, _ = service.make_draft(**_draft_arguments(item))
                draft = dataclasses.replace(draft, created_at=item.created_at)
                [vector] = await batched.aencode_documents([embedding_texts(service, [item])[0]])
                result = await anyio.to_thread.run_sync(
                    store.save, service.scope(item.project), draft, vector
                )
            log_.ids[item.key] = result.id
            log_.merged[item.key] = bool(result.merged)
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                log(f"  saved {n}/{len(items)} ({n / (last - started):.0f}/s)")
        log_.seconds = time.perf_counter() - started + log_.embed_seconds
    finally:
        store.close()
    return log_


def lesson_in(item: Item, lesson_id: str) -> dict[str, Any]:
    """An item as ``import_lessons`` takes it: our own (dated) ULID, the date, no project."""
    args = {k: v for k, v in item.arguments().items() if v is not None and k != "project"}
    if item.created_at is not None:
        args["created_at"] = item.created_at.isoformat()
    return {"id": lesson_id, **args}


def import_chunks(items: list[Item], log_: SaveLog) -> list[tuple[str, list[dict[str, Any]]]]:
    """(project, up to 100 lessons) batches for import_lessons, ids recorded in ``log_``."""
    from stores.ids import new_id

    chunks: list[tuple[str, list[dict[str, Any]]]] = []
    by_project: dict[str, list[Item]] = {}
    for item in items:
        by_project.setdefault(item.project, []).append(item)
    for project, group in by_project.items():
        for start in range(0, len(group), 100):
            lessons = []
            for item in group[start : start + 100]:
                lesson_id = new_id(item.created_at)
                log_.ids[item.key] = lesson_id
                log_.merged[item.key] = None  # import_lessons does not say
                lessons.append(lesson_in(item, lesson_id))
            chunks.append((project, lessons))
    return chunks


async def import_in_process(target: Target, items: list[Item], embedder: Embedder, cfg: Config) -> SaveLog:
    """The import_lessons path in process (Transfer.import_batch), vectors precomputed."""
    from lore_mcp.services.transfer import LessonIn, Transfer

    store = target.open()
    log_ = SaveLog(path="Transfer.import_batch, as import_lessons (in process)")
    try:
        batched = BatchedEmbedder(embedder)
        service = LessonService(store, batched, default_project="eval")  # type: ignore[arg-type]
        log_.embed_seconds = await anyio.to_thread.run_sync(precompute_items, batched, service, items, cfg)
        transfer = Transfer(service)
        started = time.perf_counter()
        for project, lessons in import_chunks(items, log_):
            await transfer.import_batch([LessonIn(**x) for x in lessons], project)
        log_.seconds = time.perf_counter() - started + log_.embed_seconds
    finally:
        store.close()
    return log_


@contextlib.asynccontextmanager
async def lore_server(target: Target, variant: str | None, errlog: TextIO) -> AsyncIterator[Client]:
    """A ``Client`` on a freshly spawned ``lore-memory mcp`` over stdio (legacy handshake)."""
    command, *args = lore_command()
    params = StdioServerParameters(command=command, args=args, env=target.server_env(variant))
    async with Client(
        stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=CALL_TIMEOUT_S
    ) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = getattr(result.content[0], "text", result.content) if result.content else result
        raise RuntimeError(f"{tool} failed: {text}")
    return result.structured_content


async def load_mcp(target: Target, items: list[Item], errlog: TextIO, via_import: bool) -> SaveLog:
    """save_lesson per item; dated items (or all, ``via_import``) with import_lessons."""
    log_ = SaveLog(path="import_lessons over stdio" if via_import else "save_lesson over stdio")
    started = last = time.perf_counter()
    async with lore_server(target, None, errlog) as client:
        dated = [x for x in items if x.created_at is not None or via_import]
        for n, item in enumerate(x for x in items if x.created_at is None and not via_import):
            result = await call(
                client, "save_lesson", {k: v for k, v in item.arguments().items() if v is not None}
            )
            log_.ids[item.key] = result["id"]
            log_.merged[item.key] = bool(result["merged"])
            log_.similar += bool(result.get("similar"))
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                log(f"  saved {n + 1}/{len(items)} over stdio ({(n + 1) / (last - started):.0f}/s)")
        if dated and not via_import:
            log_.path = "save_lesson over stdio; dated turns with import_lessons"
        for project, lessons in import_chunks(dated, log_):
            await call(client, "import_lessons", {"lessons": lessons, "project": project})
    log_.seconds = time.perf_counter() - started
    return log_


# -- what the store kept ------------------------------------------------------------------------

_NON_WORD = re.compile(r"[\W_]+")


def normalised(problem: str, resolution: str) -> str:
    return _NON_WORD.sub(" ", f"{problem}\n{resolution}".casefold()).strip()


@dataclass
class Audit:
    """Saved items against what the store holds afterwards."""

    saved: int
    distinct_texts: int
    stored: int
    merged: int | None
    lost: list[str]  # item keys whose text the store no longer holds
    owners: dict[str, list[str]]  # lesson id -> item keys it answers for
    restatements: int = 0  # true duplicates saved
    restatements_merged: int = 0  # of them, merged (import_lessons: whose own id is not held)
    restatements_into_original: int | None = None  # of them, landed on the lesson they restate

    def as_dict(self) -> dict[str, Any]:
        return {
            "saved": self.saved,
            "distinct_texts": self.distinct_texts,
            "stored": self.stored,
            "merged": self.merged,
            "lost": len(self.lost),
            "lost_examples": self.lost[:10],
            "restatements": self.restatements,
            "restatements_merged": self.restatements_merged,
            "restatements_into_original": self.restatements_into_original,
        }


def audit(target: Target, items: list[Item], saves: SaveLog) -> Audit:
    store = target.open()
    try:
        service = LessonService(store, Embedder(), default_project="eval")
        held: dict[str, str] = {}  # lesson id -> normalised text
        for project in sorted({x.project for x in items}):
            scope, cursor = service.scope(project), None
            while True:
                page = store.list(scope, (), 100, cursor)
                held.update({x.id: normalised(x.problem, x.resolution) for x in page.lessons})
                cursor = page.next_cursor
                if cursor is None:
                    break
    finally:
        store.close()
    texts = set(held.values())
    owners: dict[str, list[str]] = {}
    lost = []
    distinct = [x for x in items if x.restates is None]
    for item in distinct:
        text = normalised(item.problem, item.resolution)
        lesson_id = saves.ids.get(item.key)
        if text not in texts:
            lost.append(item.key)
        elif lesson_id is not None and held.get(lesson_id) == text:
            owners.setdefault(lesson_id, []).append(item.key)
        else:  # kept, but under another id than the save returned: find it
            for other_id, other_text in held.items():
                if other_text == text:
                    owners.setdefault(other_id, []).append(item.key)
                    break
    merged_flags = [m for m in saves.merged.values() if m is not None]
    duplicates = [x for x in items if x.restates]
    said = all(saves.merged.get(x.key) is not None for x in duplicates)  # import_lessons does not say
    return Audit(
        saved=len(items),
        distinct_texts=len({normalised(x.problem, x.resolution) for x in distinct}),
        stored=len(held),
        merged=sum(merged_flags) if merged_flags else None,
        lost=lost,
        owners=owners,
        restatements=len(duplicates),
        restatements_merged=sum(
            1 for x in duplicates if (saves.merged.get(x.key) if said else saves.ids.get(x.key) not in held)
        ),
        restatements_into_original=sum(
            1
            for x in duplicates
            if x.restates is not None and saves.ids.get(x.key) == saves.ids.get(x.restates)
        )
        if said
        else None,
    )


# -- asking -------------------------------------------------------------------------------------


async def ask_in_process(
    target: Target, questions: list[EvalQuestion], embedder: Embedder, variant: str
) -> list[Answer]:
    # Opened after LORE_RANKING_VARIANT is set, with the variant's RankingParams.
    store = target.open(variant_params(variant))
    cache = getattr(embedder, "_cache", None)
    if cache is not None:  # each variant embeds its queries itself, as a fresh server would
        cache.clear()
    try:
        service = LessonService(store, embedder, default_project="eval")
        await service.recall(
            query="warm up the model and the index", project=questions[0].project, limit=K_MAX
        )
        answers = []
        for q in questions:
            t0 = time.perf_counter()
            result = await service.recall(query=q.text, project=q.project, limit=K_MAX)
            ms = (time.perf_counter() - t0) * 1000
            answers.append(Answer([x.id for x in result.lessons], [x.score for x in result.lessons], ms))
        return answers
    finally:
        store.close()


async def ask_mcp(
    target: Target, questions: list[EvalQuestion], variant: str, errlog: TextIO
) -> list[Answer]:
    async with lore_server(target, variant, errlog) as client:
        warm = {"query": "warm up the model and the index", "project": questions[0].project, "limit": K_MAX}
        await call(client, "recall_lessons", warm)
        await anyio.sleep(4)  # the server moves queries to ONNX Runtime ~2 s after the model loads
        for text in ("redis failover timeout", "what did they say last weekend"):
            await call(client, "recall_lessons", {**warm, "query": text})
        answers = []
        for q in questions:
            t0 = time.perf_counter()
            result = await call(
                client, "recall_lessons", {"query": q.text, "project": q.project, "limit": K_MAX}
            )
            ms = (time.perf_counter() - t0) * 1000
            lessons = result["lessons"]
            answers.append(Answer([x["id"] for x in lessons], [float(x["score"]) for x in lessons], ms))
        return answers


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Config:
    sets: list[str]
    via: str
    store: str
    variants: list[str]
    questions: int | None
    seed: int
    batch: int
    mcp_save_limit: int
    save_via: str
    conv_scope: str
    conv_dates: str
    conv_file: Path | None
    restatements: int
    database_url: str | None
    cache_dir: Path | None
    out: Path
    workdir: Path
    keep: bool
    reload_per_variant: bool
    half: str = "all"
    references: bool = True
    sets_dir: Path = SETS_DIR

    def set_options(self) -> SetOptions:
        return SetOptions(
            questions=self.questions,
            seed=self.seed,
            restatements=self.restatements,
            conv_scope=self.conv_scope,
            conv_dates=self.conv_dates,
            conv_file=self.conv_file,
            sets_dir=self.sets_dir,
        )


@contextlib.contextmanager
def variant_env(variant: str) -> Any:
    """LORE_RANKING_VARIANT set for the duration (this process and servers it spawns)."""
    before = os.environ.get(VARIANT_ENV)
    os.environ[VARIANT_ENV] = variant
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VARIANT_ENV, None)
        else:
            os.environ[VARIANT_ENV] = before


async def load(
    cfg: Config, target: Target, eval_set: EvalSet, embedder: Embedder, errlog: TextIO
) -> tuple[SaveLog, Audit]:
    over_mcp = cfg.via == "mcp" and len(eval_set.items) <= cfg.mcp_save_limit
    how = f"{'over stdio' if over_mcp else 'in process'} with {cfg.save_via}"
    log(f"{eval_set.name}: saving {len(eval_set.items)} lessons {how}")
    if over_mcp:
        saves = await load_mcp(target, eval_set.items, errlog, cfg.save_via == "import")
    elif cfg.save_via == "import":
        saves = await import_in_process(target, eval_set.items, embedder, cfg)
    else:
        saves = await load_in_process(target, eval_set.items, embedder, cfg)
    await anyio.to_thread.run_sync(target.settle)
    found = await anyio.to_thread.run_sync(audit, target, eval_set.items, saves)
    log(
        f"  {saves.seconds:.1f}s ({len(eval_set.items) / max(saves.seconds, 1e-9):.0f}/s); stored {found.stored}, "
        f"merged {found.merged}, lost {len(found.lost)}"
    )
    return saves, found


def asked(cfg: Config, eval_set: EvalSet) -> list[EvalQuestion]:
    """The questions ``--half`` asks; the corpus loaded is always the whole set."""
    return [q for q in eval_set.questions if cfg.half == "all" or q.half == cfg.half]


def ranking_variants(cfg: Config) -> list[str]:
    """``--variants``, and ``baseline`` (``LEGACY``) beside them unless ``--references none``."""
    variants = list(cfg.variants)
    if cfg.references and "baseline" not in variants:
        variants.append("baseline")
    return variants


def result_row(
    cfg: Config,
    eval_set: EvalSet,
    variant: str,
    via: str,
    loaded: tuple[SaveLog, Audit],
    scored: dict[str, Any],
) -> dict[str, Any]:
    """One (set, variant) of the JSON: what was loaded, how, and every figure (``evaluate``)."""
    saves, found = loaded
    return {
        "set": eval_set.name,
        "variant": label(variant),
        "spec": variant,
        "half_asked": cfg.half,
        "via": via,
        "store": cfg.store,
        "size": eval_set.size,
        "metric": eval_set.metric,
        "target": eval_set.target,
        "target_all": eval_set.target_all,
        "lessons": len(eval_set.items),
        "save": {
            "path": saves.path,
            "seconds": round(saves.seconds, 1),
            "embed_seconds": round(saves.embed_seconds, 1),
            "reported_similar": saves.similar,
        },
        "merge": found.as_dict(),
        **scored,
    }


def log_scored(scored: dict[str, Any], started: float) -> None:
    o = scored["overall"]
    log(
        f"  hit@1 {o['hit@1']:.3f} hit@5 {o['hit@5']:.3f} R@5 {o['recall@5']:.3f} R@10 {o['recall@10']:.3f} "
        f"MRR {o['mrr']:.3f}; p50 {scored['latency_ms']['p50']:.1f} ms; {time.perf_counter() - started:.0f}s"
    )


async def run_set(
    cfg: Config, eval_set: EvalSet, embedder: Embedder, pg_url: str | None, errlog: TextIO
) -> list[dict[str, Any]]:
    """Load the set, ask its questions with every ranking variant, then with the references
    on the same loaded store; one result row each."""
    results = []
    questions = asked(cfg, eval_set)
    target = make_target(cfg, eval_set, pg_url)
    loaded: tuple[SaveLog, Audit] | None = None
    for variant in ranking_variants(cfg):
        if loaded is None or cfg.reload_per_variant:
            if loaded is not None:
                target = make_target(cfg, eval_set, pg_url)
            with variant_env(variant):
                loaded = await load(cfg, target, eval_set, embedder, errlog)
        # LEGACY beside an MCP run is asked in process, on the store the server loaded.
        via = "mcp" if cfg.via == "mcp" and variant in cfg.variants else "store"
        log(f"{eval_set.name} [{label(variant)}]: {len(questions)} questions via {via}")
        started = time.perf_counter()
        with variant_env(variant):
            if via == "mcp":
                answers = await ask_mcp(target, questions, variant, errlog)
            else:
                answers = await ask_in_process(target, questions, embedder, variant)
        scored = evaluate(questions, answers, loaded[1].owners, set(loaded[1].lost))
        log_scored(scored, started)
        results.append(
            {
                **result_row(cfg, eval_set, variant, via, loaded, scored),
                "ask_seconds": round(time.perf_counter() - started, 1),
            }
        )
    if cfg.references and loaded is not None:
        results += await run_references(cfg, eval_set, questions, target, embedder, loaded)
    return results


async def run_references(
    cfg: Config,
    eval_set: EvalSet,
    questions: list[EvalQuestion],
    target: Target,
    embedder: Embedder,
    loaded: tuple[SaveLog, Audit],
) -> list[dict[str, Any]]:
    """Plain cosine and plain full-text (``eval_references``) on the loaded store."""
    log(f"{eval_set.name} [{', '.join(REFERENCES)}]: {len(questions)} questions on the stored rows")
    started = time.perf_counter()

    def ask() -> dict[str, list[Answer]]:  # one thread: a SQLite connection stays in its own
        refs = References(LOCAL_ORG, str(target.path), target.url)
        try:
            return ask_references(refs, questions, embedder.encode_query)
        finally:
            refs.close()

    answered = await anyio.to_thread.run_sync(ask)
    rows = []
    for name, answers in answered.items():
        scored = evaluate(questions, answers, loaded[1].owners, set(loaded[1].lost))
        log(f" {name}:")
        log_scored(scored, started)
        row = result_row(cfg, eval_set, name, "store", loaded, scored)
        if name == "fulltext":
            row["method"] = FULLTEXT_METHOD[cfg.store]
        rows.append(row)
    return rows


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """What is run: the sets, the path, the backend, the rankings, the half, the references."""
    parser.add_argument("--sets", default="synthetic-1k,conversations", help="comma-separated sets")
    parser.add_argument(
        "--via", choices=["store", "mcp"], default="store", help="in process, or MCP over stdio"
    )
    parser.add_argument("--store", choices=["local", "postgres"], default="local", help="backend under test")
    parser.add_argument(
        "--database-url", default=None, help="Postgres server (default: pgserver in the work dir)"
    )
    parser.add_argument(
        "--variants",
        default="final",
        help="ranking variants: final, baseline (before issue 13), either +field=value of RankingParams",
    )
    parser.add_argument(
        "--reload-per-variant", action="store_true", help="load each set again for each variant"
    )
    parser.add_argument(
        "--half",
        choices=["dev", "test", "all"],
        default="all",
        help="ask only this half's questions (the whole set is loaded either way)",
    )
    parser.add_argument(
        "--references",
        choices=["on", "none"],
        default="on",
        help="also run plain cosine, plain full-text and LEGACY on the same store (default on)",
    )
    parser.add_argument("--sets-dir", type=Path, default=SETS_DIR, help="where <module>-<size> sets live")


def add_set_arguments(parser: argparse.ArgumentParser) -> None:
    """How the sets are built and loaded, and where results and databases go."""
    parser.add_argument(
        "--questions",
        type=int,
        default=None,
        help="questions per synthetic set (200) or module set (its own default)",
    )
    parser.add_argument("--seed", type=int, default=20261123, help="seed of the synthetic sets")
    parser.add_argument(
        "--restatements",
        type=int,
        default=0,
        help="true duplicates of synthetic lessons saved after them (they should merge; counted)",
    )
    parser.add_argument("--batch", type=int, default=256, help="texts per batch when precomputing vectors")
    parser.add_argument(
        "--mcp-save-limit",
        type=int,
        default=5000,
        help="with --via mcp, sets up to this many lessons are saved over stdio; larger ones in process",
    )
    parser.add_argument(
        "--save-via",
        choices=["save", "import"],
        default="save",
        help="save_lesson (LessonService.save: the dedup path), or import_lessons (today: no dedup, "
        "so ranking is measured on every lesson)",
    )
    parser.add_argument(
        "--conv-scope",
        choices=["conversation", "shared"],
        default="conversation",
        help="one project per conversation, or every conversation in one project",
    )
    parser.add_argument(
        "--conv-dates",
        choices=["text", "created"],
        default="text",
        help="turn dates only in the text, or also as the lessons' created_at",
    )
    parser.add_argument(
        "--conv-file", type=Path, default=None, help="conversational set (default: the committed one)"
    )
    parser.add_argument(
        "--cache-dir",
        default=str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lore-eval"),
        help="where precomputed document vectors are kept ('' to disable)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results-eval.json", help="JSON results file")
    parser.add_argument("--workdir", type=Path, default=None, help="where databases go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and its databases")


def parse_args(argv: Sequence[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_run_arguments(parser)
    add_set_arguments(parser)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lore-eval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for variant in variants:
        params = variant_params(variant)
        if args.via == "mcp" and params != ranking_module.DEFAULT:
            parser.error(
                f"variant {variant!r} is not the shipped ranking: use --via store to compare rankings"
            )
    return Config(
        sets=expand_sets([s.strip() for s in args.sets.split(",") if s.strip()]),
        via=args.via,
        store=args.store,
        variants=variants,
        questions=args.questions,
        seed=args.seed,
        batch=args.batch,
        mcp_save_limit=args.mcp_save_limit,
        save_via=args.save_via,
        conv_scope=args.conv_scope,
        conv_dates=args.conv_dates,
        conv_file=args.conv_file,
        restatements=args.restatements,
        database_url=args.database_url,
        # A string, not a Path: Path("") is ".", which would cache into the working directory.
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        out=args.out,
        workdir=workdir,
        keep=args.keep or args.workdir is not None,
        reload_per_variant=args.reload_per_variant,
        half=args.half,
        references=args.references == "on",
        sets_dir=args.sets_dir,
    )


async def run_all(cfg: Config, pg_url: str | None, errlog: TextIO) -> list[dict[str, Any]]:
    embedder = Embedder()
    embedder.start()
    await anyio.to_thread.run_sync(embedder.wait)
    await anyio.to_thread.run_sync(embedder.wait_settled)
    results = []
    for name in cfg.sets:
        started = time.perf_counter()
        eval_set = build_set(name, cfg.set_options())
        for row in await run_set(cfg, eval_set, embedder, pg_url, errlog):
            row["set_seconds"] = round(time.perf_counter() - started, 1)
            results.append(row)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    log(f"work directory {cfg.workdir}; server stderr in {cfg.workdir / 'servers.log'}")
    pg_url, pg_server = (
        start_postgres(cfg.workdir, cfg.database_url) if cfg.store == "postgres" else (None, None)
    )
    load_before, code_before = load_average(), code_fingerprint()
    started = time.perf_counter()
    try:
        with open(cfg.workdir / "servers.log", "a") as errlog:
            results = anyio.run(run_all, cfg, pg_url, errlog)
    finally:
        if pg_server is not None:
            pg_server.cleanup()
    if not cfg.keep:
        shutil.rmtree(cfg.workdir, ignore_errors=True)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(cfg).items()}
    import lore_mcp

    report = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "code": str(Path(lore_mcp.__file__).resolve().parent.parent),
        "code_fingerprint": {"before": code_before, "after": code_fingerprint()},
        "config": config,
        "fulltext_method": FULLTEXT_METHOD[cfg.store] if cfg.references else None,
        "results": results,
    }
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(render_markdown(report))
    log(f"wrote {cfg.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
