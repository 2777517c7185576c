"""The ``pair`` of backends the property tests share, one per test module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from stores import open_local_store, open_postgres_store
from tests.support.fuzz_pair import Pair, _list_schemas, _warm_up
from tests.support.fuzz_sides import Side, _postgres_counts, _sqlite_counts
from tests.support.stores import empty_postgres


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Pair]:
    """A local and a Postgres backend, each with a server of every tool group."""
    folder = tmp_path_factory.mktemp("fuzz")
    generation = iter(range(1_000_000))

    def open_local() -> Any:
        path = folder / f"lore-{next(generation)}.db"
        local.raw_counts = _sqlite_counts(path)
        return open_local_store(path)

    def open_postgres() -> Any:
        empty_postgres(postgres_url)
        return open_postgres_store(postgres_url)

    local = Side("local", open_local, lambda: ())
    postgres = Side("postgres", open_postgres, _postgres_counts(postgres_url))
    both = Pair([local, postgres])
    asyncio.run(_list_schemas(both))
    _warm_up(both)
    yield both
    for side in both.sides:
        if side.store is not None:
            side.store.close()
