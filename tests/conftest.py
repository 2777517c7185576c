"""Fixtures: one suite, parametrised over backends at the ``store`` fixture.

A second backend joins by adding its name to ``BACKENDS`` and a branch in
``open_store`` (``tests/support/stores.py``); every store and tool test then runs against it too.

The tests sit in folders by lane: ``unit`` (no database, no model, no process), ``stores``
(store-level, both backends), ``mcp`` (the server through real MCP clients in process; its
bad-input and redaction suites are packages there), ``process`` (spawned servers, the CLI,
uvx, npx). The collection hook below marks each test from its folder and what it uses.

The in-process ``client`` is parametrised over the two MCP eras at the ``era`` fixture
(``ERAS``): ``legacy`` (the initialize handshake and its session) and ``2026-07-28`` (no
``initialize``, no session), so every test of a tool, resource or prompt runs in both. A test or
module that is about one era only says so with ``@pytest.mark.era(name, reason=...)``
(``tests/support/eras.py`` names the eras).
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores import Store, open_local_store, open_postgres_store
from tests.support.clients import connected
from tests.support.eras import ERAS, PROTOCOL_VERSIONS, client_mode
from tests.support.markers import kinds_of, timeout_for
from tests.support.stores import database_per_worker, open_store

BACKENDS = ["local", "postgres"]

# Every Hypothesis test's defaults: how long an example takes is never the property (a busy
# machine stretches it, generation included), so no deadline and no "too slow" health check.
settings.register_profile("lore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lore")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "era(name, reason): the test's client speaks only this MCP era (legacy or 2026-07-28), "
        "for the reason given",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that reaches the ``era`` fixture (the ``client`` does) once per era, or in
    the one era its ``era`` mark names."""
    if "era" not in metafunc.fixturenames:
        return
    eras = list(ERAS)
    mark = metafunc.definition.get_closest_marker("era")
    if mark is not None:
        if len(mark.args) != 1 or mark.args[0] not in ERAS or not mark.kwargs.get("reason"):
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: write @pytest.mark.era(name, reason=...) with a name "
                f"among {', '.join(ERAS)}"
            )
        eras = [mark.args[0]]
    metafunc.parametrize("era", eras, ids=[ERAS[e] for e in eras], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test by what it uses, with a timeout to match (``tests/support/markers.py``
    says how), in this one place; the markers are registered in pyproject.toml."""
    for item in items:
        kinds = kinds_of(item)
        for kind in sorted(kinds):
            item.add_marker(kind)
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(timeout_for(kinds)))


def pytest_report_header(config: pytest.Config) -> list[str]:
    import mcp
    import sqlean

    return [
        f"lore: python {platform.python_version()}, mcp {mcp.__version__ if hasattr(mcp, '__version__') else '?'}, "
        f"sqlite {sqlean.sqlite_version}, backends {BACKENDS}",
        _free_disk("at the start"),
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The run's Postgres servers write WAL until their tests end: a CI run that failed when its
    disk filled (servers gone, standbys not replaying) said so nowhere, so both ends say how much
    was free."""
    terminalreporter.write_line(_free_disk("at the end"))


def _free_disk(when: str) -> str:
    where = tempfile.gettempdir()
    return f"lore: {shutil.disk_usage(where).free / 2**30:.1f} GiB free in {where} {when}"


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector: ``LORE_TEST_DATABASE_URL`` (a database the tests
    may empty), or one started by ``pgserver`` in a temporary directory.

    Under pytest-xdist each worker is a process of its own: it starts its own ``pgserver``
    (its temporary directory is per worker), or gets a database of its own beside
    ``LORE_TEST_DATABASE_URL``'s, since tests empty the tables they share."""
    url = os.environ.get("LORE_TEST_DATABASE_URL")
    if url:
        yield database_per_worker(url, os.environ.get("PYTEST_XDIST_WORKER"))
        return
    with warnings.catch_warnings():
        # pgserver looks up a runtime dir at import; on a CI box without XDG_RUNTIME_DIR
        # platformdirs warns and falls back to /tmp, which is fine here.
        warnings.simplefilter("ignore")
        import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    s = open_store(backend, tmp_path, request)
    yield s
    s.close()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-MiniLM-L6-v2, loaded once for the whole session."""
    e = Embedder()
    e.start()
    e.wait()
    return e


@pytest.fixture
def service(store: Store, embedder: Embedder) -> LessonService:
    return LessonService(store, embedder, default_project="default")


@pytest.fixture
def server(service: LessonService) -> LoreServer:
    return build_server(service)


@pytest.fixture
def era(request: pytest.FixtureRequest) -> str:
    """The MCP era the ``client`` speaks (``pytest_generate_tests`` picks it per test)."""
    return str(request.param)


@pytest.fixture
async def client(server: LoreServer, era: str) -> AsyncIterator[Client]:
    """An in-memory MCP client connected to ``server``, speaking ``era``: ``legacy`` shakes hands
    with ``initialize`` and holds a session; the current revision starts, as its clients do, with
    ``server/discover`` (which names the server and its instructions) and sends neither."""
    async with connected(server, mode=client_mode(era)) as c:
        assert c.protocol_version == PROTOCOL_VERSIONS[era], f"the client meant to speak {era}"
        yield c


@pytest.fixture
def pristine_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store on a database nobody used, not even for another vector dimension (Postgres:
    ``pristine_url``, since the suite's shared database keeps its vector column)."""
    store = (
        open_local_store(tmp_path / "pristine.db")
        if backend == "local"
        else open_postgres_store(request.getfixturevalue("pristine_url"))
    )
    yield store
    store.close()


@pytest.fixture
def pristine_url(postgres_url: str) -> Iterator[str]:
    """A Postgres database of its own beside the suite's, dropped after the test."""
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    name = f"lore_pristine_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # a name made here, not user text
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
