"""A new user's first mistakes, each answered in one sentence with a code (issue 20, item 2).

On the terminal that is one ``lore-memory: CODE: sentence`` line and no traceback (unless
``--debug``); over MCP it is the tool error. The cases: ``~`` and ``$VARS`` in path settings,
a database file or directory this user cannot write (made read-only for real: the child
processes drop root's permission override, ``tests/support/privileges.py``), remote mode at
a wrong path of a live team server, and the error examples of docs/tools.md, each checked against
what Lore answers for the input the page describes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlean
from mcp import StdioServerParameters

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.errors import CODES
from lore_mcp.services.lessons import LessonService
from stores import open_local_store
from stores.sqlite import db as local_db
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.oauth import oauth_server
from tests.support.plans import column, create_table, make_plan, schema_hash
from tests.support.privileges import bound_by_permissions, make_read_only, make_writable
from tests.support.processes import lore_command, lore_env, lore_http, remote_params, server_env
from tests.support.team import free_port, raw_post, team_server

ROOT = Path(__file__).resolve().parents[2]
# The "Errors" section of the tool reference (it was the README's "### Errors").
TOOLS_PAGE = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
# The page's examples name these in place of the test's own directory and server.
EXAMPLE_DIR = "/srv/lore"
EXAMPLE_SERVER = "https://lore.example.com"


def run(
    env: dict[str, str], *args: str, cwd: Path | None = None, bound: bool = False
) -> subprocess.CompletedProcess[str]:
    """``lore-memory ARGS``; ``bound``: as a user whom read-only files stop, even under root."""
    command = lore_command(*args)
    return subprocess.run(
        bound_by_permissions(command) if bound else command,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def only_line(stderr: str) -> str:
    """The one line a failed command printed, without its ``lore-memory: `` prefix."""
    assert "Traceback" not in stderr and 'File "' not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lore-memory: "), stderr
    return lines[0].removeprefix("lore-memory: ")


def read_only_sentence(db: Path, consequence: str) -> str:
    return (
        f"The Lore database file {db} is read-only for this user, {consequence}: "
        f"run `chmod u+w {db}` or set LORE_DB_PATH to a writable file."
    )


def read_only_directory_sentence(folder: Path, consequence: str) -> str:
    return (
        f"The directory {folder}, where SQLite keeps the Lore database's lore.db-wal and lore.db-shm "
        f"files, is read-only for this user, {consequence}: run `chmod u+w {folder}` or set "
        "LORE_DB_PATH to a file in a writable directory."
    )


T = TypeVar("T")


def in_a_thread(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run async ``work`` to the end on a loop of its own, in a thread: module fixtures may be
    set up from inside a test's running loop (``request.getfixturevalue``)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(work())).result()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- ~ and environment variables in paths --------------------------------------------------------


def test_a_tilde_or_a_variable_in_a_path_setting_or_flag_is_expanded(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {**lore_env(Path("~/lore.db")), "HOME": str(home), "LORE_DATA": str(tmp_path / "data")}
    assert run(env, "migrate", cwd=work).returncode == 0
    assert (home / "lore.db").is_file()
    assert not (work / "~").exists(), "a directory named ~ was created where the command ran"
    # The flag goes through the same expansion, and so does a variable.
    assert run(env, "migrate", "--db-path", "$LORE_DATA/flag.db", cwd=work).returncode == 0
    assert (tmp_path / "data" / "flag.db").is_file()
    # And the paths other commands take.
    exported = run(env, "export", "--out", "~/lessons.jsonl", cwd=work)
    assert exported.returncode == 0, exported.stderr
    assert (home / "lessons.jsonl").is_file()
    imported = run(env, "import", "~/lessons.jsonl", cwd=work)
    assert imported.returncode == 0, imported.stderr
    assert list(work.iterdir()) == []


def test_a_variable_that_is_not_set_in_lore_db_path_is_one_sentence_and_creates_nothing(
    tmp_path: Path,
) -> None:
    out = run({**lore_env(tmp_path), "LORE_DB_PATH": "$LORE_HOME/lore.db"}, "migrate", cwd=tmp_path)
    assert out.returncode == 2
    assert only_line(out.stderr) == (
        "VALIDATION_ERROR: invalid configuration: LORE_DB_PATH (--db-path): the path "
        "'$LORE_HOME/lore.db' names $LORE_HOME, which is not set."
    )
    assert list(tmp_path.iterdir()) == []


# -- a database this user cannot write -----------------------------------------------------------


def seeded_database(folder: Path, embedder: Embedder) -> Path:
    """A database holding one lesson, closed (so no -wal or -shm file is left beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "lore.db"
    store = open_local_store(db)
    try:
        service = LessonService(store, embedder, default_project="default")

        async def seed() -> None:
            async with connected(build_server(service)) as client:
                await call(
                    client,
                    "save_lesson",
                    problem="pip install times out behind the office proxy",
                    resolution="set HTTPS_PROXY before running pip",
                )

        in_a_thread(seed)
    finally:
        store.close()
    assert not Path(f"{db}-wal").exists()
    return db


class ReadOnlySession:
    """What a user saw from `lore-memory mcp` (stdio) on a database file they cannot write."""

    def __init__(self, db: Path, digest_before: str) -> None:
        self.db = db
        self.digest_before = digest_before
        self.save_error: ToolFailed | None = None
        self.recalled: list[str] = []
        self.listed = 0
        self.stderr = ""


@pytest.fixture(scope="module")
def read_only_session(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[ReadOnlySession]:
    db = seeded_database(tmp_path_factory.mktemp("read-only"), embedder)
    make_read_only(db)
    session = ReadOnlySession(db, file_digest(db))
    log = tmp_path_factory.mktemp("stderr") / "mcp.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=bound_by_permissions(lore_command("mcp"), stderr_to=log)[1:],
        env=server_env(db),
    )

    async def use() -> None:
        async with connected(params) as client:
            try:
                await call(client, "save_lesson", problem="a new lesson", resolution="never stored")
            except ToolFailed as exc:
                session.save_error = exc
            found = await call(client, "recall_lessons", query="pip behind a proxy")
            session.recalled = [lesson["problem"] for lesson in found["lessons"]]
            session.listed = len((await call(client, "list_lessons"))["lessons"])

    try:
        in_a_thread(use)
        session.stderr = log.read_text()
        yield session
    finally:
        make_writable(db)


def test_a_save_to_a_read_only_database_answers_unavailable_naming_the_file_and_the_fix(
    read_only_session: ReadOnlySession,
) -> None:
    error = read_only_session.save_error
    assert error is not None, "the save succeeded on a read-only database"
    assert error.code == "UNAVAILABLE"
    assert error.message == read_only_sentence(read_only_session.db, "so the call changed nothing")
    # Reading still works, and nothing was stored.
    assert read_only_session.recalled == ["pip install times out behind the office proxy"]
    assert read_only_session.listed == 1
    assert file_digest(read_only_session.db) == read_only_session.digest_before


def test_serving_a_read_only_database_says_so_in_one_line_at_start(
    read_only_session: ReadOnlySession,
) -> None:
    assert "Traceback" not in read_only_session.stderr
    warnings = [line for line in read_only_session.stderr.splitlines() if line.startswith("lore-memory:")]
    assert warnings == [
        "lore-memory: WARNING: UNAVAILABLE: "
        + read_only_sentence(read_only_session.db, "so recall works but every save will answer UNAVAILABLE")
    ]


def test_a_command_that_writes_refuses_a_read_only_database_at_start(tmp_path: Path) -> None:
    db = tmp_path / "lore.db"
    assert run(lore_env(db), "migrate").returncode == 0
    make_read_only(db)
    try:
        out = run(lore_env(db), "init", bound=True)
        assert out.returncode == 1
        assert only_line(out.stderr) == "UNAVAILABLE: " + read_only_sentence(db, "so this command cannot run")
        # Reading it is fine.
        assert run(lore_env(db), "keys", "list", bound=True).returncode == 0
    finally:
        make_writable(db)


def test_a_read_only_directory_stops_the_server_at_start_in_one_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "lore.db"
    assert run(lore_env(db), "migrate").returncode == 0
    make_read_only(folder)
    try:
        out = run(lore_env(db), "mcp", bound=True)
        assert out.returncode == 1
        assert only_line(out.stderr) == "UNAVAILABLE: " + read_only_directory_sentence(
            folder, "so Lore cannot open its database"
        )
    finally:
        make_writable(folder)


def test_a_database_owned_by_another_user_names_the_owner_and_chown(tmp_path: Path) -> None:
    import os
    import pwd

    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    db = tmp_path / "lore.db"
    assert run(lore_env(db), "migrate").returncode == 0
    os.chown(db, 65534, 65534)
    owner = pwd.getpwuid(65534).pw_name
    out = run(lore_env(db), "init", bound=True)
    assert out.returncode == 1
    assert only_line(out.stderr) == (
        f"UNAVAILABLE: The Lore database file {db} belongs to {owner} and is read-only for this user, "
        f"so this command cannot run: run `sudo chown root {db}*` or set LORE_DB_PATH to a writable file."
    )


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    # A damaged database: it says it is at the current schema, but its tables are gone.
    db = tmp_path / "lore.db"
    assert run(lore_env(db), "migrate").returncode == 0
    conn = sqlean.connect(str(db), isolation_level=None)
    conn.execute("DROP TABLE api_keys")
    conn.close()
    out = run(lore_env(db), "keys", "list")
    assert out.returncode == 1
    line = only_line(out.stderr)
    assert line.startswith("INTERNAL_ERROR: keys stopped on an unexpected error (") and "api_keys" in line
    assert line.endswith("run it again with --debug to see where.")
    debug = run(lore_env(db), "keys", "list", "--debug")
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == "lore-memory: " + line


# -- remote mode at a wrong URL --------------------------------------------------------------------


@pytest.fixture(scope="module")
def team_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A real team server process: (its base URL, a root key)."""
    folder = tmp_path_factory.mktemp("team")
    env = lore_env(folder / "team.db")
    created = run(env, "init", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    with lore_http(env, folder / "server.log") as url:
        yield url.removesuffix("/mcp"), key


async def remote_error(api_url: str, key: str) -> ToolFailed:
    async with connected(remote_params(api_url, key)) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "list_lessons")
    return err.value


async def test_remote_mode_at_a_wrong_path_of_a_live_server_says_there_is_no_lore_endpoint(
    team_process: tuple[str, str],
) -> None:
    base, key = team_process
    error = await remote_error(f"{base}/lore", key)
    assert error.code == "UNAVAILABLE"
    assert error.message == (
        f"There is no Lore endpoint at {base}/lore/mcp: the server there answered 404 Not Found, so nothing "
        f"was sent; set LORE_API_URL to the team server's base URL or its /mcp endpoint, such as {base}/mcp."
    )
    # The same server at the right URL answers, and a port nobody listens on is another sentence.
    async with connected(remote_params(base, key)) as client:
        assert (await call(client, "list_lessons"))["lessons"] == []
    down = await remote_error(f"http://127.0.0.1:{free_port()}", key)
    assert down.message.startswith("Cannot reach the team server at")


# -- the docs' error examples are Lore's actual text -------------------------------------------


def docs_error_examples() -> list[str]:
    """Every ``CODE: sentence`` quoted as inline code in docs/tools.md's "## Errors" section."""
    start = TOOLS_PAGE.index("\n## Errors\n")
    section = TOOLS_PAGE[start : TOOLS_PAGE.index("\n## ", start + 1)]
    examples = []
    for _, text in re.findall(r"(`+)(.+?)\1", section, re.DOTALL):
        text = " ".join(text.split())
        code = text.partition(": ")[0]
        if code in CODES and ": " in text:
            examples.append(text)
    return examples


def matches(example: str, actual: str) -> bool:
    """Equal, where each "…" in the example stands for any text (a detail that varies)."""
    pattern = ".*".join(re.escape(part) for part in example.split("…"))
    return re.fullmatch(pattern, actual, re.DOTALL) is not None


@pytest.fixture
def local_service(tmp_path: Path, embedder: Embedder) -> Iterator[LessonService]:
    store = open_local_store(tmp_path / "example.db")
    yield LessonService(store, embedder, default_project="default")
    store.close()


async def confidence_out_of_range(request: pytest.FixtureRequest) -> str:
    """A save with confidence 1.5."""
    service = request.getfixturevalue("local_service")
    async with connected(build_server(service)) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "save_lesson", problem="p", resolution="r", confidence=1.5)
    return str(err.value)


