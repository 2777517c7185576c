"""The local file's migrations: SQL, or a function where SQL cannot (an unloaded extension's table)."""

from __future__ import annotations

from collections.abc import Callable

from stores.engine import schema
from stores.sqlite.db import Connection, write_transaction, writes_refused_as_unavailable
from stores.sqlite.sql import LocalSqlTx

# The names in the tables written once in ``stores.engine.schema`` (``Types``, in its order).
_TYPES = schema.Types(
    "TEXT",
    "INTEGER",
    "TEXT",
    "TEXT",
    "INTEGER PRIMARY KEY AUTOINCREMENT",
    "INTEGER NOT NULL DEFAULT 0",
    " WITHOUT ROWID",
)

# What migrations 1 and 4 both make: a lesson's columns after its id, and its tags' table.
_LESSON_COLUMNS = """            org_id TEXT NOT NULL,
            project TEXT NOT NULL,
            problem TEXT NOT NULL,
            resolution TEXT NOT NULL,
            context TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            confidence REAL NOT NULL,
            source TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            expires_at TEXT,
            upvotes INTEGER NOT NULL DEFAULT 0,
            downvotes INTEGER NOT NULL DEFAULT 0,
            meta TEXT NOT NULL DEFAULT '{}',
            rev INTEGER NOT NULL
        );"""
_LESSON_TAGS = """        CREATE TABLE lesson_tags (
            tag TEXT NOT NULL,
            lesson_pk INTEGER NOT NULL REFERENCES lessons (pk) ON DELETE CASCADE,
            PRIMARY KEY (tag, lesson_pk)
        ) WITHOUT ROWID;"""


