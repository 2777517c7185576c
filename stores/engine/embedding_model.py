"""Which model made a store's vectors, and re-embedding a store with another one.

Vectors of two models cannot be compared: a query embedded by one model finds
nonsense among lessons embedded by another, even when both have 384 dimensions.
So each store records the model that made its vectors (``EmbeddingModel``: name,
dimension and a fingerprint of the weights or the endpoint), and the MCP layer
compares it with its own model before it embeds anything (``lore_mcp.services.lessons``).

A store written before models were recorded has no record: the first model that
uses it is adopted when its dimension is the store's (those vectors came from the
default model, which is what existing users run).

Re-embedding (``lore-memory reembed``) computes every lesson's new vector beside
the old one, a batch per transaction, so a killed run resumes where it stopped;
then one transaction swaps every vector, records the new model and bumps the
store's *model generation*. Processes that checked the old model notice the new
generation at their next vector write or recall and answer ``ModelChangedError``
instead of mixing vectors of two models. Commit images made by a store carry the
generation of their vector, so a revert never brings back a vector of the model
the store used before (see ``stores.engine.lessons.lesson_image``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from stores.errors import UnavailableError

# The fingerprint of the vectors of a store that holds some but never recorded their model,
# and that the model asking cannot adopt (its dimension is another).
UNRECORDED = "unrecorded"
# lore_meta keys (both backends).
MODEL_KEY = "model"
GENERATION_KEY = "model_generation"
TARGET_KEY = "reembed_target"
# How often ``reembed_finish`` may find lessons written since their batch before it gives up.
MAX_FINISH_ROUNDS = 5


@dataclass(frozen=True)
class EmbeddingModel:
    """A model as a store records it. Two models make comparable vectors when their
    dimension and fingerprint agree; the name is for people."""

    name: str
    dimension: int
    fingerprint: str

    def makes_same_vectors(self, other: EmbeddingModel) -> bool:
        """True when vectors of ``other`` may be compared with this model's."""
        return self.dimension == other.dimension and self.fingerprint == other.fingerprint

    @property
    def recorded(self) -> bool:
        """False for the stand-in of a store whose vectors' model is unknown (``UNRECORDED``)."""
        return self.fingerprint != UNRECORDED

    def to_json(self) -> str:
        """The record as lore_meta keeps it."""
        return json.dumps(
            {"name": self.name, "dimension": self.dimension, "fingerprint": self.fingerprint},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> EmbeddingModel:
        """The record lore_meta keeps."""
        data = json.loads(text)
        return cls(
            name=str(data["name"]), dimension=int(data["dimension"]), fingerprint=str(data["fingerprint"])
        )


def unrecorded(dimension: int) -> EmbeddingModel:
    """The stand-in for vectors of ``dimension`` dimensions whose model was never recorded."""
    return EmbeddingModel(name="an unrecorded model", dimension=dimension, fingerprint=UNRECORDED)


class ModelChangedError(UnavailableError):
    """The store was re-embedded with another model since this process checked its model."""

    def __init__(self) -> None:
        super().__init__(
            "This store was re-embedded with another embedding model (`lore-memory reembed`) while this "
            "server was running, so the call changed nothing. Try again: the server checks the store's "
            "model anew, and says what to do if it runs a different one."
        )


@dataclass(frozen=True)
class ReembedRow:
    """A lesson whose vector a re-embed still has to compute: its key, its text, and the
    stamp of the text's version (so a lesson edited after its batch is done again)."""

    pk: int
    problem: str
    resolution: str
    stamp: Any


@dataclass(frozen=True)
class ReembedProgress:
    """Lessons whose new vector is already computed, of all lessons in the store."""

    done: int
    total: int


class ModelRecords(Protocol):
    """A store's record of its model, and re-embedding it with another (``store.models``)."""

    @property
    def known(self) -> EmbeddingModel | None:
        """The model this process last read or adopted, without asking the database; None
        when it has not asked yet, or when a re-embed by another process made it stale."""
        ...

    def forget(self) -> None:
        """Drop what ``known`` holds, so the next ``adopt`` reads the database again."""
        ...

    def recorded(self) -> EmbeddingModel | None:
        """The model the store records (read from the database); ``unrecorded(dim)`` when it
        holds vectors but no record, None when it holds neither."""
        ...

    def adopt(self, model: EmbeddingModel) -> EmbeddingModel:
        """The model the store records, recording ``model`` first when the store has no record
        and no vectors of another dimension. Cached: later calls ask the database nothing."""
        ...

    def reembed_target(self) -> EmbeddingModel | None:
        """The model a re-embed that has not finished is heading for, if any."""
        ...

    def reembed_cancel(self) -> None:
        """Discard a re-embed that has not finished (the store keeps its model and vectors)."""
        ...

    def reembed_begin(self, target: EmbeddingModel) -> ReembedProgress:
        """Start (or resume) re-embedding every lesson of every org with ``target``.
        A run towards another target left half-done is discarded."""
        ...

    def reembed_pending(self, limit: int, after: int = 0) -> list[ReembedRow]:
        """Up to ``limit`` lessons with a key above ``after``, lowest first, that still need
        their new vector (a run passes its last key, so it never scans what it did)."""
        ...

    def reembed_put(
        self, target: EmbeddingModel, rows: Sequence[tuple[ReembedRow, Sequence[float] | np.ndarray]]
    ) -> None:
        """Keep these new vectors (one transaction); ``ConflictError`` if another run took over."""
        ...

    def reembed_finish(self, target: EmbeddingModel) -> int:
        """In one transaction: when every lesson has its new vector, swap them all in, record
        ``target`` and bump the generation, and return 0; otherwise change nothing and
        return how many lessons (written since their batch) still need one."""
        ...