async def past_the_deadline(request: pytest.FixtureRequest) -> str:
    """A call still running at LORE_REQUEST_TIMEOUT_S."""
    service = request.getfixturevalue("local_service")
    async with connected(build_server(service, request_timeout_s=0.000001)) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "schema")
    return str(err.value)


async def locked_by_another_process(request: pytest.FixtureRequest) -> str:
    """A write waiting on another connection's write beyond the busy timeout (shortened here)."""
    service: LessonService = request.getfixturevalue("local_service")
    request.getfixturevalue("monkeypatch").setattr(local_db, "BUSY_TIMEOUT_MS", 500)
    holder = sqlean.connect(str(service.store._backend.path), isolation_level=None)  # type: ignore[attr-defined]
    try:
        async with connected(build_server(service)) as client:
            plan = make_plan(await schema_hash(client), create_table("notes", column("v", "text")))
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(ToolFailed) as err:
                await call(client, "apply", plan=plan)
            holder.execute("ROLLBACK")
    finally:
        holder.close()
    return str(err.value)


async def failed_authentications(request: pytest.FixtureRequest) -> str:
    """More than 30 failed authentications in a minute from one address."""
    service: LessonService = request.getfixturevalue("local_service")
    with team_server(service.store, request.getfixturevalue("embedder")) as server:
        for _ in range(40):
            response = await asyncio.to_thread(raw_post, server.url, "Bearer lore_sk_" + "Q" * 32)
            if response.status_code == 429:
                return str(response.json()["error"]["message"])
    raise AssertionError("no 429 after 40 failed authentications")


