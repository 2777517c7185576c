"""An import's own rows while a bulk load has the indexes down, for its near-duplicate check.

No index holds them yet (``PostgresLessons.bulk`` builds them after), so each batch is compared
with the rows the import wrote before it, in memory. Compared with every one, a project of n rows
costs 384 multiply-adds for each of n²/2 pairs: one project of 100k lessons spent 40 of its 82 s
of rows there, and a million in one project would spend an hour. Yet a lesson needs its neighbours
only if it could merge: a merge needs each content word of its problem and resolution in the
stored ones (``dedup.merge_words``), so from ``WORDS_FROM`` held rows the rows holding them are
found by word first (where each word is, then a signature of every word), and a lesson is compared
with all held rows only if one of those is near, or another near row (stored before the import,
or in its batch) could be the target that held rows push out of the ``MAX_SIMILAR``. For the rest
no held row can change what the save does, so their merges stay exactly as they were."""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Engine

from stores.engine import dedup
from stores.postgres.db import as_owner, transaction

Text = tuple[str, str]  # a lesson's problem and resolution
# Held rows from which a project's are found by word. Below, the product costs less: 2 us a row a
# batch on a core, without the GIL, against about 30 us a lesson under the GIL two writers share.
WORDS_FROM = 20_000


class Words(NamedTuple):
    """A lesson's ``merge_words`` (problem, resolution), and a signature of each: 64 bits, one set
    for each word by this process's string hash, so that ``sign & need == need`` where a row may hold them."""

    fields: tuple[frozenset[str], frozenset[str]]
    signs: tuple[int, int]

    @classmethod
    def of(cls, text: Text) -> Words:
        fields = dedup.merge_words(text[0]), dedup.merge_words(text[1])
        return cls(fields, (_signature(fields[0]), _signature(fields[1])))


def _signature(words: Iterable[str]) -> int:
    bits = 0
    for word in words:
        bits |= 1 << (hash(word) & 63)
    return bits


def _room(values: np.ndarray, n: int, size: int) -> np.ndarray:
    grown = np.empty((size, *values.shape[1:]), values.dtype)
    grown[:n] = values[:n]
    return grown


class _Block:
    """One project's held keys, expiry, vectors and word signatures, with room to grow: a batch is
    copied in once, not the whole block again (a million's largest project: 658 batches of a block
    up to 258 MB); ``posts``: per field, the rows holding each word, from ``WORDS_FROM`` rows on
    (``unindexed``: the texts of the rows not yet there)."""

    def __init__(self, dim: int) -> None:
        self.n, self.keys, self.expiry = 0, np.empty(0, np.int64), np.empty(0)
        self.matrix, self.signs = np.empty((0, dim), np.float32), np.empty((0, 2), np.uint64)
        self.posts: tuple[dict[str, array[int]], dict[str, array[int]]] = ({}, {})
        self.unindexed: list[Text] = []

    def extend(self, keys: np.ndarray, expiry: np.ndarray, matrix: np.ndarray, texts: list[Text]) -> None:
        end = self.n + len(keys)
        if end > len(self.keys):  # doubling: each row is copied about twice in all
            size = max(end, 2 * len(self.keys))
            self.keys, self.expiry = _room(self.keys, self.n, size), _room(self.expiry, self.n, size)
            self.matrix, self.signs = _room(self.matrix, self.n, size), _room(self.signs, self.n, size)
        self.keys[self.n : end], self.expiry[self.n : end], self.matrix[self.n : end] = keys, expiry, matrix
        self.unindexed += texts
        self.n = end

    def index(self, words_of: Callable[[Text], Words]) -> None:
        """Put the rows not yet indexed in ``posts`` and ``signs``."""
        start = self.n - len(self.unindexed)
        words = [words_of(text) for text in self.unindexed]
        self.signs[start : self.n] = [w.signs for w in words]
        for row, each in enumerate(words, start=start):
            for posts, field in zip(self.posts, each.fields, strict=True):
                for word in field:
                    posts.setdefault(word, array("q")).append(row)
        self.unindexed = []

    def could_merge(self, queries: np.ndarray, words: Sequence[Words]) -> np.ndarray:
        """Per query, whether a held row holds every word of its ``words`` and is near it (what a
        merge needs): the rows with its rarest word, those whose signatures hold all its words, then
        their vectors."""
        unsure, rows, owners = np.zeros(len(words), bool), [], []
        for i, each in enumerate(words):
            if not any(each.fields):
                unsure[i] = True  # nothing to look up: fields of function words alone
                continue
            posts = [self.posts[f].get(word) for f in (0, 1) for word in each.fields[f]]
            if all(post is not None for post in posts):  # else no held row holds that word
                rows.append(np.frombuffer(min(posts, key=len), np.int64))  # type: ignore[arg-type]
                owners.append(np.full(len(rows[-1]), i))
        if not rows:
            return unsure
        row, owner = np.concatenate(rows), np.concatenate(owners)
        need = np.array([w.signs for w in words], np.uint64)[owner]
        held = ((self.signs[row] & need) == need).all(axis=1)
        row, owner = row[held], owner[held]
        near = np.einsum("ij,ij->i", self.matrix[row], queries[owner]) >= dedup.CANDIDATE_SIMILARITY
        unsure[owner[near]] = True
        return unsure


