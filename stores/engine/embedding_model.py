"""Which model made a store's vectors, and re-embedding a store with another one.

A query embedded by one model finds nonsense among another's vectors, even at equal dimension, so each
store records its model and the MCP layer compares it with its own; a store from before models were
recorded adopts the first model of its dimension (the default model made those vectors). Re-embedding
computes new vectors beside the old, a batch per transaction, so a killed run resumes; one transaction
swaps them in and bumps the *model generation*, so processes that checked the old model raise
``ModelChangedError`` rather than mix models, and a revert never restores an old model's vector."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from stores.engine.sql import SqlTx
from stores.engine.vectors import check_dimension, unit_vector
from stores.errors import ConflictError, InvalidInputError, UnavailableError

# Fingerprint of unrecorded vectors that the asking model cannot adopt (other dimension).
UNRECORDED = "unrecorded"
# lore_meta keys (both backends).
MODEL_KEY = "model"
GENERATION_KEY = "model_generation"
TARGET_KEY = "reembed_target"
# How often ``reembed_finish`` may find lessons written since their batch before it gives up.
MAX_FINISH_ROUNDS = 5


@dataclass(frozen=True)
class EmbeddingModel:
    """A recorded model: dimension and fingerprint decide comparability; the name is for people."""

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
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EmbeddingModel:
        """The record lore_meta keeps."""
        data = json.loads(text)
        return cls(str(data["name"]), int(data["dimension"]), str(data["fingerprint"]))


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
    """A lesson still to re-embed; its stamp makes a lesson edited after its batch redone."""

    pk: int
    problem: str
    resolution: str
    stamp: Any


@dataclass(frozen=True)
class ReembedProgress:
    """Lessons whose new vector is already computed, of all lessons in the store."""

    done: int
    total: int


# Lessons still without a new vector, or whose text changed since it was computed.
_PENDING = "FROM lessons AS l LEFT JOIN lesson_reembed AS r ON r.pk = l.pk WHERE (r.pk IS NULL OR r.stamp <> l.updated_at)"


class ModelDb(Protocol):
    """What the model records need of a backend."""

    max_dimension: int  # the most dimensions the backend's vector storage takes
    row_lock: str  # " FOR UPDATE" (or ""): the re-embed's target is held until commit

    def record(self, *, write: bool) -> contextlib.AbstractContextManager[SqlTx]:
        """A read of the record, or a write during which no vector storage appears with another dimension."""

    def owner(self, *, write: bool) -> contextlib.AbstractContextManager[SqlTx]:
        """A transaction on the record and ``lesson_reembed`` (as the tables' owner)."""

    def every_org(self, *, write: bool) -> contextlib.AbstractContextManager[SqlTx]:
        """``owner``, seeing every org's lessons (and keeping them from change until it ends)."""

    def vector(self, vec: np.ndarray) -> Any:
        """A unit vector as bound for ``lesson_reembed.embedding``."""

    def swap(self, tx: SqlTx, dimension: int) -> None:
        """In ``tx``: every lesson's vector becomes its new one from ``lesson_reembed``."""

    def swapped(self, dimension: int) -> None:
        """After the swap's commit: what the backend caches of the vectors is ``dimension``'s."""

    def changed(self) -> None:
        """Another process re-embedded the store: forget what is cached of its vectors."""


class ModelRecords:
    """A store's model record and re-embedding; the tables are alike, so written once for both."""

    def __init__(self, db: ModelDb) -> None:
        self._db = db
        # The model this process read or adopted, and the generation it read it at.
        self._known: tuple[EmbeddingModel, int] | None = None

    @property
    def known(self) -> EmbeddingModel | None:
        """The model last read or adopted, asking nothing; None if unread or made stale."""
        return self._known[0] if self._known is not None else None

    def forget(self) -> None:
        """Drop what ``known`` holds, so the next ``adopt`` reads the database again."""
        self._known = None

    def recorded(self) -> EmbeddingModel | None:
        """The recorded model; ``unrecorded(dim)`` for vectors without a record; None for neither."""
        with self._db.record(write=False) as tx:
            return _read(tx)[0]

    def adopt(self, model: EmbeddingModel) -> EmbeddingModel:
        """The recorded model, first recording ``model`` if none fits otherwise; cached after."""
        known = self._known
        if known is not None:
            return known[0]
        with self._db.record(write=False) as tx:
            current, generation = _read(tx)
        if _adoptable(current, model):
            with self._db.record(write=True) as tx:
                current, generation = _read(tx)  # again, in the write
                if _adoptable(current, model):
                    put_meta(tx, MODEL_KEY, model.to_json())
                    current = model
        assert current is not None
        if current.recorded:
            self._known = (current, generation)
        return current

    def check(self, current: int) -> int:
        """``current``, or ``ModelChangedError`` if re-embedded since this process read its model."""
        known = self._known
        if known is not None and known[1] != current:
            self._known = None
            self._db.changed()
            raise ModelChangedError()
        return current

    def reembed_target(self) -> EmbeddingModel | None:
        """The model a re-embed that has not finished is heading for, if any."""
        with self._db.owner(write=False) as tx:
            found = get_meta(tx, TARGET_KEY)
        return EmbeddingModel.from_json(found) if found is not None else None

    def reembed_cancel(self) -> None:
        """Discard a re-embed that has not finished (the store keeps its model and vectors)."""
        with self._db.owner(write=True) as tx:
            tx.rows("DELETE FROM lesson_reembed", {})
            tx.rows("DELETE FROM lore_meta WHERE key = :k", {"k": TARGET_KEY})

    def reembed_begin(self, target: EmbeddingModel) -> ReembedProgress:
        """Start or resume re-embedding with ``target``, discarding a half-done run for another."""
        check_dimension(target.dimension, self._db.max_dimension)
        with self._db.every_org(write=True) as tx:
            if get_meta(tx, TARGET_KEY) != target.to_json():
                tx.rows("DELETE FROM lesson_reembed", {})  # half of a run towards another model
                put_meta(tx, TARGET_KEY, target.to_json())
            total = _count(tx, "FROM lessons")
            pending = _count(tx, _PENDING)
        return ReembedProgress(done=total - pending, total=total)

    def reembed_pending(self, limit: int, after: int = 0) -> list[ReembedRow]:
        """Up to ``limit`` pending lessons keyed above ``after`` (so a run never rescans), lowest first."""
        with self._db.every_org(write=False) as tx:
            rows = tx.rows(
                f"SELECT l.pk, l.problem, l.resolution, l.updated_at AS stamp {_PENDING} AND l.pk > :after "
                "ORDER BY l.pk LIMIT :n",
                {"n": limit, "after": after},
            )
        return [ReembedRow(**r) for r in rows]

    def reembed_put(
        self, target: EmbeddingModel, rows: Sequence[tuple[ReembedRow, Sequence[float] | np.ndarray]]
    ) -> None:
        """Keep these new vectors (one transaction); ``ConflictError`` if another run took over."""
        values = [
            {"pk": row.pk, "stamp": row.stamp, "v": self._db.vector(_checked(vector, target.dimension))}
            for row, vector in rows
        ]
        if not values:
            return
        with self._db.owner(write=True) as tx:
            self._check_target(tx, target)
            tx.many(
                "INSERT INTO lesson_reembed (pk, stamp, embedding) VALUES (:pk, :stamp, :v) "
                "ON CONFLICT (pk) DO UPDATE SET stamp = excluded.stamp, embedding = excluded.embedding",
                values,
            )

    def reembed_finish(self, target: EmbeddingModel) -> int:
        """Swap every new vector in, record ``target``, bump the generation: 0; else how many lack one."""
        with self._db.every_org(write=True) as tx:
            self._check_target(tx, target)
            pending = _count(tx, _PENDING)
            if pending:
                return pending
            generation = read_generation(tx) + 1
            self._db.swap(tx, target.dimension)
            put_meta(tx, "dim", str(target.dimension))
            put_meta(tx, MODEL_KEY, target.to_json())
            put_meta(tx, GENERATION_KEY, str(generation))
            tx.rows("DELETE FROM lore_meta WHERE key = :k", {"k": TARGET_KEY})
            tx.rows("DELETE FROM lesson_reembed", {})
        self._db.swapped(target.dimension)
        self._known = (target, generation)
        return 0

    def _check_target(self, tx: SqlTx, target: EmbeddingModel) -> None:
        found = tx.rows(f"SELECT value FROM lore_meta WHERE key = :k{self._db.row_lock}", {"k": TARGET_KEY})
        if not found or found[0]["value"] != target.to_json():
            raise ConflictError(
                "Another `lore-memory reembed` towards a different model took over this store; "
                "run `lore-memory reembed` again with the model you want."
            )


def get_meta(tx: SqlTx, key: str) -> str | None:
    found = tx.rows("SELECT value FROM lore_meta WHERE key = :k", {"k": key})
    return found[0]["value"] if found else None


def put_meta(tx: SqlTx, key: str, value: str) -> None:
    tx.rows(
        "INSERT INTO lore_meta (key, value) VALUES (:k, :v) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        {"k": key, "v": value},
    )


def read_generation(tx: SqlTx) -> int:
    """The store's model generation, read in ``tx``."""
    value = get_meta(tx, GENERATION_KEY)
    return int(value) if value is not None else 0


def _read(tx: SqlTx) -> tuple[EmbeddingModel | None, int]:
    """The recorded model (``unrecorded`` for vectors without a record) and the generation."""
    record = get_meta(tx, MODEL_KEY)
    if record is not None:
        return EmbeddingModel.from_json(record), read_generation(tx)
    dim = get_meta(tx, "dim")
    return (unrecorded(int(dim)) if dim is not None else None), read_generation(tx)


def _count(tx: SqlTx, source: str) -> int:
    return int(tx.rows(f"SELECT count(*) AS n {source}", {})[0]["n"])


def _adoptable(current: EmbeddingModel | None, model: EmbeddingModel) -> bool:
    """A store with no record adopts a model whose dimension its vectors (if any) have."""
    return current is None or (not current.recorded and current.dimension == model.dimension)


def _checked(vector: Sequence[float] | np.ndarray, dimension: int) -> np.ndarray:
    vec = unit_vector(vector)
    if vec.shape[0] != dimension:
        raise InvalidInputError(
            f"A re-embedded vector has {vec.shape[0]} dimensions, not the model's {dimension}."
        )
    return vec