async def refused_credential(request: pytest.FixtureRequest) -> str:
    """A bearer this server never issued, on a team server with OAuth (as `lore-memory mcp
    --transport http` serves): the 401's JSON-RPC message, with its metadata URL."""
    service: LessonService = request.getfixturevalue("local_service")
    with oauth_server(service.store, request.getfixturevalue("embedder")) as server:
        response = await asyncio.to_thread(raw_post, server.url, "Bearer lore_sk_" + "Q" * 32)
    assert response.status_code == 401
    return str(response.json()["error"]["message"]).replace(server.base, EXAMPLE_SERVER)


async def key_store_unreachable(request: pytest.FixtureRequest) -> str:
    """A valid key sent while the team server's Postgres refuses connections."""
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    from stores import open_postgres_store

    url = request.getfixturevalue("postgres_url")
    name = f"lore_first_run_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # a name made here, not user text
        store = open_postgres_store(make_url(url).set(database=name).render_as_string(hide_password=False))
        try:
            with team_server(store, request.getfixturevalue("embedder")) as server:
                key = server.keys.init_org("local").key
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
                )
                response = await asyncio.to_thread(raw_post, server.url, f"Bearer {key}")
                assert response.status_code == 503, response.text
                return str(response.json()["error"]["message"])
        finally:
            store.close()
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def heavy_slots_taken(request: pytest.FixtureRequest) -> str:
    """A heavy call (query_rows) while the one slot for heavy calls is taken and the caller's
    org already has the most calls waiting for it."""
    from lore_mcp.transport.admission import HeavyGate

    gate = HeavyGate(1)
    release, taken = asyncio.Event(), asyncio.Event()

    async def heavy(org: str, key: str) -> None:
        async with gate.slot(org, key):
            taken.set()
            await release.wait()

    holder = asyncio.create_task(heavy("globex", "theirs"))
    await taken.wait()
    # Over stdio the caller has no org or key: "" for both.
    waiting = [asyncio.create_task(heavy("", f"waiting {i}")) for i in range(gate.queue_per_org)]
    await asyncio.sleep(0)
    try:
        async with connected(
            build_server(request.getfixturevalue("local_service"), heavy_gate=gate)
        ) as client:
            with pytest.raises(ToolFailed) as err:
                await call(client, "query_rows", table="notes")
    finally:
        release.set()
        await asyncio.gather(holder, *waiting, return_exceptions=True)
    return str(err.value)


