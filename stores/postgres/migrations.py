"""The Postgres migrations (shared runner), with the pgvector extension and the RLS role."""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, text

from stores.engine import schema
from stores.errors import UnavailableError
from stores.postgres.db import RLS_ROLE, unavailable_on_failure, unbounded
from stores.postgres.dims import EMBEDDING_INLINE
from stores.postgres.sql import PostgresSqlTx

logger = logging.getLogger("stores.postgres")

# Migrations of every Lore process serialise on this advisory lock key.
MIGRATION_LOCK = 0x4C4F5245  # "LORE"

# The names in the tables written once in ``stores.engine.schema`` (``Types``, in its order).
_TYPES = schema.Types(
    "text", "bigint", "jsonb", "timestamptz", "bigserial PRIMARY KEY", "boolean NOT NULL DEFAULT false", ""
)


def _org_policy(*tables: str, column: str = "org_id") -> str:
    """RLS on ``tables``: a transaction sees and writes only its ``lore.org``'s rows."""
    return "".join(
        f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        CREATE POLICY {table}_org ON {table}
            USING ({column} = current_setting('lore.org', true))
            WITH CHECK ({column} = current_setting('lore.org', true));"""
        for table in tables
    )


_VECTORS = "EXISTS (SELECT FROM lore_meta WHERE key = 'dim')"  # the column exists (``PostgresDims``)
# The full-text index's entries: a row's words and its scope word (migration 15).
_SCOPED_WORDS = "(tsv || array_to_tsvector(ARRAY[lore_scope_word(org_id, project)]))"
MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "lessons",
        """
        CREATE TABLE lore_meta (key text PRIMARY KEY, value text NOT NULL);
        -- array_to_string is only STABLE; for text[] it cannot change, and a generated
        -- column needs an IMMUTABLE expression.
        CREATE FUNCTION lore_tags_text(tags text[]) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string(tags, ' ') $$;
        CREATE TABLE lessons (
            pk bigserial PRIMARY KEY,
            id text NOT NULL UNIQUE,
            org_id text NOT NULL,
            project text NOT NULL,
            problem text NOT NULL,
            resolution text NOT NULL,
            context text,
            tags text[] NOT NULL DEFAULT '{}',
            confidence double precision NOT NULL,
            source text,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            expires_at timestamptz,
            upvotes integer NOT NULL DEFAULT 0,
            downvotes integer NOT NULL DEFAULT 0,
            meta jsonb NOT NULL DEFAULT '{}',
            tsv tsvector GENERATED ALWAYS AS (
                to_tsvector('english'::regconfig, problem || ' ' || resolution || ' '
                    || coalesce(context, '') || ' ' || lore_tags_text(tags))
            ) STORED
        );
        CREATE INDEX lessons_scope_id ON lessons (org_id, project, id);
        CREATE INDEX lessons_tags ON lessons USING gin (tags);
        CREATE INDEX lessons_tsv ON lessons USING gin (tsv);"""
        + _org_policy("lessons"),
    ),
    (
        2,
        "structured memory and history",
        schema.structured_tables(_TYPES)
        + _org_policy("mem_tables", "mem_rows", "commits", "commit_targets", "snapshots"),
    ),
    (
        3,
        "orgs and api keys",
        schema.key_tables(_TYPES)
        + _org_policy("orgs", column="id")
        + _org_policy("api_keys")
        + """
        -- Authentication looks a key up before it knows the org: a transaction that sets
        -- lore.key_hash may read exactly the one row with that digest (permissive policies
        -- add up, so for SELECT this widens the one above), and may change nothing.
        CREATE POLICY api_keys_lookup ON api_keys FOR SELECT
            USING (key_hash = current_setting('lore.key_hash', true));""",
    ),
    (
        4,
        "full-text candidates through the GIN index",
        # Under RLS the GIN index on tsv goes unused (@@ is not LEAKPROOF: it runs after the policy on
        # every org row). These functions run as the migrating login (one bypassing RLS uses the index),
        # filter by the caller's lore.org and return only keys it then reads under its policies.
        """
        -- Estimated lessons per term, from the planner's statistics on tsv (most common
        -- lexemes and their frequencies; others get half the least frequency, as the
        -- planner assumes): choosing the rare terms costs no scan. NULL for a term
        -- with no lexeme (an English stopword); at least 1 for the others.
        CREATE FUNCTION lore_term_postings(terms text[]) RETURNS double precision[]
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        BEGIN
            -- PL/pgSQL keeps this plan for the session; a SQL function would plan the
            -- pg_stats view again on every call.
            RETURN (
                SELECT coalesce(array_agg(
                    CASE WHEN t.lexeme IS NOT NULL THEN greatest(1, coalesce(
                        st.freqs[array_position(st.lexemes, t.lexeme)],
                        st.freqs[cardinality(st.lexemes) + 1] / 2,
                        0) * greatest(c.reltuples, 0)) END
                    ORDER BY t.ord), '{}')
                FROM (SELECT u.ord, (tsvector_to_array(to_tsvector('english', u.term)))[1] AS lexeme
                      FROM unnest(terms) WITH ORDINALITY AS u(term, ord)) AS t
                CROSS JOIN pg_class AS c
                LEFT JOIN (SELECT most_common_elems::text::text[] AS lexemes, most_common_elem_freqs AS freqs
                           FROM pg_stats
                           WHERE schemaname = 'public' AND tablename = 'lessons' AND attname = 'tsv') AS st
                    ON true
                WHERE c.oid = 'public.lessons'::regclass
            );
        END
        $$;
        -- The best full-text matches in the caller's org (lore.org) and project.
        CREATE FUNCTION lore_lexical_candidates(
            p_project text, p_query text, p_limit integer, p_now timestamptz,
            p_min_confidence double precision, p_tags text[]
        ) RETURNS SETOF bigint
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        BEGIN
            -- EXECUTE plans with this call's values, so the planner sees how rare the terms are.
            RETURN QUERY EXECUTE
                'SELECT pk FROM public.lessons
                  WHERE tsv @@ to_tsquery(''english'', $2)
                    AND org_id = current_setting(''lore.org'', true) AND project = $1
                    AND (expires_at IS NULL OR expires_at > $4) AND confidence >= $5
                    AND (cardinality($6) = 0 OR tags @> $6)
                  ORDER BY ts_rank(tsv, to_tsquery(''english'', $2)) DESC LIMIT $3'
                USING p_project, p_query, p_limit, p_now, p_min_confidence, p_tags;
        END
        $$;""",
    ),
    (
        5,
        "lesson ids unique per org and project",
        # Key (org, project, id): global ids let a tenant probe or block another's despite RLS.
        """
        ALTER TABLE lessons DROP CONSTRAINT IF EXISTS lessons_id_key;
        DROP INDEX IF EXISTS lessons_scope_id;
        ALTER TABLE lessons ADD CONSTRAINT lessons_scope_id UNIQUE (org_id, project, id);""",
    ),
    (
        6,
        "re-embedding beside the old vectors",
        # Re-embed's new vectors wait here until all are swapped in (stamp: updated_at when computed, so a
        # later edit is redone), of any dimension. Only the owner uses it: RLS with no policy shows none.
        """
        CREATE TABLE lesson_reembed (pk bigint PRIMARY KEY, stamp timestamptz NOT NULL, embedding vector NOT NULL);
        ALTER TABLE lesson_reembed ENABLE ROW LEVEL SECURITY;""",
    ),
    (
        7,
        "full-text candidates ordered by the query's entities",
        # Migration 4's function, but ordering $2's finds by $3 (ranking.candidate_terms), so of
        # a thousand lessons naming one person the one with the question's number comes first.
        # The old function stays for previous-version servers during an upgrade.
        """
        CREATE FUNCTION lore_lexical_candidates(
            p_project text, p_query text, p_order text, p_limit integer, p_now timestamptz,
            p_min_confidence double precision, p_tags text[]
        ) RETURNS SETOF bigint
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        BEGIN
            -- The queries are parsed once here: inside the statement, to_tsquery (not
            -- immutable) would be parsed again for every row ts_rank scores.
            RETURN QUERY EXECUTE
                'SELECT pk FROM public.lessons
                  WHERE tsv @@ $2
                    AND org_id = current_setting(''lore.org'', true) AND project = $1
                    AND (expires_at IS NULL OR expires_at > $5) AND confidence >= $6
                    AND (cardinality($7) = 0 OR tags @> $7)
                  ORDER BY ts_rank(tsv, $3) DESC LIMIT $4'
                USING p_project, to_tsquery('english', p_query), to_tsquery('english', p_order),
                      p_limit, p_now, p_min_confidence, p_tags;
        END
        $$;""",
    ),
    (
        8,
        "full-text indexes without a pending list",
        # GIN's pending list (merged by VACUUM, autoanalyze or at 4 MB) is read by every search:
        # after 10,000 saves, 316 pages, recall p50 31 ms vs 20 ms merged (benchmarks/run.py).
        # Entries now go straight into the index; saves were not measurably slower.
        """
        ALTER INDEX lessons_tsv SET (fastupdate = off);
        ALTER INDEX lessons_tags SET (fastupdate = off);
        SELECT gin_clean_pending_list('lessons_tsv'::regclass), gin_clean_pending_list('lessons_tags'::regclass);
        """,
    ),
    (9, "oauth clients, codes and tokens", schema.oauth_tables(_TYPES)),
    (
        10,
        "tool calls per key, shared by every server process",
        # Rate limit: a row per key (window start, calls). No RLS: nothing of a tenant's data.
        # UNLOGGED skips the WAL flush (about 4 ms a call logged, under 1 ms unlogged); a crash
        # empties it, at worst giving every key a fresh window.
        """
        CREATE UNLOGGED TABLE call_counts (
            key_id text PRIMARY KEY,
            window_start timestamptz NOT NULL,
            calls integer NOT NULL
        );""",
    ),
    (
        11,
        "the activity log",
        # Per org like the lessons: row-level security shows a transaction only its org's entries.
        schema.activity_tables(_TYPES) + ";" + _org_policy("activity", "activity_lessons"),
    ),
    (
        12,
        "who registered each oauth client, and whether it was used",
        schema.oauth_registration_table(_TYPES),
    ),
    (
        13,
        "pairs kept apart, and people's activity",
        schema.curation_tables(_TYPES)
        + f"; ALTER TABLE activity ADD COLUMN IF NOT EXISTS {schema.person_column(_TYPES)};"
        + _org_policy("kept_pairs"),
    ),
    # Rows written before it keep their TOASTed vectors until they are written again.
    (14, "vectors kept in their rows", f"DO $$ BEGIN IF {_VECTORS} THEN {EMBEDDING_INLINE}; END IF; END $$"),
    (
        15,
        "full text indexed with each row's project",
        # Migration 7's function on an index that also holds a word naming the row's org and project (a
        # space first: no parser makes it), so GIN finds the words' matches within the project instead of
        # ANDing them with a bitmap of all its keys. Same signature: servers of the previous version use it.
        f"""
        DROP INDEX IF EXISTS lessons_tsv;
        -- text || text, not text || bigint (only STABLE): an immutable body is inlined.
        CREATE FUNCTION lore_scope_word(org text, project text) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ' ' || pg_catalog.hashtextextended(org || '/' || project, 0)::text $$;
        CREATE OR REPLACE FUNCTION lore_lexical_candidates(
            p_project text, p_query text, p_order text, p_limit integer, p_now timestamptz,
            p_min_confidence double precision, p_tags text[]
        ) RETURNS SETOF bigint
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        DECLARE
            words tsquery := to_tsquery('english', p_query);
        BEGIN
            IF numnode(words) = 0 THEN  -- the scope word alone would match every row
                RETURN;
            END IF;
            RETURN QUERY EXECUTE
                'SELECT pk FROM public.lessons
                  WHERE {_SCOPED_WORDS} @@ $2
                    AND org_id = current_setting(''lore.org'', true) AND project = $1
                    AND (expires_at IS NULL OR expires_at > $5) AND confidence >= $6
                    AND (cardinality($7) = 0 OR tags @> $7)
                  ORDER BY ts_rank(tsv, $3) DESC LIMIT $4'
                USING p_project,
                      words && quote_literal(lore_scope_word(current_setting('lore.org', true), p_project))::tsquery,
                      to_tsquery('english', p_order), p_limit, p_now, p_min_confidence, p_tags;
        END
        $$;""",
    ),
    (
        16,
        "lessons whole in their rows, import images uncompressed",
        # A 384-dimension row (2.4 KB with its vector, migration 14) was over the 2 KB target: 4-5 small
        # columns went to TOAST, a lookup each. Now a row leaves its page only when it cannot fit it. An
        # import commit's images (base64 vectors) do not compress: pglz tried for nothing.
        """
        ALTER TABLE lessons SET (toast_tuple_target = 8160);
        ALTER TABLE commits ALTER COLUMN effects SET STORAGE EXTERNAL;""",
    ),
    (
        17,
        "a project's key, for a large project's own vector index",
        # Immutable and inlined: the planner folds ``lore_scope_key(:org, :project)`` to the number in
        # an index's predicate (``stores.postgres.project_index``), which then proves it.
        """
        CREATE OR REPLACE FUNCTION lore_scope_key(org text, project text) RETURNS bigint
            LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended(org || '/' || project, 0) $$;""",
    ),
    (
        18,
        "a tag's nearest lessons through the tags' index",
        # ``tags @>`` is not LEAKPROOF either (migration 4): under RLS an exact scan for a tag read its whole
        # project. The share of rows holding the rarest of the tags, from the planner's statistics (1: none).
        """
        CREATE FUNCTION lore_tag_share(p_tags text[]) RETURNS double precision
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        BEGIN
            RETURN (
                SELECT coalesce(min(coalesce(s.freqs[array_position(s.elems, t)], s.freqs[cardinality(s.elems) + 1] / 2)), 1)
                FROM unnest(p_tags) AS t
                LEFT JOIN (SELECT most_common_elems::text::text[] AS elems, most_common_elem_freqs AS freqs FROM pg_stats
                           WHERE schemaname = 'public' AND tablename = 'lessons' AND attname = 'tags') AS s ON true
            );
        END
        $$;
        CREATE FUNCTION lore_nearest_tagged(
            p_project text, p_tags text[], p_now timestamptz, p_min_confidence double precision, p_q vector, p_limit integer
        ) RETURNS TABLE (pk bigint, d double precision)
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
        BEGIN
            RETURN QUERY EXECUTE
                'WITH tagged AS MATERIALIZED (  -- every one: an ordered scan would take HNSW, which filters after
                    SELECT pk, embedding <=> $5 AS d FROM public.lessons
                     WHERE org_id = current_setting(''lore.org'', true) AND project = $1 AND tags @> $2
                       AND (expires_at IS NULL OR expires_at > $3) AND confidence >= $4
                 ) SELECT pk, d FROM tagged ORDER BY d LIMIT $6'
                USING p_project, p_tags, p_now, p_min_confidence, p_q, p_limit;
        END
        $$;""",
    ),
    # No index of the whole table: each large project's own (``project_index``), built by the first
    # recall or save that finds it missing, by a bulk load, or by a re-embed; smaller ones are scanned.
    (19, "vectors indexed by project alone", "DROP INDEX IF EXISTS lessons_embedding"),
]

SCHEMA_VERSION = MIGRATIONS[-1][0]
# An import drops the full-text index while it loads (``PostgresLessons.bulk``); one killed halfway leaves
# it missing, so every open builds it if missing (with memory by the table's rows).
MISSING_INDEXES = f"""DO $$ BEGIN PERFORM set_config('maintenance_work_mem', least(4096, 64 + (greatest(reltuples, 0)
    * (1024 + 4 * coalesce((SELECT value::int FROM lore_meta WHERE key = 'dim'), 0)) / 1048576)::bigint) || 'MB', true)
    FROM pg_class WHERE oid = 'lessons'::regclass; IF to_regclass('lessons_tsv') IS NULL THEN
    CREATE INDEX lessons_tsv ON lessons USING gin ({_SCOPED_WORDS}) WITH (fastupdate = off); END IF; END $$"""


def migrate(engine: Engine) -> None:
    """Create the extension, apply pending migrations and set up the RLS role; idempotent."""
    with unavailable_on_failure(), engine.begin() as conn, unbounded(conn):  # an index build takes minutes
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        if conn.execute(text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).first() is None:
            raise UnavailableError(
                "This Postgres does not have the pgvector extension. Install pgvector 0.5 or newer "
                "(for example the postgresql-16-pgvector package, or the pgvector/pgvector:pg16 image) "
                "and restart Lore."
            )
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, _ in schema.apply_pending(
            PostgresSqlTx(conn), MIGRATIONS, SCHEMA_VERSION, conn.exec_driver_sql
        ):
            logger.info("applied migration %s %s", version, name)
        conn.exec_driver_sql(MISSING_INDEXES)
        _ensure_rls_role(conn)
    engine.dispose()  # new connections pick up the role and the vector type


def _ensure_rls_role(conn: Connection) -> None:
    """Give privileged logins a role without BYPASSRLS to work as (see the module docstring)."""
    privileged = conn.execute(
        text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
    ).scalar()
    if not privileged:
        return
    if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": RLS_ROLE}).first() is None:
        conn.exec_driver_sql(f"CREATE ROLE {RLS_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS")
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {RLS_ROLE}")
    conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {RLS_ROLE}")
    conn.exec_driver_sql(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {RLS_ROLE}")
