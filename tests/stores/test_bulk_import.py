"""Issue 37: an export that carries its vectors loads without the model, in batched writes,
keeping redaction, the near-duplicate rule and one commit per batch; and a small project
among many others still finds its own nearest lessons (filtered recall against exact search)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import make_url
from threadpoolctl import threadpool_info, threadpool_limits

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import FILE_BATCH, Transfer
from stores import Store, open_local_store
from stores.engine.embedding_model import EmbeddingModel
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from tests.support.fuzz_settings import HashEngine
from tests.support.stores import own_indexes, until

GITHUB_TOKEN = "ghp_" + "a1B2" * 9

MODEL = EmbeddingModel(name="hash", dimension=HashEngine.dimension, fingerprint=HashEngine.fingerprint)


class FailingEngine(HashEngine):
    """The model's identity, but any use of the model fails the test."""

    def load(self) -> None:
        raise AssertionError("the model was loaded")

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        raise AssertionError(f"the model embedded {texts!r}")


class CountingEngine(HashEngine):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        self.texts.extend(t for t in texts if "\nfix " in t)  # lessons, not the warm-up
        return super().encode(texts, bulk=bulk)


def unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, HashEngine.dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def filled(store: Store, n: int) -> list[dict[str, Any]]:
    """``n`` lessons with random vectors in org local, project a, exported with their vectors."""
    store.models.adopt(MODEL)
    drafts = [LessonDraft(problem=f"problem {i}", resolution=f"fix {i}", tags=("t",)) for i in range(n)]
    store.save_many(Scope("local", "a"), list(zip(drafts, unit_rows(n, 1), strict=True)))
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    return list(Transfer(service).export_lines("local", None, with_history=False, with_vectors=True))


def test_an_import_with_vectors_embeds_nothing_and_commits_once_per_batch(store: Store) -> None:
    n = FILE_BATCH + 20
    lines = filled(store, n)
    assert lines[0] == {"type": "model", "name": "hash", "dimension": 384, "fingerprint": MODEL.fingerprint}
    twin = {**lines[1], "id": "01JABCDEFGHJKMNPQRSTVWXYZ9"}  # the same text and vector: merged
    text = [json.dumps(line) for line in [*lines, twin]]
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    done: list[int] = []
    report = Transfer(service).import_file(text, org="copy", project=None, strict=False, progress=done.append)
    assert (report.added, report.merged, report.kept_vectors, report.errors) == (n, 1, n + 1, [])
    assert done == [FILE_BATCH, n + 1 - FILE_BATCH]
    with store.transaction(Scope("copy", "a"), write=False) as tx:
        assert [c.kind for c in tx.commits(None, 10, None)] == ["import", "import"]
    ids = [line["id"] for line in lines[1:]]
    copied, source = (store.embeddings(Scope(org, "a"), ids) for org in ("copy", "local"))
    assert copied.keys() == source.keys() == set(ids)
    for lesson_id in ids:  # unit vectors normalised again: equal but for the last bit
        assert np.allclose(
            np.frombuffer(copied[lesson_id], np.float32),
            np.frombuffer(source[lesson_id], np.float32),
            atol=1e-6,
        )


def blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_an_import_writes_with_one_blas_thread_and_gives_the_rest_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle OpenBLAS thread spins after each near-duplicate product while the writers and the
    database want the cores; the import's writes run with one, and the process has its own after."""
    lines = filled(store, 3)
    seen: list[list[int]] = []
    store_drafts = LessonService.store_drafts

    def watched(self: LessonService, *args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())
        return store_drafts(self, *args, **kwargs)

    monkeypatch.setattr(LessonService, "store_drafts", watched)
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    with threadpool_limits(2, user_api="blas"):
        report = Transfer(service).import_file(
            [json.dumps(line) for line in lines], org="copy", project=None, strict=True
        )
        assert blas_threads() and set(blas_threads()) == {2}
    assert report.added == 3 and seen and all(threads and set(threads) == {1} for threads in seen)