def _vectors_without_sqlite_vec(conn: Connection) -> None:
    """Move sqlite-vec's unreadable ``lesson_vectors`` into ``lesson_embeddings`` through its shadow
    tables (``_rowids``: a pk's chunk and offset; ``_vector_chunks00``: float32 vectors end to end),
    then remove its schema entry by hand (SQLite's way for a missing module) and the shadow tables."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "lesson_vectors_rowids" not in names:
        return
    conn.execute(f"CREATE TABLE lesson_embeddings ({VECTOR_COLUMNS})")
    conn.execute(
        "INSERT INTO lesson_embeddings (pk, embedding) "
        "SELECT r.rowid, substr(c.vectors, r.chunk_offset * d.size + 1, d.size) "
        "FROM lesson_vectors_rowids AS r "
        "JOIN lesson_vectors_vector_chunks00 AS c ON c.rowid = r.chunk_id "
        "JOIN (SELECT 4 * CAST(value AS INTEGER) AS size FROM lore_meta WHERE key = 'dim') AS d"
    )
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("DELETE FROM sqlite_master WHERE type = 'table' AND name = 'lesson_vectors'")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")
    for name in sorted(names):
        if name.startswith("lesson_vectors_"):
            conn.execute(f'DROP TABLE "{name}"')  # names read from the schema, all ours


# Made with the first vector: a lesson's pk and its unit vector as float32 bytes.
VECTOR_COLUMNS = "pk INTEGER PRIMARY KEY, embedding BLOB NOT NULL"


def _curation(conn: Connection) -> None:
    """Pairs kept apart, and ``activity.person`` where a file lacks it."""
    _run(conn, schema.curation_tables(_TYPES))
    if "person" not in {row[1] for row in conn.execute("PRAGMA table_info(activity)")}:
        conn.execute(f"ALTER TABLE activity ADD COLUMN {schema.person_column(_TYPES)}")


# Each runs once, in order, in a write transaction recording its version: re-running is harmless.
MIGRATIONS: list[tuple[int, str, str | Callable[[Connection], None]]] = [
    (
        1,
        "lessons",
        """
        CREATE TABLE lore_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO lore_meta (key, value) VALUES ('rev', '0');
        CREATE TABLE lessons (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,"""
        + _LESSON_COLUMNS
        + """        CREATE INDEX lessons_scope_id ON lessons (org_id, project, id);
        CREATE INDEX lessons_rev ON lessons (rev);"""
        + _LESSON_TAGS
        + """        CREATE INDEX lesson_tags_pk ON lesson_tags (lesson_pk);
        CREATE TABLE lesson_tombstones (pk INTEGER PRIMARY KEY, rev INTEGER NOT NULL);
        CREATE INDEX lesson_tombstones_rev ON lesson_tombstones (rev);
        CREATE VIRTUAL TABLE lessons_fts USING fts5 (
            problem, resolution, context, tags,
            content = '', contentless_delete = 1,
            tokenize = 'porter unicode61 remove_diacritics 2'
        );""",
    ),
    (2, "structured memory and history", schema.structured_tables(_TYPES)),
    (3, "orgs and api keys", schema.key_tables(_TYPES)),
    (
        4,
        "lesson ids unique per org and project",
        # Key (org, project, id): file-wide ids let a tenant learn of or block another's. SQLite
        # cannot drop UNIQUE, so the table is rebuilt keeping pks (FTS, vectors and tombstones
        # use them) and the AUTOINCREMENT counter, so none is reused; lesson_tags is set aside
        # around the swap so the drop cascades to nothing.
        """
        CREATE TABLE lesson_tags_keep AS SELECT tag, lesson_pk FROM lesson_tags;
        DROP TABLE lesson_tags;
        CREATE TABLE lessons_scoped (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,"""
        + _LESSON_COLUMNS
        + """        INSERT INTO sqlite_sequence (name, seq)
            SELECT 'lessons_scoped', seq FROM sqlite_sequence WHERE name = 'lessons';
        INSERT INTO lessons_scoped (pk, id, org_id, project, problem, resolution, context, tags, confidence,
                source, created_at, updated_at, expires_at, upvotes, downvotes, meta, rev)
            SELECT pk, id, org_id, project, problem, resolution, context, tags, confidence,
                source, created_at, updated_at, expires_at, upvotes, downvotes, meta, rev FROM lessons;
        DROP TABLE lessons;
        ALTER TABLE lessons_scoped RENAME TO lessons;
        CREATE UNIQUE INDEX lessons_scope_id ON lessons (org_id, project, id);
        CREATE INDEX lessons_rev ON lessons (rev);"""
        + _LESSON_TAGS
        + """        INSERT INTO lesson_tags (tag, lesson_pk) SELECT tag, lesson_pk FROM lesson_tags_keep;
        DROP TABLE lesson_tags_keep;
        CREATE INDEX lesson_tags_pk ON lesson_tags (lesson_pk)""",
    ),
    (
        5,
        "re-embedding beside the old vectors",
        # Re-embed's new vectors, until all swap in; stamp (updated_at then) redoes later edits.
        """
        CREATE TABLE lesson_reembed (pk INTEGER PRIMARY KEY, stamp TEXT NOT NULL, embedding BLOB NOT NULL)""",
    ),
    (6, "vectors in a plain table, without sqlite-vec", _vectors_without_sqlite_vec),
    (7, "oauth clients, codes and tokens", schema.oauth_tables(_TYPES)),
    (8, "the activity log", schema.activity_tables(_TYPES)),
    (9, "who registered each oauth client, and whether it was used", schema.oauth_registration_table(_TYPES)),
    (10, "pairs kept apart, and people's activity", _curation),
    (
        11,
        "each lesson's scope by pk, read by recall's full text before bm25 (not the wide rows)",
        "CREATE INDEX IF NOT EXISTS lessons_pk_scope ON lessons (pk, org_id, project, expires_at, confidence)",
    ),
]

SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate(conn: Connection) -> None:
    """Apply pending migrations."""
    refused = "so Lore cannot bring it to the current schema"
    with writes_refused_as_unavailable(conn, refused):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    with write_transaction(conn, refused=refused):
        schema.apply_pending(
            LocalSqlTx(conn),
            MIGRATIONS,
            SCHEMA_VERSION,
            lambda step: _run(conn, step),
            before_pending=lambda: _org_columns_named_as_on_postgres(conn),
        )


def _run(conn: Connection, step: str | Callable[[Connection], None]) -> None:
    if callable(step):
        step(conn)
        return
    # Migration SQL is ours (never user text) and holds no semicolons inside literals.
    for statement in step.split(";"):
        if statement.strip():
            conn.execute(statement.strip())


def _org_columns_named_as_on_postgres(conn: Connection) -> None:
    """Rename old files' ``org`` columns to ``org_id`` before pending migrations, so those are
    written once in today's names (SQLite renames indexes too; renamed tables are skipped)."""
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%'"  # a missing module's table (vec0) cannot be read
    ).fetchall()
    for (table,) in tables:
        columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}  # names from the schema
        if "org" in columns and "org_id" not in columns:
            conn.execute(f'ALTER TABLE "{table}" RENAME COLUMN org TO org_id')
