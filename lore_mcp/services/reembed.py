"""``lore-memory reembed``: every lesson re-embedded with the configured model, switched in one commit.

New vectors are kept beside the old per batch, so a killed run loses one batch and the next
resumes. One transaction swaps them all in at the end; until then the old model keeps serving."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.embedding.identity import running_model
from lore_mcp.services.lessons import embedding_text
from stores import MAX_FINISH_ROUNDS, EmbeddingModel, ModelRecords, Store, UnavailableError

# Lessons encoded and kept per transaction: a bulk encode (every core) and a small loss when killed.
BATCH_SIZE = 256


@dataclass(frozen=True)
class ReembedReport:
    """What a run did, counting those an earlier killed run had kept (total None: nothing to do)."""

    reembedded: int
    kept: int
    total: int | None
    previous: EmbeddingModel | None
    model: EmbeddingModel
    seconds: float
    switched: bool  # False when the store already recorded the model and nothing was done


def reembed_store(
    store: Store,
    embedder: Embedder,
    *,
    batch_size: int = BATCH_SIZE,
    started: Callable[[int, int], None] = lambda done, total: None,
    progress: Callable[[int], None] = lambda n: None,
) -> ReembedReport:
    """Re-embed ``store``, switch its model; ``started`` (``done`` > 0: resumed), ``progress``."""
    begun = time.monotonic()
    target = running_model(embedder)
    records = store.models
    previous = records.recorded()
    if previous is not None and previous.makes_same_vectors(target):
        if records.reembed_target() is not None:
            records.reembed_cancel()  # a run towards another model, given up: the store keeps its own
        return ReembedReport(0, 0, None, previous, target, time.monotonic() - begun, False)
    progress_so_far = records.reembed_begin(target)
    started(progress_so_far.done, progress_so_far.total)
    encoded = 0
    for _ in range(MAX_FINISH_ROUNDS):
        encoded += _encode_pending(records, embedder, target, batch_size, progress)
        if records.reembed_finish(target) == 0:
            seconds = time.monotonic() - begun
            return ReembedReport(
                encoded, progress_so_far.done, progress_so_far.total, previous, target, seconds, True
            )
    raise UnavailableError(
        "Lessons kept changing while `lore-memory reembed` ran, so it could not finish; everything "
        "it computed is kept. Stop the servers that write to this store and run it again."
    )


def _encode_pending(
    records: ModelRecords,
    embedder: Embedder,
    target: EmbeddingModel,
    batch_size: int,
    progress: Callable[[int], None],
) -> int:
    """Encode and keep, a batch at a time, every lesson still without its new vector."""
    encoded, after = 0, 0
    while rows := records.reembed_pending(batch_size, after):
        after = rows[-1].pk
        vectors = embedder.encode_documents([embedding_text(row.problem, row.resolution) for row in rows])
        records.reembed_put(target, list(zip(rows, vectors, strict=True)))
        encoded += len(rows)
        progress(len(rows))
    return encoded