async def unset_variable_in_lore_db_path(request: pytest.FixtureRequest) -> str:
    """LORE_DB_PATH=$LORE_HOME/lore.db with LORE_HOME not set."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    out = run({**lore_env(tmp_path), "LORE_DB_PATH": "$LORE_HOME/lore.db"}, "migrate", cwd=tmp_path)
    return only_line(out.stderr)


async def save_to_a_read_only_database(request: pytest.FixtureRequest) -> str:
    """A save over stdio to /srv/lore/lore.db that this user cannot write."""
    session: ReadOnlySession = request.getfixturevalue("read_only_session")
    assert session.save_error is not None
    return str(session.save_error).replace(str(session.db.parent), EXAMPLE_DIR)


async def read_only_directory_at_start(request: pytest.FixtureRequest) -> str:
    """`lore-memory mcp` on /srv/lore/lore.db when /srv/lore is read-only."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "lore.db"
    assert run(lore_env(db), "migrate").returncode == 0
    make_read_only(folder)
    try:
        return only_line(run(lore_env(db), "mcp", bound=True).stderr).replace(str(folder), EXAMPLE_DIR)
    finally:
        make_writable(folder)


async def remote_at_a_wrong_path(request: pytest.FixtureRequest) -> str:
    """LORE_API_URL=https://lore.example.com/lore, where the team server is at the root."""
    base, key = request.getfixturevalue("team_process")
    return str(await remote_error(f"{base}/lore", key)).replace(base, EXAMPLE_SERVER)