def test_a_lesson_that_redaction_changes_is_embedded_anew(store: Store) -> None:
    lines = filled(store, 3)
    lines[1] = {**lines[1], "problem": f"token {GITHUB_TOKEN} leaked"}
    engine = CountingEngine()
    service = LessonService(store, Embedder("hash", engine=engine), default_project="a")
    report = Transfer(service).import_file(
        [json.dumps(line) for line in lines], org="copy", project=None, strict=True
    )
    assert (report.added, report.kept_vectors, len(engine.texts)) == (3, 2, 1)
    assert GITHUB_TOKEN not in engine.texts[0] and "leaked" in engine.texts[0]
    [kept] = store.embeddings(Scope("copy", "a"), [lines[1]["id"]]).values()
    [source] = store.embeddings(Scope("local", "a"), [lines[1]["id"]]).values()
    assert not np.allclose(np.frombuffer(kept, np.float32), np.frombuffer(source, np.float32), atol=1e-3)


def test_a_secret_outside_the_embedded_text_keeps_the_files_vector(store: Store) -> None:
    """The vector is made from problem and resolution alone: a secret redacted from the context,
    a tag or meta leaves them as they were, so the file's vector is kept, not embedded anew."""
    lines = filled(store, 4)
    lines[1] = {**lines[1], "context": f"CI with {GITHUB_TOKEN}"}
    lines[2] = {**lines[2], "meta": {"note": f"token {GITHUB_TOKEN}"}}
    lines[3] = {**lines[3], "resolution": f"fix it: rotate {GITHUB_TOKEN}"}
    engine = CountingEngine()
    service = LessonService(store, Embedder("hash", engine=engine), default_project="a")
    report = Transfer(service).import_file(
        [json.dumps(line) for line in lines], org="copy", project=None, strict=True
    )
    assert (report.added, report.kept_vectors, report.redacted) == (4, 3, {"github_token"})
    assert engine.texts == [f"{lines[3]['problem']}\nfix it: rotate [REDACTED:github_token]"]
    copy = Scope("copy", "a")
    assert store.get(copy, lines[1]["id"]).context == "CI with [REDACTED:github_token]"
    assert store.get(copy, lines[2]["id"]).meta == {"note": "token [REDACTED:github_token]"}
    kept = store.embeddings(copy, [lines[1]["id"], lines[2]["id"]])
    source = store.embeddings(Scope("local", "a"), [lines[1]["id"], lines[2]["id"]])
    assert kept == source


def test_vectors_of_another_model_are_embedded_anew(store: Store) -> None:
    lines = filled(store, 2)
    lines[0] = {**lines[0], "fingerprint": "sha256:another"}
    engine = CountingEngine()
    service = LessonService(store, Embedder("hash", engine=engine), default_project="a")
    report = Transfer(service).import_file(
        [json.dumps(line) for line in lines], org="copy", project=None, strict=False
    )
    assert (report.added, report.kept_vectors, len(engine.texts)) == (2, 0, 2)
    assert report.foreign_model is not None and report.foreign_model.fingerprint == "sha256:another"


def test_a_tiny_project_among_many_finds_its_own_nearest_lessons(store: Store) -> None:
    tiny_project_among_many(store)


def tiny_project_among_many(store: Store, settle: Callable[[], object] = lambda: None) -> None:
    """The filtered-ANN failure: an index that returns the nearest of the whole table finds
    few of a small project's lessons once the filter removes the others'. Recall@10 against
    exact search: what the project answered while it was alone in the store (an exact scan),
    before 3,000 lessons of another project came, with and without tag and confidence filters.
    ``settle`` runs once they are written (``ANALYZE``, as autovacuum would)."""
    tiny = unit_rows(40, 3)
    drafts = [
        LessonDraft(problem=f"tiny {i}", resolution="r", tags=("t",), confidence=0.5 + (i % 5) / 10)
        for i in range(len(tiny))
    ]
    store.save_many(Scope("local", "tiny"), list(zip(drafts, tiny, strict=True)))
    now = datetime.now(UTC) + timedelta(days=1)
    queries = [
        RecallQuery(text="", limit=10, now=now, **filters).with_vector(vector)
        for vector in unit_rows(5, 4)
        for filters in ({}, {"tags": ("t",), "min_confidence": 0.6})
    ]

    def answers() -> list[list[str]]:
        return [[hit.lesson.problem for hit in store.recall(Scope("local", "tiny"), q)] for q in queries]

    exact = answers()
    big = unit_rows(3000, 2)
    for start in range(0, len(big), 500):
        batch = [
            (LessonDraft(problem=f"big {start + i}", resolution="r", tags=("t",)), v)
            for i, v in enumerate(big[start : start + 500])
        ]
        store.save_many(Scope("local", "big"), batch)
    settle()
    for found, wanted in zip(answers(), exact, strict=True):
        assert len(wanted) == 10 and len(set(found) & set(wanted)) >= 0.95 * 10, (found, wanted)


