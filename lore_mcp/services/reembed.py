"""``lore-memory reembed``: every lesson of a store, every org, embedded again with the
configured model, and the store switched to it in one commit.

The store keeps each batch's new vectors beside the old ones as soon as the batch is
encoded (``stores.engine.embedding_model``), so a run that is killed loses at most the batch
in hand, and the next run carries on from there. Only when every lesson has its new
vector does one transaction swap them all in and record the new model: until then
the store keeps claiming, and serving, the old model with the old vectors.
"""

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
    """What a run did: lessons it encoded, lessons whose new vector an earlier (killed) run
    had already kept, lessons in the store (None when there was nothing to do), the model
    before and after, and how long it took."""

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
    """Re-embed every lesson of ``store`` with ``embedder``'s model and switch the store to it;
    ``started(done, total)`` once the store says how much is left (``done`` > 0: a killed run
    resumed), ``progress(n)`` after each batch is kept."""
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