async def remote_server_down(request: pytest.FixtureRequest) -> str:
    """LORE_API_URL=https://lore.example.com with nothing listening there."""
    base = f"http://127.0.0.1:{free_port()}"
    return str(await remote_error(base, "lore_sk_" + "a" * 32)).replace(base, EXAMPLE_SERVER)


# Each example's first words (docs/tools.md, "Errors"), and how to make Lore answer it.
PRODUCERS: dict[str, Callable[[pytest.FixtureRequest], Awaitable[str]]] = {
    "VALIDATION_ERROR: Invalid arguments: confidence": confidence_out_of_range,
    "UNAVAILABLE: The request took longer": past_the_deadline,
    "UNAVAILABLE: The Lore database stayed locked": locked_by_another_process,
    "BUSY: The server is busy with other heavy work": heavy_slots_taken,
    "RATE_LIMITED: more than 30 failed authentications": failed_authentications,
    "UNAUTHORIZED: This request needs the header": refused_credential,
    "UNAVAILABLE: The team server's database is unreachable": key_store_unreachable,
    "VALIDATION_ERROR: invalid configuration: LORE_DB_PATH": unset_variable_in_lore_db_path,
    "UNAVAILABLE: The Lore database file /srv/lore/lore.db is read-only": save_to_a_read_only_database,
    "UNAVAILABLE: The directory /srv/lore,": read_only_directory_at_start,
    "UNAVAILABLE: There is no Lore endpoint": remote_at_a_wrong_path,
    "UNAVAILABLE: Cannot reach the team server": remote_server_down,
}


def producer_of(example: str) -> Callable[[pytest.FixtureRequest], Awaitable[str]]:
    found = [produce for prefix, produce in PRODUCERS.items() if example.startswith(prefix)]
    assert len(found) == 1, f"no single way to produce the docs' example {example!r}; add one to PRODUCERS"
    return found[0]


def test_the_docs_quote_what_a_first_run_mistake_answers() -> None:
    examples = docs_error_examples()
    first_run = [prefix for prefix in PRODUCERS if "LORE_DB_PATH" in prefix or "/srv/lore" in prefix]
    first_run += ["UNAVAILABLE: There is no Lore endpoint", "UNAVAILABLE: Cannot reach the team server"]
    for prefix in first_run:
        assert any(e.startswith(prefix) for e in examples), (
            f"docs/tools.md has no example starting {prefix!r}"
        )


@pytest.mark.parametrize("example", docs_error_examples(), ids=lambda example: example[:60])
async def test_each_error_example_in_the_docs_is_what_lore_answers(
    example: str, request: pytest.FixtureRequest
) -> None:
    started = time.monotonic()
    actual = await producer_of(example)(request)
    assert matches(example, actual), f"docs:  {example}\nLore:   {actual}"
    assert time.monotonic() - started < 60