def test_a_rare_tag_in_a_large_project_finds_its_nearest_lessons(
    store: Store, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "postgres":
        rare_tag_in_a_large_project(store)
        return
    url = request.getfixturevalue("postgres_url")
    rare_tag_in_a_large_project(store, settle=own_index_settled(store, url, monkeypatch))
    until(
        lambda: sum(scans for _, scans in own_indexes(url).values()),
        "the second round did not search the project's own index",
    )


def own_index_settled(store: Store, url: str, monkeypatch: pytest.MonkeyPatch) -> Callable[[], object]:
    """For ``rare_tag_in_a_large_project`` on Postgres: ``ANALYZE``, as autovacuum would, and the
    project made large (``OWN_ROWS`` under its 2,000 lessons) with its own index, so that the second
    round searches it."""

    def settle() -> None:
        import psycopg

        from stores.postgres import project_index

        monkeypatch.setattr(project_index, "OWN_ROWS", 1000)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE lessons")
            (key,) = conn.execute("SELECT lore_scope_key('local', 'tagged')").fetchone() or (0,)
            conn.execute(project_index.create(key))
        store._backend._owned.clear()  # type: ignore[attr-defined]  # look again now, not in a minute

    return settle


def rare_tag_in_a_large_project(store: Store, settle: Callable[[], object] = lambda: None) -> None:
    """A tag on one lesson in eight of the project that fills the store: HNSW, which filters after its
    search, finds few of them, so recall scans the tagged lessons exactly (on Postgres through the tags'
    index, migration 18, once ``settle`` gave the project its own index and the tag's share is known).
    Every answer is among the 50 eligible lessons nearest by plain cosine; so are 9 of 10 answers to the
    confidence alone, which HNSW serves approximately once the project has its index (on pgvector 0.8
    scanning on while the filter leaves too few; on these random vectors at ``ef_search`` 100, one
    question in 20 had one answer outside the nearest 50)."""
    vectors, questions = unit_rows(2000, 5), unit_rows(5, 6)
    drafts = [
        LessonDraft(
            problem=f"big {i}",
            resolution="r",
            tags=("rare",) if i % 8 == 0 else ("t",),
            confidence=0.9 if i % 16 else 0.5,
        )
        for i in range(len(vectors))
    ]
    for start in range(0, len(drafts), 500):
        store.save_many(
            Scope("local", "tagged"), list(zip(drafts, vectors, strict=True))[start : start + 500]
        )
    now = datetime.now(UTC) + timedelta(days=1)
    for _ in ("before", "after"):
        for question in questions:
            for tags, eligible, within in (
                (("rare",), [i for i in range(len(vectors)) if i % 16 == 8], 10),  # tagged, confidence 0.9
                ((), [i for i in range(len(vectors)) if i % 16], 9),  # confidence 0.9
            ):
                query = RecallQuery(text="", limit=10, now=now, tags=tags, min_confidence=0.6)
                found = [
                    hit.lesson.problem
                    for hit in store.recall(Scope("local", "tagged"), query.with_vector(question))
                ]
                nearest = {f"big {eligible[j]}" for j in np.argsort(-(vectors[eligible] @ question))[:50]}
                assert len(found) == 10 and len(set(found) & nearest) >= within, (found, sorted(nearest))
        settle()


def test_the_cli_exports_vectors_and_imports_them_without_the_model(tmp_path: Path) -> None:
    """`lore-memory export --with-vectors` then `import` into another file, with a configured
    model that cannot load: neither command needs it."""
    source = open_local_store(tmp_path / "source.db")
    try:
        filled(source, 30)
    finally:
        source.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_EMBEDDING_MODEL="no-such/model", HF_HUB_OFFLINE="1")
    out = tmp_path / "export.jsonl"
    for db, args in (
        ("source.db", ("export", "--with-vectors", "--out", str(out))),
        ("target.db", ("import", str(out))),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "lore_mcp", *args],
            env={**env, "LORE_DB_PATH": str(tmp_path / db)},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
    assert "imported 30 lessons" in done.stderr and "30 kept the vector the file carried" in done.stderr
    target = open_local_store(tmp_path / "target.db")
    try:
        assert target.count("local", "a") == 30 and target.models.recorded() == MODEL
    finally:
        target.close()


