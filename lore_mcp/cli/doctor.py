"""``lore-memory doctor``: check each part on its own (one broken part hides no other) with its fix."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lore_mcp.app import open_store
from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from lore_mcp.embedding.embedder import Embedder

# The configured model, loaded once for the checks that need it (model, vectors).
_EMBEDDERS: dict[tuple[object, ...], Embedder] = {}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def run_doctor(_args: argparse.Namespace, settings: Settings) -> int:
    return 0 if run_checks(settings) else 1


def run_checks(settings: Settings, out: Callable[[str], None] = print) -> bool:
    """Run every check for the configured store; print one line each; True when all pass."""
    store_checks = [check_remote] if settings.store == "remote" else [check_database, check_vectors]
    checks: list[Callable[[Settings], Check]] = [check_sqlite, check_model, *store_checks]
    passed = True
    for check in checks:
        try:
            result = check(settings)
        except Exception as exc:  # a check that breaks is a failed check, with its reason
            result = Check(check.__name__.removeprefix("check_"), False, f"{type(exc).__name__}: {exc}")
        passed &= result.ok
        out(f"{'ok  ' if result.ok else 'FAIL'}  {result.name}: {result.detail}")
    out("All checks passed." if passed else "Some checks failed; each FAIL line says what to do.")
    return passed


def check_sqlite(_settings: Settings) -> Check:
    """SQLite and its FTS5; vectors are numpy-searched BLOBs, so no sqlite-vec (the line says so)."""
    try:
        import sqlean
    except ImportError as exc:
        return Check(
            "sqlite", False, f"{exc.name} is not installed; run `pip install --force-reinstall sqlean.py`."
        )
    conn = sqlean.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5 (body)")
    except Exception as exc:
        return Check(
            "sqlite",
            False,
            f"SQLite {sqlean.sqlite_version} has no FTS5 ({exc}); reinstall with "
            "`pip install --force-reinstall sqlean.py` (a wheel for this platform is needed).",
        )
    finally:
        conn.close()
    detail = f"SQLite {sqlean.sqlite_version} (sqlean.py) with FTS5; vectors in numpy, no sqlite-vec needed"
    return Check("sqlite", True, detail)


def configured_embedder(settings: Settings) -> Embedder:
    """The embedder the settings ask for, made once per model for all the checks."""
    from lore_mcp.embedding.embedder import embedder_for

    key = (settings.embedding_model, getattr(settings, "embedding_url", None))
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = embedder_for(settings)
    return _EMBEDDERS[key]


def check_model(settings: Settings) -> Check:
    from lore_mcp.errors import ModelUnavailable

    started = time.monotonic()
    embedder = configured_embedder(settings)
    try:
        embedder.wait(timeout=300)
        vector = embedder.encode_query("does the model load offline?")
    except ModelUnavailable as exc:
        if embedder.runtime == "endpoint":  # the sentence names the endpoint and what to change
            return Check("model", False, exc.message)
        return Check(
            "model",
            False,
            f"{exc.message} The default model ships inside lore-memory (reinstall it if its files are "
            "damaged); another model needs the sentence-transformers extra and must be a local path or "
            "already in the Hugging Face cache.",
        )
    return Check(
        "model",
        True,
        f"{settings.embedding_model} loads offline in {time.monotonic() - started:.1f} s, {vector.shape[0]} dimensions; "
        f"encodes on {embedder.runtime}",
    )


def check_database(settings: Settings) -> Check:
    from lore_mcp.cli.common import read_only_problem
    from stores import StoreError

    where = str(settings.db_path) if settings.store == "local" else "Postgres at LORE_DATABASE_URL"
    if settings.store == "postgres" and not settings.database_url:
        return Check("database", False, "LORE_STORE=postgres needs LORE_DATABASE_URL.")
    try:
        store = open_store(settings)
    except StoreError as exc:  # the local store's sentences name the file themselves
        return Check("database", False, str(exc) if settings.store == "local" else f"{where}: {exc}")
    # SQLite opens a file it may not write without a word; only the first save would fail.
    problem = read_only_problem(settings)
    try:
        lessons = store.count(settings.org)
        # Opening migrates, which creates the vector extension or fails naming what to install.
        extra = ", pgvector enabled" if settings.store == "postgres" else ", writable (with its directory)"
        if problem is None:
            # A real write, rolled back: a stuck writer or read-only database shows (as on /healthz).
            started = time.perf_counter()
            store.probe_write()
            extra += f"; a write began and rolled back in {(time.perf_counter() - started) * 1000:.0f} ms"
    except StoreError as exc:
        return Check("database", False, f"{where}: a write could not begin: {exc}")
    finally:
        store.close()
    if problem is not None:
        return Check("database", False, problem.sentence("so every save would answer UNAVAILABLE"))
    detail = f"{where} opens at the current schema{extra}; {lessons} lessons in org {settings.org!r}"
    return Check("database", True, detail)


def check_vectors(settings: Settings) -> Check:
    """The store's vectors against the configured model's (``lore_mcp.embedding.identity``)."""
    from lore_mcp.embedding.identity import configure_fix, describe_model, running_model

    if settings.store == "postgres" and not settings.database_url:
        return Check("vectors", False, "LORE_STORE=postgres needs LORE_DATABASE_URL.")
    store = open_store(settings)
    try:
        recorded, unfinished = store.models.recorded(), store.models.reembed_target()
    finally:
        store.close()
    embedder = configured_embedder(settings)
    embedder.wait(timeout=300)  # a model that does not load fails here with check_model's reason
    running = running_model(embedder)
    later = (
        f"; an unfinished `lore-memory reembed` to {unfinished.name} is kept: run it again to finish it"
        if unfinished is not None
        else ""
    )
    if recorded is None:
        return Check("vectors", True, f"none yet; the first save records {describe_model(running)}{later}")
    if recorded.makes_same_vectors(running):
        return Check("vectors", True, f"from {describe_model(running)}, the configured model{later}")
    if not recorded.recorded and recorded.dimension == running.dimension:
        return Check(
            "vectors",
            True,
            f"{recorded.dimension} dimensions from a model Lore did not record; the next save records "
            f"{running.name} as theirs (run `lore-memory reembed` if another model made them){later}",
        )
    return Check(
        "vectors",
        False,
        f"the store's vectors come from {describe_model(recorded, running)} but the configured model is "
        f"{describe_model(running, recorded)}, so saves and recalls will be refused. Run `lore-memory reembed` "
        f"to re-embed the store with {running.name}, or {configure_fix(recorded)}{later}.",
    )


def check_remote(settings: Settings) -> Check:
    from lore_mcp.settings import mcp_url

    if not settings.api_url or not settings.api_key:
        return Check("team server", False, "LORE_STORE=remote needs LORE_API_URL and LORE_API_KEY.")
    url = mcp_url(settings.api_url)
    health = url.removesuffix("/mcp") + "/healthz"
    problem = _health_problem(settings.api_url, url, health) or _key_problem(url, health, settings.api_key)
    return Check("team server", problem is None, problem or f"{url} is up and accepts the key")


def _health_problem(api_url: str, url: str, health: str) -> str | None:
    """Why ``/healthz`` says there is no working team server at ``api_url``, or None."""
    import httpx2

    from lore_mcp.transport.remote import api_url_fix

    try:
        response = httpx2.get(health, timeout=10)
    except httpx2.HTTPError as exc:
        return f"cannot reach {health} ({type(exc).__name__}); check LORE_API_URL."
    if response.status_code == 404:
        return (
            f"there is no Lore team server at {api_url} ({health} answered 404 Not Found); "
            f"{api_url_fix(url)}."
        )
    if response.status_code != 200:
        return f"{health} answered {response.status_code}: {response.text[:200]}"
    return None


def _key_problem(url: str, health: str, api_key: str) -> str | None:
    """Why the MCP endpoint refuses an ``initialize`` with the key, or None."""
    import httpx2

    from lore_mcp.transport.remote import no_endpoint

    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "doctor", "version": "0"},
    }
    probe = httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    if probe.status_code == 401:
        return "the server refused LORE_API_KEY (unknown, revoked or malformed)."
    if probe.status_code == 404:
        return no_endpoint(url, f"although {health} is up")
    return f"{url} answered {probe.status_code}." if probe.status_code >= 400 else None
