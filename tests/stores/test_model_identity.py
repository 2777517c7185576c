"""The store knows its model (issue 14, item 4), on both backends.

A store records the model that made its vectors; a server that runs another model
refuses to save or recall instead of comparing vectors of two models, and
``lore-memory reembed`` moves the whole store to the configured model, resumably and
in one final commit.

The second model here is real in every way that matters: it embeds with the shipped
all-MiniLM-L6-v2 and then permutes and negates the components (or keeps a subset of
them), so its vectors mean the same things among themselves but cannot be compared
with the default model's, and it reports its own fingerprint.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder, Engine
from lore_mcp.embedding.identity import mismatch_message, running_model
from lore_mcp.services.lessons import LessonService, embedding_text
from lore_mcp.services.reembed import reembed_store
from stores import Store, open_local_store, open_postgres_store
from stores.engine.embedding_model import EmbeddingModel, unrecorded
from stores.engine.lessons import LessonDraft, Scope
from stores.postgres import project_index
from tests.support.clients import connected
from tests.support.corpus import CORPUS, QUERIES
from tests.support.helpers import ToolFailed, call
from tests.support.stores import embedding_storage, empty_postgres, own_indexes

DEFAULT = "all-MiniLM-L6-v2"
OTHER = "lore-tests/shuffled-minilm"
# Lessons with a paraphrased query (few shared words: found by meaning), then others.
LESSONS = sorted(CORPUS, key=lambda lesson: lesson.key not in QUERIES)[:20]
QUERIED = [lesson for lesson in LESSONS if lesson.key in QUERIES][:6]


class ShuffledEngine:
    """Another embedding model for these tests: the default model's vectors with their
    components permuted and negated, or only ``dims`` of them kept.

    ``budget`` (texts it may still embed, None for no limit) lets a test kill it midway.
    """

    runtime = "onnxruntime"

    def __init__(self, inner: Engine, dims: int | None = None) -> None:
        self._inner = inner
        self._keep = np.random.default_rng(14).permutation(inner.dimension)[: dims or inner.dimension]
        self.encoded = 0
        self.budget: int | None = None

    def load(self) -> None:
        """The inner engine is loaded already."""

    @property
    def dimension(self) -> int:
        return int(self._keep.shape[0])

    @property
    def fingerprint(self) -> str:
        return f"lore-tests/shuffled-{self.dimension}"

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        if self.budget is not None:
            if self.budget < len(texts):
                raise RuntimeError("the encoder was killed midway")
            self.budget -= len(texts)
        self.encoded += len(texts)
        vectors = -self._inner.encode(texts, bulk=bulk)[:, self._keep]
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def other_model(embedder: Embedder, dims: int | None = None) -> tuple[Embedder, ShuffledEngine]:
    """An embedder of the second model, loaded, with its engine (which has counted nothing yet)."""
    engine = ShuffledEngine(embedder.engine, dims)
    other = Embedder(OTHER, engine=engine)
    other.wait()
    engine.encoded = 0  # the load's warm-up
    return other, engine


def service(store: Store, embedder: Embedder) -> LessonService:
    return LessonService(store, embedder, default_project="default")


@contextlib.asynccontextmanager
async def client_of(store: Store, embedder: Embedder) -> Any:
    async with connected(build_server(service(store, embedder))) as client:
        yield client


async def save_all(client: Client, lessons: Any = LESSONS) -> dict[str, str]:
    saved = {}
    for lesson in lessons:
        result = await call(client, "save_lesson", problem=lesson.problem, resolution=lesson.resolution)
        saved[lesson.key] = result["id"]
    return saved


async def first_hit(client: Client, query: str) -> str:
    return (await call(client, "recall_lessons", query=query, limit=3))["lessons"][0]["id"]


async def refusal(client: Client, tool: str, **arguments: Any) -> ToolFailed:
    with pytest.raises(ToolFailed) as failed:
        await call(client, tool, **arguments)
    return failed.value


@pytest.fixture(autouse=True)
def leave_the_shared_database_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test here may leave the suite's shared Postgres recording the second model; the
    next module's stores must find it as ``empty_postgres`` leaves it."""
    yield
    callspec = getattr(request.node, "callspec", None)
    if (
        callspec is not None
        and callspec.params.get("backend") == "postgres"
        and "store" in request.fixturenames
    ):
        empty_postgres(request.getfixturevalue("postgres_url"))