def test_an_import_merges_into_lessons_stored_before_it_and_into_its_own_earlier_batches(
    store: Store, tmp_path: Path
) -> None:
    """On Postgres an import into an emptier table loads without its indexes (``bulk``): near
    duplicates among the rows stored before it are found by an exact scan, among its own earlier
    batches in the client. The decisions are the same on both backends."""
    source = open_local_store(tmp_path / "source.db")
    try:
        lines = filled(source, FILE_BATCH + 20)
    finally:
        source.close()
    before = {**lines[2], "id": "01JABCDEFGHJKMNPQRSTVWXYZ8"}  # stored first: lines[2] merges into it
    twin = {**lines[1], "id": "01JABCDEFGHJKMNPQRSTVWXYZ9"}  # in the second batch: merges into lines[1]
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    transfer = Transfer(service)
    assert (
        transfer.import_file(
            [json.dumps(lines[0]), json.dumps(before)], org="copy", project=None, strict=True
        ).added
        == 1
    )
    report = transfer.import_file(
        [json.dumps(line) for line in [*lines, twin]], org="copy", project=None, strict=False
    )
    assert (report.added, report.merged, report.errors) == (FILE_BATCH + 19, 2, [])
    assert store.count("copy", "a") == FILE_BATCH + 20
    kept = store.embeddings(Scope("copy", "a"), [before["id"], lines[1]["id"], lines[2]["id"], twin["id"]])
    assert kept.keys() == {before["id"], lines[1]["id"]}


def test_a_bulk_load_on_postgres_builds_the_indexes_it_dropped_even_when_killed(postgres_url: str) -> None:
    """The full-text index goes at the first write and comes back at the end, an exception included; a
    process killed outright leaves it to the next open. A login that does not own the table keeps it.
    (The vectors' indexes are the large projects': ``test_project_index``.)"""
    import psycopg

    from stores import open_postgres_store
    from tests.support.stores import empty_postgres

    empty_postgres(postgres_url)

    def indexes() -> set[str]:
        with psycopg.connect(postgres_url) as conn:
            return {
                r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'lessons'")
            }

    store = open_postgres_store(postgres_url)
    rows = [
        (LessonDraft(problem=f"problem {i}", resolution=f"fix {i}"), v) for i, v in enumerate(unit_rows(3, 5))
    ]
    store.save_many(Scope("local", "seed"), rows[:1])
    full = indexes()
    assert "lessons_tsv" in full and "lessons_embedding" not in full  # no index of the table's vectors
    try:
        with store.bulk("local", 10**6):
            store.save_many(Scope("local", "a"), rows)
            assert indexes() == full - {"lessons_tsv"}
            raise RuntimeError("stopped")
    except RuntimeError:
        pass
    finally:
        store.close()
    assert indexes() == full
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP INDEX lessons_tsv")
        open_postgres_store(postgres_url).close()
        assert indexes() == full
        admin.execute("DROP ROLE IF EXISTS lore_test_importer")
        admin.execute("CREATE ROLE lore_test_importer LOGIN PASSWORD 'importer' IN ROLE lore_rls")
        admin.execute("GRANT CREATE ON SCHEMA public TO lore_test_importer")
        url = make_url(postgres_url).set(username="lore_test_importer", password="importer")
        try:
            other = open_postgres_store(url.render_as_string(hide_password=False))
            with other.bulk("local", 10**6):
                other.save_many(Scope("local", "b"), rows)
                assert indexes() == full
            other.close()
        finally:
            admin.execute("REVOKE CREATE ON SCHEMA public FROM lore_test_importer")
            admin.execute("DROP OWNED BY lore_test_importer")
            admin.execute("DROP ROLE lore_test_importer")