def columns(block: _Block, queries: np.ndarray) -> np.ndarray:
    """Every held row's similarity to each query (rows x queries): the cost this module saves."""
    sims: np.ndarray = block.matrix[: block.n] @ queries.T
    return sims


class HeldRows:
    """An import's rows while ``bulk`` has the indexes down (one import a process, the CLI's): keys,
    expiry, unit vectors and words, matched in memory instead of HNSW. Each writer thread of
    ``Transfer`` writes project after project, so its new project frees its last one's rows."""

    def __init__(self, upto: int) -> None:
        self.upto = upto  # rows at or below key ``upto`` were there before it
        self.rows: dict[str, _Block] = {}
        self._writing: dict[int, str] = {}  # thread -> the project it writes
        self._lock, self._dropped = threading.Lock(), False
        self._words: dict[Text, Words] = {}  # of drafts ``near`` saw, until their rows are indexed
        self._added = self._analyzed = 0  # rows the import wrote, in all and at the last statistics

    def stale(self, rows: int) -> bool:
        """After ``rows`` more, whether the statistics are a fifth and 1,000 rows behind, as
        ``_STALE`` has it (an ANALYZE of some columns resets no counter): then they are made."""
        with self._lock:
            self._added += rows
            if self._added - self._analyzed <= 1000 + 0.2 * (self.upto + self._analyzed):
                return False
            self._analyzed = self._added
            return True

    def words(self, text: Text) -> Words:
        """``text``'s merge words, found once for a draft and its row (8 us a field)."""
        return self._words.pop(text, None) or Words.of(text)

    def drop_indexes(self, engine: Engine) -> None:
        """Drop the indexes a bulk load builds after, before its first write."""
        with self._lock:
            if not self._dropped:
                with transaction(engine, None) as conn:
                    as_owner(conn, "DROP INDEX IF EXISTS lessons_tsv")
                self._dropped = True

    def add(self, project: str, rows: Sequence[Mapping[str, Any]], vectors: Mapping[str, np.ndarray]) -> None:
        expiry = np.array([row["expires_at"].timestamp() if row["expires_at"] else math.inf for row in rows])
        keys, matrix = np.array([row["pk"] for row in rows]), np.stack([vectors[row["id"]] for row in rows])
        texts = [(row["problem"], row["resolution"]) for row in rows]
        with self._lock:
            last = self._writing.get(thread := threading.get_ident())
            if last != project:
                self.rows.pop(last or "", None)
                self._writing[thread] = project
            block = self.rows.setdefault(project, _Block(matrix.shape[1]))
        block.extend(keys, expiry, matrix, texts)

    def near(
        self,
        project: str,
        vecs: Sequence[np.ndarray],
        now: float,
        texts: Sequence[Text] | None,
        others: Sequence[Sequence[Any]],
    ) -> Iterator[tuple[int, int, float]]:
        """(vector's index, key, similarity) of each held row live at ``now`` and near enough to merge:
        for every vector, or given its draft's ``texts`` and the ``others`` near it, only where that
        can change a merge (the module's docstring)."""
        if project not in self.rows:
            return iter(())
        block, queries = self.rows[project], np.stack(vecs)
        asked = np.arange(len(vecs))
        if texts is not None and block.n >= WORDS_FROM:
            block.index(self.words)
            words = [self.words(text) for text in texts]
            self._words.update(zip(texts, words, strict=True))
            twins = queries @ queries.T
            np.fill_diagonal(twins, -1.0)
            busy = (twins >= dedup.CANDIDATE_SIMILARITY).any(axis=1) | [bool(near) for near in others]
            asked = np.flatnonzero(busy | block.could_merge(queries, words))
            if not asked.size:
                return iter(())
        # Rows x queries similarities (at a million, up to 43M): only the few columns with a near row
        # are searched for it, and only the near rows' expiry is read (84k rows: 84-106 -> 20-55 ms).
        sims = columns(block, queries[asked])
        cols = np.flatnonzero(sims.max(axis=0) >= dedup.CANDIDATE_SIMILARITY)
        rows, at = np.nonzero(sims[:, cols] >= dedup.CANDIDATE_SIMILARITY)
        live = block.expiry[rows] > now
        keys, pairs = block.keys, zip(rows[live], cols[at[live]], strict=True)
        return ((int(asked[c]), int(keys[r]), float(sims[r, c])) for r, c in pairs)