# -- the record -----------------------------------------------------------------------------


async def test_a_new_store_records_the_model_of_its_first_save(
    pristine_store: Store, embedder: Embedder
) -> None:
    assert pristine_store.models.recorded() is None
    async with client_of(pristine_store, embedder) as client:
        await save_all(client, LESSONS[:1])
    recorded = pristine_store.models.recorded()
    assert recorded == EmbeddingModel(DEFAULT, 384, embedder.fingerprint)
    assert recorded.fingerprint.startswith("sha256:")


async def test_a_store_written_before_models_were_recorded_adopts_the_model_of_its_dimension(
    store: Store, embedder: Embedder
) -> None:
    scope = Scope("local", "default")
    old = LESSONS[0]
    vector = embedder.encode_documents([embedding_text(old.problem, old.resolution)])[0]
    saved = store.save(scope, LessonDraft(problem=old.problem, resolution=old.resolution), vector)
    assert store.models.recorded() == unrecorded(384)  # vectors, and no record of their model

    async with client_of(store, embedder) as client:
        await save_all(client, LESSONS[1:3])
        assert await first_hit(client, QUERIES[old.key]) == saved.id
    assert store.models.recorded() == running_model(embedder)


async def test_a_store_of_unrecorded_vectors_of_another_dimension_refuses_the_server(
    pristine_store: Store, embedder: Embedder
) -> None:
    scope = Scope("local", "default")
    pristine_store.save(scope, LessonDraft(problem="an old lesson", resolution="of 8 dimensions"), [1.0] * 8)
    async with client_of(pristine_store, embedder) as client:
        refused = await refusal(client, "save_lesson", problem="p", resolution="r")
        listed = await call(client, "list_lessons")
    assert refused.code == "UNAVAILABLE"
    assert "a model Lore did not record (8 dimensions)" in refused.message
    assert "lore-memory reembed" in refused.message
    assert len(listed["lessons"]) == 1
    assert pristine_store.models.recorded() == unrecorded(8)


# -- the refusal ----------------------------------------------------------------------------


async def test_a_server_with_another_model_refuses_save_recall_and_import_and_stores_nothing(
    store: Store, embedder: Embedder
) -> None:
    async with client_of(store, embedder) as client:
        ids = await save_all(client, LESSONS[:3])
        before = await call(client, "list_lessons", verbose=True)
        history = await call(client, "history")
    other, engine = other_model(embedder)

    async with client_of(store, other) as client:
        saving = await refusal(
            client, "save_lesson", problem="Redis evicts keys", resolution="Raise maxmemory"
        )
        recalling = await refusal(client, "recall_lessons", query=QUERIES[LESSONS[0].key])
        editing = await refusal(client, "update_lesson", id=ids[LESSONS[0].key], resolution="Something else")
        exported = await call(client, "export_lessons")
        importing = await refusal(
            client,
            "import_lessons",
            lessons=[{**exported["lessons"][0], "id": "01JABCDEFGHJKMNPQRSTVW0000"}],
            project="elsewhere",
        )
        # What needs no vector still works.
        assert await call(client, "list_lessons", verbose=True) == before
        assert (await call(client, "get_lesson", id=ids[LESSONS[1].key]))["problem"] == LESSONS[1].problem
        assert (await call(client, "upvote_lesson", id=ids[LESSONS[1].key]))["upvotes"] == 1
        assert (await call(client, "history"))["commits"][1:] == history["commits"]
        assert (await call(client, "list_lessons", project="elsewhere"))["lessons"] == []

    for failure in (saving, recalling, editing, importing):
        assert failure.code == "UNAVAILABLE"
        assert failure.message == (
            f"This store's vectors come from {DEFAULT} (384 dimensions); this server runs {OTHER} "
            "(384 dimensions), and vectors of two models cannot be compared, so nothing was saved or "
            f"searched. Run `lore-memory reembed` to re-embed the store with {OTHER}, or set "
            f"LORE_EMBEDDING_MODEL={DEFAULT} and restart the server."
        )
    assert engine.encoded == 0  # refused before anything was embedded
    assert store.models.recorded() == running_model(embedder)