def test_an_import_of_projects_merges_within_each_and_holds_one_project_a_writer(
    store: Store, tmp_path: Path, monkeypatch: Any
) -> None:
    """b's and c's copies of a's lessons stay in b and c (no merge across projects), b's twin of
    its own first-batch lesson merges from its second batch; on Postgres, writing two projects at
    once here, the vectors held for the near-duplicate check are one project's a writer (a million's
    would be 1.5 GB): the writer that takes c frees a's or b's."""
    from stores.ids import new_id

    source = open_local_store(tmp_path / "source.db")
    try:
        lines = filled(source, FILE_BATCH + 20)
    finally:
        source.close()
    lessons = [line for line in lines if "problem" in line]  # not the model line
    copies = [{**line, "id": new_id(), "project": "b"} for line in lessons[: FILE_BATCH + 5]]
    twin = {**copies[1], "id": new_id()}
    third = [{**line, "id": new_id(), "project": "c"} for line in lessons[:3]]
    held: list[tuple[int, str, set[str]]] = []  # writer thread, its project, every project held
    on_postgres = type(store._backend).__name__ == "PostgresLessons"  # type: ignore[attr-defined]
    if on_postgres:
        from stores.postgres import lessons as postgres

        add = postgres._Held.add

        def watched(self: Any, project: str, *args: Any) -> None:
            add(self, project, *args)
            held.append((threading.get_ident(), project, set(self.rows)))

        monkeypatch.setattr(postgres._Held, "add", watched)
        monkeypatch.setattr(postgres, "_WRITERS", 2)  # fewer writers than projects
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    report = Transfer(service).import_file(
        [json.dumps(line) for line in [*lines, *copies, twin, *third]], org="copy", project=None, strict=False
    )
    assert (report.added, report.merged, report.skipped, report.errors) == (2 * FILE_BATCH + 28, 1, 0, [])
    counts = [store.count("copy", project) for project in "abc"]
    assert counts == [FILE_BATCH + 20, FILE_BATCH + 5, 3]
    assert bool(held) == on_postgres
    for at, (thread, project, projects) in enumerate(held):
        earlier = {p for t, p, _ in held[:at] if t == thread} - {project}
        assert project in projects and not projects & earlier and len(projects) <= 2


