"""Both backends, loaded with the same lessons, rank the same lessons first."""

from __future__ import annotations

from pathlib import Path

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import embedding_text
from stores import Scope, open_local_store, open_postgres_store
from stores.engine.lessons import LessonDraft, RecallQuery
from tests.support.corpus import CORPUS, QUERIES
from tests.support.stores import empty_postgres

SCOPE = Scope("local", "agree")


def test_local_and_postgres_rank_the_same_lessons_first(
    tmp_path: Path, postgres_url: str, embedder: Embedder
) -> None:
    empty_postgres(postgres_url)
    stores = {"local": open_local_store(tmp_path / "lore.db"), "postgres": open_postgres_store(postgres_url)}
    try:
        vectors = embedder.encode_documents([embedding_text(x.problem, x.resolution) for x in CORPUS])
        items = [
            (LessonDraft(x.problem, x.resolution, tags=x.tags, confidence=0.7), v)
            for x, v in zip(CORPUS, vectors, strict=True)
        ]
        for store in stores.values():
            assert not any(r.merged for r in store.save_many(SCOPE, items))
        for query in [*QUERIES.values(), "ECONNRESET", "utf8mb4 emoji"]:
            q = RecallQuery(text=query, vector=embedder.encode_query(query), limit=3)
            ranked = {
                name: [(h.lesson.problem, round(h.score, 4)) for h in store.recall(SCOPE, q)]
                for name, store in stores.items()
            }
            assert ranked["local"] == ranked["postgres"], query
    finally:
        for store in stores.values():
            store.close()