def test_the_sentence_for_an_endpoint_store_names_the_endpoint_setting() -> None:
    endpoint = EmbeddingModel("nomic-embed-text", 768, "endpoint:http://10.0.0.5:11434/v1/embeddings#nomic")
    local = EmbeddingModel(DEFAULT, 384, "sha256:ab")
    message = mismatch_message(endpoint, local)
    assert "come from nomic-embed-text (768 dimensions)" in message
    assert (
        "set LORE_EMBEDDING_URL to the endpoint that made them, with LORE_EMBEDDING_MODEL=nomic-embed-text"
        in message
    )
    assert "10.0.0.5" not in message  # agents are not told where the operator's endpoint is
    same_name = mismatch_message(EmbeddingModel(DEFAULT, 384, "sha256:cd"), local)
    assert f"come from {DEFAULT} from other weights (384 dimensions)" in same_name


async def test_the_model_check_asks_the_store_once_not_on_every_call(
    store: Store, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = []
    adopt = store.models.adopt
    monkeypatch.setattr(store.models, "adopt", lambda model: asked.append(model) or adopt(model))
    async with client_of(store, embedder) as client:
        await save_all(client, LESSONS[:3])
        for lesson in QUERIED[:3]:
            await first_hit(client, QUERIES[lesson.key])
    assert len(asked) == 1


# -- reembed --------------------------------------------------------------------------------


async def test_reembed_switches_the_store_and_the_new_model_finds_lessons_by_meaning(
    store: Store, embedder: Embedder
) -> None:
    async with client_of(store, embedder) as client:
        ids = await save_all(client)
    other, engine = other_model(embedder)
    seen: list[tuple[int, int]] = []

    report = reembed_store(store, other, batch_size=8, started=lambda done, total: seen.append((done, total)))

    assert (report.reembedded, report.kept, report.total, report.switched) == (
        len(LESSONS),
        0,
        len(LESSONS),
        True,
    )
    assert seen == [(0, len(LESSONS))]
    assert engine.encoded == len(LESSONS)
    assert store.models.recorded() == running_model(other)
    # Every stored vector is now the new model's: each lesson is its own nearest neighbour at 1.0.
    texts = [embedding_text(lesson.problem, lesson.resolution) for lesson in LESSONS]
    near = store.neighbours(Scope("local", "default"), other.encode_documents(texts))
    assert [n[0].id for n in near] == [ids[lesson.key] for lesson in LESSONS]
    assert all(n[0].similarity > 0.999 for n in near)

    async with client_of(store, other) as client:
        for lesson in QUERIED:
            assert await first_hit(client, QUERIES[lesson.key]) == ids[lesson.key]
        added = await call(
            client, "save_lesson", problem="Celery tasks vanish", resolution="Enable acks_late"
        )
        assert added["merged"] is False
    async with client_of(store, embedder) as client:  # and now the old model is the stranger
        assert (await refusal(client, "recall_lessons", query="tasks vanish")).code == "UNAVAILABLE"


async def test_an_interrupted_reembed_resumes_without_redoing_finished_batches(
    store: Store, embedder: Embedder
) -> None:
    async with client_of(store, embedder) as client:
        ids = await save_all(client)
    other, engine = other_model(embedder)
    engine.budget = 8  # two batches of four, then the encoder dies

    with pytest.raises(RuntimeError, match="killed midway"):
        reembed_store(store, other, batch_size=4)

    # Until the switch, the store is the old model's, and serves it.
    assert store.models.recorded() == running_model(embedder)
    edited = LESSONS[0]  # its new vector was kept; the edit makes it stale
    async with client_of(store, embedder) as client:
        assert await first_hit(client, QUERIES[QUERIED[1].key]) == ids[QUERIED[1].key]
        await call(
            client, "update_lesson", id=ids[edited.key], resolution="Use PgBouncer in transaction mode."
        )
        late = await call(client, "save_lesson", problem="Celery tasks vanish", resolution="Enable acks_late")

    engine.budget, engine.encoded = None, 0
    report = reembed_store(store, other, batch_size=4)

    assert (report.kept, report.reembedded) == (8 - 1, len(LESSONS) - 8 + 1 + 1)
    assert engine.encoded == report.reembedded
    assert store.models.recorded() == running_model(other)
    async with client_of(store, other) as client:
        assert await first_hit(client, "PgBouncer transaction mode") == ids[edited.key]
        assert await first_hit(client, "celery jobs disappear") == late["id"]
        for lesson in QUERIED[1:]:
            assert await first_hit(client, QUERIES[lesson.key]) == ids[lesson.key]


async def test_reembed_to_a_model_of_another_dimension_rebuilds_the_vector_storage(
    pristine_store: Store, embedder: Embedder, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with client_of(pristine_store, embedder) as client:
        ids = await save_all(client)
    other, _ = other_model(embedder, dims=256)
    postgres = request.node.callspec.params.get("backend") == "postgres"
    if postgres:  # the project counts as large: the new column gets its own index
        monkeypatch.setattr(project_index, "OWN_ROWS", 2)

    report = reembed_store(pristine_store, other)

    assert report.reembedded == len(LESSONS)
    assert pristine_store.models.recorded() == EmbeddingModel(OTHER, 256, "lore-tests/shuffled-256")
    if postgres:  # the new column keeps vectors in rows, and its index is the project's
        url = request.getfixturevalue("pristine_url")
        assert embedding_storage(url) == "m"
        assert [valid for valid, _ in own_indexes(url).values()] == [True]
    async with client_of(pristine_store, other) as client:
        hits = 0
        for lesson in QUERIED:
            hits += await first_hit(client, QUERIES[lesson.key]) == ids[lesson.key]
        assert hits >= len(QUERIED) - 1  # a quarter of the components dropped: meaning mostly kept
        added = await call(
            client, "save_lesson", problem="Celery tasks vanish", resolution="Enable acks_late"
        )
        assert await first_hit(client, "celery jobs disappear") == added["id"]
    async with client_of(pristine_store, embedder) as client:
        refused = await refusal(client, "save_lesson", problem="p", resolution="r")
    assert f"come from {OTHER} (256 dimensions)" in refused.message


async def test_reembed_with_the_model_the_store_has_does_nothing(store: Store, embedder: Embedder) -> None:
    async with client_of(store, embedder) as client:
        await save_all(client, LESSONS[:3])
    report = reembed_store(store, embedder)
    assert (report.switched, report.reembedded) == (False, 0)
    assert store.models.recorded() == running_model(embedder)


async def test_a_server_started_before_another_process_reembedded_refuses_with_the_fix(
    backend: str, store: Store, embedder: Embedder, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two store objects on one database stand for two processes: a running server, and
    `lore-memory reembed`."""
    elsewhere = (
        open_local_store(store._backend.path)  # type: ignore[attr-defined]
        if backend == "local"
        else open_postgres_store(request.getfixturevalue("postgres_url"))
    )
    other, _ = other_model(embedder)
    try:
        async with client_of(store, embedder) as client:
            ids = await save_all(client, LESSONS[:4])
            reembed_store(elsewhere, other)
            saving = await refusal(
                client, "save_lesson", problem="Celery tasks vanish", resolution="acks_late"
            )
            recalling = await refusal(client, "recall_lessons", query=QUERIES[LESSONS[0].key])
            assert len((await call(client, "list_lessons"))["lessons"]) == 4
        for failure in (saving, recalling):
            assert failure.code == "UNAVAILABLE"
            assert failure.message.startswith(f"This store's vectors come from {OTHER} (384 dimensions)")
        async with client_of(store, other) as client:  # the server restarted with the new model
            assert await first_hit(client, QUERIES[LESSONS[0].key]) == ids[LESSONS[0].key]
    finally:
        elsewhere.close()


async def test_a_revert_after_reembed_never_brings_back_a_vector_of_the_old_model(
    store: Store, embedder: Embedder
) -> None:
    gone, voted = LESSONS[0], LESSONS[1]
    async with client_of(store, embedder) as client:
        ids = await save_all(client, [gone, voted])
        await call(client, "delete_lesson", id=ids[gone.key])
        await call(client, "upvote_lesson", id=ids[voted.key])
        upvoted, deleted = [c["id"] for c in (await call(client, "history"))["commits"][:2]]
    other, _ = other_model(embedder)
    reembed_store(store, other)

    async with client_of(store, other) as client:
        refused = await refusal(client, "revert_commit", commit_id=deleted)
        assert refused.code == "CONFLICT"
        assert "before the store was re-embedded" in refused.message
        assert (await call(client, "list_lessons"))["lessons"][0]["id"] == ids[voted.key]
        await call(client, "revert_commit", commit_id=upvoted)  # no vector needed: allowed
        assert (await call(client, "get_lesson", id=ids[voted.key]))["upvotes"] == 0
        # A delete made after the reembed reverts as ever, with the new model's vector.
        await call(client, "delete_lesson", id=ids[voted.key])
        newest = (await call(client, "history"))["commits"][0]["id"]
        await call(client, "revert_commit", commit_id=newest)
        assert await first_hit(client, QUERIES[voted.key]) == ids[voted.key]


async def test_the_reembed_command_re_embeds_a_local_store_and_doctor_says_when_it_is_needed(
    embedder: Embedder, tmp_path: Path
) -> None:
    db = tmp_path / "lore.db"
    other, _ = other_model(embedder)
    store = open_local_store(db)
    try:
        async with client_of(store, other) as client:
            ids = await save_all(client, LESSONS[:5])
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_DB_PATH=str(db), HF_HUB_OFFLINE="1")

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lore_mcp", *args], env=env, capture_output=True, text=True, timeout=180
        )

    checked = lore("doctor")
    assert checked.returncode == 1
    assert (
        f"FAIL  vectors: the store's vectors come from {OTHER} (384 dimensions) but the configured model "
        f"is {DEFAULT} (384 dimensions), so saves and recalls will be refused. Run `lore-memory reembed`"
    ) in checked.stdout

    first = lore("reembed")
    assert first.returncode == 0, first.stderr
    assert f"re-embedded 5 lessons with {DEFAULT} (384 dimensions) in " in first.stderr
    assert "lore-memory: reembed: 5/5 lessons\n" in first.stderr  # stderr is a pipe: one line a batch
    assert f"the store now records {DEFAULT} (384 dimensions)." in first.stderr
    again = lore("reembed")
    assert again.returncode == 0, again.stderr
    assert f"the store already records {DEFAULT} (384 dimensions); nothing to re-embed." in again.stderr

    assert f"ok    vectors: from {DEFAULT} (384 dimensions), the configured model" in lore("doctor").stdout
    store = open_local_store(db)
    try:
        assert store.models.recorded() == running_model(embedder)
        async with client_of(store, embedder) as client:
            assert await first_hit(client, QUERIES[LESSONS[0].key]) == ids[LESSONS[0].key]
    finally:
        store.close()