def test_lines_checked_in_worker_processes_keep_their_numbers_order_and_model(
    store: Store, monkeypatch: Any
) -> None:
    """A file of several chunks is checked in worker processes (``every_core``): each error still
    names its line, a vector is read with the model line before it, secrets are still redacted."""
    from concurrent.futures import ProcessPoolExecutor

    from lore_mcp.services import every_core

    submitted: list[int] = []

    class Watched(ProcessPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            submitted.append(len(args[0]))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(every_core, "CHUNK", 3)
    monkeypatch.setattr(every_core, "ProcessPoolExecutor", Watched)
    monkeypatch.setattr(every_core.os, "cpu_count", lambda: 2)
    model_line, *lessons = filled(store, 6)
    secret = {**lessons[2], "problem": f"token {GITHUB_TOKEN} leaked"}
    short_vector = {**lessons[3], "vector": lessons[3]["vector"][:40]}
    both_wrong = {**short_vector, "problem": ""}  # the vector's refusal is the one reported
    rows = [lessons[0], model_line, lessons[1], "{not json", secret, short_vector, "", both_wrong]
    rows += [{"type": "commit", "project": "a"}, {"type": "table"}, lessons[4], lessons[5]]
    text = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    engine = CountingEngine()
    service = LessonService(store, Embedder("hash", engine=engine), default_project="a")
    report = Transfer(service).import_file(text, org="copy", project=None, strict=False)
    dimension = f"vector must be {HashEngine.dimension} float32 values in base64, as export writes it."
    assert report.errors == [
        "line 4: not JSON (Expecting property name enclosed in double quotes)",
        f"line 6: {dimension}",
        f"line 8: {dimension}",
        "line 10: unknown type 'table' (expected 'lesson', 'commit' or 'model')",
    ]
    assert submitted == [3, 3, 3]  # lines 1-3 were checked here, the rest by the workers
    # Line 1 came before the model line and line 5 was redacted: embedded anew, the rest kept.
    assert (report.added, report.kept_vectors, report.commits, report.redacted) == (5, 3, 1, {"github_token"})
    assert sorted(engine.texts) == sorted(["problem 0\nfix 0", "token [REDACTED:github_token] leaked\nfix 2"])


def test_a_vector_that_is_not_base64_or_not_finite_refuses_its_line(store: Store) -> None:
    model_line, *lessons = filled(store, 4)
    nan = base64.b64encode(np.full(HashEngine.dimension, np.nan, dtype="<f4").tobytes()).decode()
    rows = [model_line, {**lessons[0], "vector": "not base64!"}, {**lessons[1], "vector": nan}]
    rows += [{**lessons[2], "vector": 7}, lessons[3]]
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    report = Transfer(service).import_file(
        [json.dumps(r) for r in rows], org="copy", project=None, strict=False
    )
    dimension = f"vector must be {HashEngine.dimension} float32 values in base64, as export writes it."
    finite = "vector must hold finite numbers."
    assert report.errors == [f"line 2: {dimension}", f"line 3: {finite}", f"line 4: {dimension}"]
    assert (report.added, report.kept_vectors) == (1, 1)


def test_a_lesson_of_the_file_that_has_expired_takes_no_merge(store: Store) -> None:
    """The near-duplicate check among the file's own lessons (on Postgres, their vectors held in
    the importing process) passes over an expired one: its twin in a later batch is added."""
    lines = filled(store, FILE_BATCH + 1)
    gone = {**lines[1], "expires_at": "2020-01-01T00:00:00+00:00"}
    twin = {**lines[1], "id": "01JABCDEFGHJKMNPQRSTVWXYZ9"}  # the same text and vector
    text = [json.dumps(line) for line in [lines[0], gone, *lines[2:], twin]]
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    report = Transfer(service).import_file(text, org="copy", project=None, strict=False)
    assert (report.added, report.merged, report.errors) == (FILE_BATCH + 2, 0, [])


def test_a_project_that_fails_to_write_stops_the_import_with_its_error(
    store: Store, monkeypatch: Any
) -> None:
    """A writer's failure is raised from the import; what another writer (Postgres writes several
    projects at once) wrote meanwhile is whole batches, and nothing of the failed project."""
    from stores.ids import new_id

    lines = filled(store, FILE_BATCH + 20)
    other = [{**line, "id": new_id(), "project": "c"} for line in lines[1:4]]
    store_drafts = LessonService.store_drafts

    def failing(self: LessonService, scope: Scope, *args: Any, **kwargs: Any) -> Any:
        if scope.project == "c":
            raise RuntimeError("the disk is full")
        return store_drafts(self, scope, *args, **kwargs)

    monkeypatch.setattr(LessonService, "store_drafts", failing)
    service = LessonService(store, Embedder("hash", engine=FailingEngine()), default_project="a")
    text = [json.dumps(line) for line in [*lines, *other]]
    with pytest.raises(RuntimeError, match="the disk is full"):
        Transfer(service).import_file(text, org="copy", project=None, strict=False)
    assert store.count("copy", "c") == 0
    assert store.count("copy", "a") in (0, FILE_BATCH, FILE_BATCH + 20)
