"""The local file's writer and reader connections and locks, so a process never contends with
itself; lesson, model and key stores share this one object."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from stores import deadline
from stores.sqlite.db import Connection, connect, read_transaction, write_transaction
from stores.sqlite.migrations import migrate
from stores.sqlite.sql import LocalSqlTx


class LocalConnections:
    """The writer and the reader of one SQLite file, migrated on opening."""

    def __init__(self, path: Path | str) -> None:
        self.writer = connect(path)
        migrate(self.writer)
        self.reader = connect(path)
        self.write_lock = threading.Lock()
        self.read_lock = threading.Lock()
        # When the write under way must end by (``writing``): a writer held longer is stuck.
        self.writer_until: float | None = None
        self._closed = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        """The reader, in one read transaction (one snapshot)."""
        with self.read_lock, read_transaction(self.reader) as conn:
            yield conn

    @contextlib.contextmanager
    def writing(self) -> Iterator[Connection]:
        """The locked writer in ``BEGIN IMMEDIATE``; ``writer_until`` is its holder's deadline."""
        with self.write_lock:
            left = deadline.remaining()
            self.writer_until = math.inf if left is None else time.monotonic() + left
            try:
                with write_transaction(self.writer) as conn:
                    yield conn
            finally:
                self.writer_until = None

    @contextlib.contextmanager
    def statements(self, *, write: bool) -> Iterator[LocalSqlTx]:
        """``writing`` or ``reading``, its statements run through a ``LocalSqlTx``."""
        with self.writing() if write else self.reading() as conn:
            yield LocalSqlTx(conn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self.write_lock, self.read_lock:
            self.writer.close()
            self.reader.close()
