"""Retrieval quality with the real embedding model, end to end through the MCP client.

A corpus of varied software-engineering lessons is saved through ``save_lesson``;
paraphrased queries that share few or no words with their target lesson must
find it near the top of ``recall_lessons``. Votes, tag filters and
``min_confidence`` are checked against the same corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client

from stores.ranking import lexical_terms
from tests.helpers import call


@dataclass(frozen=True)
class Lesson:
    key: str
    problem: str
    resolution: str
    tags: tuple[str, ...]


CORPUS: tuple[Lesson, ...] = (
    # -- databases ------------------------------------------------------------------
    Lesson(
        "pg-pool",
        "Under heavy load, requests hang and then fail with SQLAlchemy 'QueuePool limit reached, connection timed out' against Postgres.",
        "Sessions were not returned to the pool; close them in a finally block or context manager and size pool_size and max_overflow to the worker count.",
        ("postgres", "database", "sqlalchemy"),
    ),
    Lesson(
        "pg-deadlock",
        "Postgres reports 'deadlock detected' when two transactions update the same pair of rows.",
        "Update rows in a consistent order (sort by primary key) inside every transaction so locks are always taken in the same sequence.",
        ("postgres", "database", "locking"),
    ),
    Lesson(
        "pg-migration-lock",
        "ALTER TABLE adding a column with a volatile default locked a large table and stalled production writes.",
        "Add the column as nullable without a default, backfill in batches, then set the default; use lock_timeout for DDL.",
        ("postgres", "database", "migrations"),
    ),
    Lesson(
        "orm-n-plus-one",
        "ORM list endpoint issues one SELECT per row to load a related object (N+1 queries).",
        "Eager-load the relationship with selectinload/joinedload or prefetch_related so related rows come in one query.",
        ("database", "orm", "performance"),
    ),
    Lesson(
        "mysql-utf8",
        "MySQL rejects emoji with 'Incorrect string value' when inserting into a utf8 column.",
        "MySQL's utf8 is 3-byte only; convert the table and connection charset to utf8mb4 with a utf8mb4 collation.",
        ("mysql", "database", "unicode"),
    ),
    Lesson(
        "sqlite-locked",
        "SQLite raises 'database is locked' when a background writer and the web request write concurrently.",
        "Enable WAL journal mode, set busy_timeout, and funnel writes through a single connection.",
        ("sqlite", "database", "locking"),
    ),
    Lesson(
        "pg-missing-index",
        "A filtered query on a large orders table got slow as data grew; EXPLAIN showed a sequential scan.",
        "Create a composite index matching the WHERE and ORDER BY columns, CONCURRENTLY to avoid blocking writes.",
        ("postgres", "database", "performance"),
    ),
    # -- networking -------------------------------------------------------------------
    Lesson(
        "nat-idle-timeout",
        "Long-lived TCP connections through the cloud NAT gateway silently drop after about 350 seconds idle.",
        "Enable TCP keepalive with an interval shorter than the NAT idle timeout, or have the client reconnect on reset.",
        ("networking", "tcp", "cloud"),
    ),
    Lesson(
        "mtu-vpn",
        "Small HTTP requests work over the VPN but large responses hang forever.",
        "Path MTU discovery was blocked; lower the interface MTU or clamp the TCP MSS on the tunnel.",
        ("networking", "vpn", "mtu"),
    ),
    Lesson(
        "http-client-timeout",
        "Python requests calls to a flaky partner API occasionally hang a worker indefinitely.",
        "requests has no default timeout; always pass timeout=(connect, read) and retry with backoff.",
        ("python", "http", "networking"),
    ),
    # -- python packaging ---------------------------------------------------------------
    Lesson(
        "wheel-package-data",
        "Jinja templates are missing at runtime after installing our package from the built wheel, though they load from a git checkout.",
        "Declare the non-Python files as package data (package-data in pyproject or MANIFEST.in with include_package_data) so they ship in the wheel.",
        ("python", "packaging", "setuptools"),
    ),
    Lesson(
        "pip-resolver-conflict",
        "pip install fails with ResolutionImpossible because two libraries pin incompatible versions of protobuf.",
        "Find the conflicting pins with pipdeptree, upgrade the library with the stale upper bound, and use a constraints file.",
        ("python", "packaging", "pip"),
    ),
    Lesson(
        "manylinux-musl",
        "pip builds numpy from source and fails inside an Alpine image because no wheel matches.",
        "Alpine uses musl libc and manylinux wheels need glibc; use a slim Debian base image or musllinux wheels.",
        ("python", "packaging", "docker"),
    ),
    Lesson(
        "venv-wrong-python",
        "Console script installed by pip runs with the system interpreter and cannot import the project's dependencies.",
        "The shebang pointed at another interpreter; recreate the virtualenv and invoke tools as python -m pip inside it.",
        ("python", "packaging", "virtualenv"),
    ),
    # -- docker -------------------------------------------------------------------------
    Lesson(
        "docker-pid1-sigterm",
        "docker stop waits the full grace period and then SIGKILLs the container; shutdown hooks never run.",
        "The shell-form CMD made /bin/sh PID 1, which does not forward SIGTERM; use exec-form CMD or tini as init.",
        ("docker", "signals"),
    ),
    Lesson(
        "docker-layer-cache",
        "Every Docker build reinstalls all dependencies even when only application code changed.",
        "Copy the lock file and install dependencies before copying the source tree so that layer stays cached.",
        ("docker", "build", "ci"),
    ),
    Lesson(
        "docker-image-size",
        "Production image is 2 GB because it contains compilers and build artefacts.",
        "Use a multi-stage build: compile in a builder stage and copy only the runtime artefacts into a slim final stage.",
        ("docker", "build"),
    ),
    Lesson(
        "docker-bind-mount-perms",
        "Files created in a bind-mounted volume are owned by root on the host and the developer cannot edit them.",
        "Run the container with the host user's UID/GID (--user) or create a matching user in the image.",
        ("docker", "permissions"),
    ),
    # -- kubernetes ---------------------------------------------------------------------
    Lesson(
        "k8s-oomkilled",
        "Kubernetes pod status shows OOMKilled and the container restarts in a loop.",
        "The memory limit was below the JVM heap plus overhead; raise limits.memory and cap the heap with -XX:MaxRAMPercentage.",
        ("kubernetes", "memory", "jvm"),
    ),
    Lesson(
        "k8s-readiness",
        "Rolling deployment sends traffic to new pods before the app has finished warming up, causing 502s.",
        "Add a readinessProbe that checks an endpoint which only returns 200 once initialisation is complete.",
        ("kubernetes", "deployment"),
    ),
    Lesson(
        "k8s-configmap-reload",
        "Changing a ConfigMap did not change the application's behaviour in running pods.",
        "Values consumed as environment variables are read only at start; roll the deployment or mount the ConfigMap as a volume and watch it.",
        ("kubernetes", "config"),
    ),
    Lesson(
        "k8s-image-pull",
        "Pods stuck in ImagePullBackOff after moving images to a private registry.",
        "Create a docker-registry secret and reference it from imagePullSecrets on the service account.",
        ("kubernetes", "registry"),
    ),
    # -- CI -----------------------------------------------------------------------------
    Lesson(
        "ci-flaky-shared-state",
        "Tests pass individually but fail intermittently when pytest-xdist runs them across workers.",
        "Tests shared a module-level fixture database and temp directory; give each worker its own via worker_id and tmp_path.",
        ("ci", "testing", "pytest"),
    ),
    Lesson(
        "ci-cache-key",
        "GitHub Actions restores an outdated dependency cache so builds use old package versions.",
        "Include a hash of the lock file in the cache key so it changes whenever dependencies change.",
        ("ci", "github-actions", "caching"),
    ),
    Lesson(
        "ci-shallow-clone",
        "Version tool in CI computes 0.0.0 because no tags are visible.",
        "actions/checkout does a shallow clone by default; set fetch-depth: 0 so tags and history are fetched.",
        ("ci", "git", "github-actions"),
    ),
    # -- auth / oauth -------------------------------------------------------------------
    Lesson(
        "jwt-clock-skew",
        "JWT validation fails with 'token used before issued' (iat/nbf in the future) on one API node.",
        "That node's system clock had drifted; enable NTP sync on all hosts and allow a small leeway when validating iat/nbf.",
        ("auth", "jwt", "time"),
    ),
    Lesson(
        "oauth-redirect-mismatch",
        "OAuth login fails with redirect_uri_mismatch after deploying behind the load balancer.",
        "The app built the callback URL with http instead of https; trust X-Forwarded-Proto and register the exact https URL.",
        ("auth", "oauth"),
    ),
    Lesson(
        "oauth-refresh-rotation",
        "Users are logged out randomly when two browser tabs refresh the access token at the same time.",
        "The provider rotates refresh tokens and invalidates the old one; serialise refreshes with a lock shared across tabs.",
        ("auth", "oauth", "frontend"),
    ),
    Lesson(
        "cookie-samesite",
        "Session cookie is not sent on the cross-site iframe embed, so embedded users appear logged out.",
        "Set SameSite=None; Secure on the session cookie for cross-site contexts.",
        ("auth", "cookies", "browser"),
    ),
    # -- frontend CSS / React -----------------------------------------------------------
    Lesson(
        "css-stacking-context",
        "A z-index of 9999 does not bring the dropdown above the sidebar.",
        "The dropdown's parent created a new stacking context (transform/opacity); move the menu into a portal at the body level.",
        ("css", "frontend"),
    ),
    Lesson(
        "css-flex-min-width",
        "Long unbroken text in a flex child overflows the container instead of shrinking.",
        "Flex items default to min-width: auto; set min-width: 0 on the child and use overflow-wrap: anywhere.",
        ("css", "frontend", "flexbox"),
    ),
    Lesson(
        "css-safari-100vh",
        "A full-height hero section is cut off at the bottom on iPhone Safari.",
        "100vh includes the area under the browser toolbar on mobile Safari; use 100dvh with a fallback.",
        ("css", "frontend", "safari"),
    ),
    Lesson(
        "react-stale-closure",
        "setInterval inside useEffect always logs the initial state value.",
        "The effect captured a stale closure; use the functional updater form or keep the latest value in a ref.",
        ("react", "frontend", "hooks"),
    ),
    Lesson(
        "react-key-index",
        "Input fields show the wrong values after deleting an item from a rendered list.",
        "Using the array index as key made React reuse components; use a stable unique id as the key.",
        ("react", "frontend"),
    ),
    Lesson(
        "react-hydration",
        "Next.js warns that the server-rendered HTML did not match the client and the page flickers.",
        "A component rendered Date.now() and window-dependent markup; render it only after mount or make the server output deterministic.",
        ("react", "nextjs", "ssr"),
    ),
    # -- git ----------------------------------------------------------------------------
    Lesson(
        "git-crlf",
        "Whole files appear changed in git diff although nobody edited them, after a Windows checkout.",
        "Line endings were converted to CRLF; add a .gitattributes with '* text=auto eol=lf' and renormalize.",
        ("git", "windows"),
    ),
    Lesson(
        "git-large-file",
        "Push is rejected because the repository contains a 300 MB file committed months ago.",
        "Remove it from history with git filter-repo and track such assets with Git LFS from then on.",
        ("git", "lfs"),
    ),
    Lesson(
        "git-rebase-lost",
        "A branch's commits vanished after an interactive rebase went wrong.",
        "Find the pre-rebase commit in git reflog and reset the branch to it.",
        ("git",),
    ),
    # -- payments / webhooks ------------------------------------------------------------
    Lesson(
        "stripe-raw-body",
        "Stripe webhook signature verification fails for every event although the signing secret is correct.",
        "The JSON body parser ran before verification; verify against the raw request bytes, not the re-serialised body.",
        ("payments", "stripe", "webhooks"),
    ),
    Lesson(
        "webhook-idempotency",
        "Customers were charged twice because the payment webhook was delivered twice.",
        "Record processed event ids and skip repeats; make the handler idempotent and pass idempotency keys to the API.",
        ("payments", "webhooks", "idempotency"),
    ),
    Lesson(
        "money-floats",
        "Invoice totals are off by a cent because prices are stored as floats.",
        "Store amounts as integer minor units (cents) or Decimal and round only at presentation with banker's rounding where required.",
        ("payments", "money"),
    ),
    # -- DNS / TLS ----------------------------------------------------------------------
    Lesson(
        "tls-intermediate",
        "Browsers accept our HTTPS certificate but curl and Android clients fail with 'unable to get local issuer certificate'.",
        "The server sent only the leaf; configure the full chain including the intermediate CA bundle.",
        ("tls", "certificates"),
    ),
    Lesson(
        "dns-ttl-migration",
        "After switching the A record to the new load balancer, some clients keep hitting the old IP for a day.",
        "The record had a 24 h TTL; lower the TTL days before a migration and keep the old endpoint serving until it expires.",
        ("dns", "migration"),
    ),
    Lesson(
        "tls-cert-expiry",
        "The certificate renewed by certbot was not picked up and the site served an expired certificate.",
        "nginx keeps the old certificate in memory; add a deploy hook that reloads nginx after renewal and alert on expiry.",
        ("tls", "nginx", "certbot"),
    ),
    Lesson(
        "dns-ndots",
        "Every external DNS lookup from pods is slow and triggers several NXDOMAIN queries first.",
        "The resolv.conf ndots:5 setting makes short names try every search domain; use fully qualified names with a trailing dot or lower ndots.",
        ("dns", "kubernetes"),
    ),
    # -- caching ------------------------------------------------------------------------
    Lesson(
        "cache-stampede",
        "When a hot cache key expires, hundreds of requests recompute it simultaneously and overload the database.",
        "Use request coalescing (a lock or single-flight), probabilistic early refresh, and jittered TTLs.",
        ("caching", "redis", "performance"),
    ),
    Lesson(
        "cdn-stale-assets",
        "Users still get the old JavaScript bundle from the CDN after a deploy.",
        "Fingerprint asset filenames with a content hash and serve index.html with a short max-age.",
        ("caching", "cdn", "frontend"),
    ),
    Lesson(
        "redis-eviction",
        "Keys disappear from Redis unexpectedly under memory pressure, including session data.",
        "maxmemory-policy was allkeys-lru; put sessions on a separate instance with noeviction or use volatile-lru with TTLs only on cache keys.",
        ("redis", "caching"),
    ),
    # -- queues -------------------------------------------------------------------------
    Lesson(
        "sqs-visibility-timeout",
        "Slow tasks pulled from SQS are executed twice in parallel by different consumers.",
        "The visibility timeout expired mid-processing and the message became visible again; extend it as a heartbeat or raise it above the worst-case duration.",
        ("queues", "sqs", "aws"),
    ),
    Lesson(
        "poison-message",
        "One malformed message makes the consumer crash and retry forever, blocking the rest of the queue.",
        "Cap redelivery attempts and route messages that keep failing to a dead-letter queue for inspection.",
        ("queues", "rabbitmq"),
    ),
    Lesson(
        "kafka-rebalance",
        "Kafka consumer group keeps rebalancing and lag grows when message handling is slow.",
        "Handling exceeded max.poll.interval.ms; reduce max.poll.records or process asynchronously and commit offsets after.",
        ("queues", "kafka"),
    ),
    Lesson(
        "celery-ack-late",
        "Celery tasks are lost when a worker is killed during a deploy.",
        "Tasks were acknowledged on receipt; set acks_late=True and task_reject_on_worker_lost so they are redelivered.",
        ("queues", "celery", "python"),
    ),
    # -- logging / observability ---------------------------------------------------------
    Lesson(
        "log-pii",
        "Application logs contained customer email addresses and access tokens in request dumps.",
        "Add a logging filter that masks sensitive fields and stop logging full request bodies.",
        ("logging", "security", "privacy"),
    ),
    Lesson(
        "log-volume-cost",
        "Log ingestion bill spiked because a library logged at DEBUG in production.",
        "Set per-logger levels in config, default root to INFO, and sample noisy messages.",
        ("logging", "cost"),
    ),
    Lesson(
        "python-logging-duplicate",
        "Every Python log line is printed twice.",
        "A handler was added to both the named logger and root; set propagate=False or configure handlers only on root.",
        ("logging", "python"),
    ),
    # -- time ---------------------------------------------------------------------------
    Lesson(
        "cron-dst",
        "A cron job scheduled at 02:30 local time ran twice on the autumn DST change and not at all in spring.",
        "Schedule jobs in UTC, or avoid the 01:00-03:00 window in zones with daylight saving transitions.",
        ("timezones", "cron", "dst"),
    ),
    Lesson(
        "naive-datetime",
        "Comparing timestamps raises 'can't compare offset-naive and offset-aware datetimes'.",
        "Use timezone-aware datetimes everywhere (datetime.now(UTC)) and convert at the edges only.",
        ("timezones", "python", "datetime"),
    ),
    Lesson(
        "js-date-parse",
        "A date-only string like 2024-03-10 shows as the previous day for users in America.",
        "Date-only ISO strings parse as UTC midnight in JavaScript; parse them as local dates or keep them as plain strings.",
        ("timezones", "javascript", "frontend"),
    ),
    # -- unicode ------------------------------------------------------------------------
    Lesson(
        "unicode-nfc",
        "Looking up 'café' in the database returns nothing even though the stored name displays identically.",
        "One string used a combining accent (NFD) and the other a precomposed character (NFC); normalise to NFC on input.",
        ("unicode", "search"),
    ),
    Lesson(
        "utf16-length",
        "A 280-character limit counted in the browser disagrees with the server's count for strings with emoji.",
        "JavaScript length counts UTF-16 code units; count code points or grapheme clusters consistently on both sides.",
        ("unicode", "javascript"),
    ),
    Lesson(
        "csv-bom",
        "The first column header of an uploaded CSV file doesn't match its expected name.",
        "Excel writes a UTF-8 byte order mark; open the file with encoding='utf-8-sig'.",
        ("unicode", "csv", "python"),
    ),
    # -- memory leaks / performance ------------------------------------------------------
    Lesson(
        "spa-listener-leak",
        "The single-page app's heap grows steadily as users navigate between views and never shrinks.",
        "Components registered window event listeners and subscriptions without removing them on unmount; clean up in the effect's return.",
        ("memory-leak", "frontend", "javascript"),
    ),
    Lesson(
        "python-lru-leak",
        "A long-running Python worker's RSS grows without bound over days.",
        "An unbounded functools.lru_cache keyed on request objects retained them; bound maxsize or cache on primitive keys.",
        ("memory-leak", "python"),
    ),
    Lesson(
        "node-event-loop-block",
        "A Node.js API's latency spikes for all requests when one user uploads a large CSV.",
        "Synchronous parsing blocked the event loop; stream-parse the file or move the work to a worker thread.",
        ("nodejs", "performance"),
    ),
    # -- misc ---------------------------------------------------------------------------
    Lesson(
        "cors-preflight",
        "Browser blocks API calls with a CORS error only for requests that send an Authorization header.",
        "Those trigger a preflight OPTIONS request; the server must answer OPTIONS with the Access-Control-Allow-Headers listing Authorization.",
        ("cors", "http", "frontend"),
    ),
    Lesson(
        "rate-limit-429",
        "Bulk sync job against a SaaS API fails halfway with HTTP 429 responses.",
        "Honour the Retry-After header, add exponential backoff with jitter, and throttle concurrency below the quota.",
        ("http", "rate-limiting"),
    ),
    Lesson(
        "terraform-state-lock",
        "terraform apply fails with 'Error acquiring the state lock' after a CI job was cancelled mid-run.",
        "The cancelled run left its DynamoDB lock behind; confirm nothing is running, then terraform force-unlock with the lock id.",
        ("terraform", "infrastructure", "ci"),
    ),
    Lesson(
        "s3-presigned-expiry",
        "Download links we email to customers stop working after a few hours although we asked for seven days.",
        "Presigned S3 URLs are capped by the lifetime of the signing credentials; sign with a long-lived IAM user key or a proxy endpoint instead of a role session.",
        ("aws", "s3"),
    ),
    Lesson(
        "grpc-deadline",
        "gRPC calls between services fail with DEADLINE_EXCEEDED only on the first request after a deploy.",
        "The first call pays for DNS resolution and the TLS handshake; warm up the channel at start and set deadlines per method.",
        ("grpc", "networking"),
    ),
    Lesson(
        "feature-flag-cache",
        "Turning off a feature flag in the dashboard took several minutes to affect the mobile app.",
        "The SDK polled for flag changes every five minutes; enable streaming updates or shorten the polling interval for kill switches.",
        ("feature-flags", "mobile"),
    ),
    Lesson(
        "env-secret-commit",
        "An API key was committed to a public repository in a .env file.",
        "Revoke and rotate the key immediately, purge it from history, and add .env to .gitignore with a pre-commit secret scanner.",
        ("security", "git", "secrets"),
    ),
)

# Paraphrased queries for target lessons: what someone would type when hitting the
# problem, deliberately avoiding the stored lesson's distinctive words.
QUERIES: dict[str, str] = {
    "pg-pool": "during busy periods the site stops responding because all DB connections are checked out and never given back",
    "docker-pid1-sigterm": "when I halt the containerised app it sits there for ten seconds and then dies hard, skipping my exit handlers",
    "k8s-oomkilled": "pod keeps restarting with exit code 137 because it uses too much RAM",
    "css-stacking-context": "popup menu renders underneath the side panel however high I set its layer order",
    "react-stale-closure": "timer callback in my component keeps seeing the first counter number, never the updated one",
    "git-crlf": "colleague on Windows checked out the repo and now every line of every file shows as modified",
    "stripe-raw-body": "can't validate that billing event callbacks are genuine; the computed HMAC never matches",
    "jwt-clock-skew": "freshly issued login tokens are refused as not valid yet by only one of our servers",
    "tls-intermediate": "the website opens fine in Chrome but command-line tools and phones say the issuer cannot be verified",
    "dns-ttl-migration": "we changed hosting providers, yet for hours part of our audience kept landing on the previous server",
    "cache-stampede": "when a popular memoised entry runs out, the backend is flooded with identical recomputations at once",
    "sqs-visibility-timeout": "long-running jobs get picked up a second time by another worker before the first one finishes",
    "cron-dst": "nightly scheduled task executed two times one night in October and was skipped one night in March",
    "unicode-nfc": "searching for a word with an accented letter finds no match although the text looks exactly the same",
    "spa-listener-leak": "browser tab becomes sluggish and uses more and more RAM the longer people click around the web app",
    "wheel-package-data": "the released build on our index has no HTML templates in it, yet they render fine from a development copy",
    "ci-flaky-shared-state": "test suite is green when run serially but breaks randomly when split across parallel processes",
    "webhook-idempotency": "a client was billed two times for one order because the notification arrived again",
}

TOP1_REQUIRED = 0.8
# A query may share at most this many (crudely stemmed) words with its target lesson.
MAX_SHARED_WORDS = 3


async def save_corpus(client: Client, confidence: dict[str, float] | None = None) -> dict[str, str]:
    """Save every lesson through the tool; return key -> id. None may merge into another."""
    ids: dict[str, str] = {}
    for lesson in CORPUS:
        result = await call(
            client,
            "save_lesson",
            problem=lesson.problem,
            resolution=lesson.resolution,
            tags=list(lesson.tags),
            confidence=(confidence or {}).get(lesson.key, 0.7),
        )
        assert result["merged"] is False, f"{lesson.key!r} merged into an earlier lesson"
        ids[lesson.key] = result["id"]
    assert len(set(ids.values())) == len(CORPUS)
    return ids


async def recall(client: Client, query: str, **kwargs: Any) -> list[dict[str, Any]]:
    return (await call(client, "recall_lessons", query=query, **kwargs))["lessons"]


def test_the_corpus_is_large_and_its_queries_are_paraphrases() -> None:
    keys = [lesson.key for lesson in CORPUS]
    assert len(keys) == len(set(keys))
    assert len(CORPUS) >= 60
    assert len(QUERIES) >= 12
    assert len(CORPUS) - len(QUERIES) >= 50
    assert set(QUERIES) <= set(keys)
    by_key = {lesson.key: lesson for lesson in CORPUS}
    for key, query in QUERIES.items():
        shared = stems(query) & stems(f"{by_key[key].problem} {by_key[key].resolution}")
        assert len(shared) <= MAX_SHARED_WORDS, (
            f"query for {key!r} copies the lesson's words {sorted(shared)}"
        )


def stems(text: str) -> set[str]:
    """Content words, roughly stemmed, as the full-text index would match them."""
    out = set()
    for term in lexical_terms(text, max_terms=1000):
        for suffix in ("ing", "ed", "es", "s"):
            if term.endswith(suffix) and not term.endswith("ss") and len(term) > len(suffix) + 2:
                term = term[: -len(suffix)]
                break
        out.add(term)
    return out


@pytest.mark.model
async def test_paraphrased_queries_find_their_lesson_near_the_top(client: Client) -> None:
    ids = await save_corpus(client)
    by_id = {ids[lesson.key]: lesson for lesson in CORPUS}

    ranks: dict[str, int | None] = {}
    report = []
    for key, query in QUERIES.items():
        got = await recall(client, query, limit=10)
        got_ids = [hit["id"] for hit in got]
        rank = got_ids.index(ids[key]) + 1 if ids[key] in got_ids else None
        ranks[key] = rank
        if rank != 1:
            top3 = "\n".join(
                f"      {i}. [{hit['score']:.3f}] {by_id[hit['id']].key}: {hit['problem']}"
                for i, hit in enumerate(got[:3], start=1)
            )
            report.append(
                f"  query:    {query}\n  expected: {key}: {by_id[ids[key]].problem}\n"
                f"  rank:     {rank}\n  top 3:\n{top3}"
            )

    top1 = sum(r == 1 for r in ranks.values()) / len(ranks)
    top3 = sum(r is not None and r <= 3 for r in ranks.values()) / len(ranks)
    summary = f"top-1 {top1:.0%}, top-3 {top3:.0%} over {len(ranks)} queries"
    print(summary)
    print("\n\n".join(report))
    details = summary + "\n\n" + "\n\n".join(report)
    assert top3 == 1.0, "some targets fell out of the top 3:\n" + details
    assert top1 >= TOP1_REQUIRED, "too few targets ranked first:\n" + details


@pytest.mark.model
async def test_votes_reorder_two_equally_relevant_fixes(client: Client) -> None:
    """Two fixes for one problem rank about equally; whichever leads at first is downvoted and
    the other upvoted five times each, after which the other must lead."""
    await save_corpus(client)
    first = await call(
        client,
        "save_lesson",
        problem="Gunicorn workers are killed with WORKER TIMEOUT during slow report generation.",
        resolution="Raise the --timeout setting so slow requests can finish.",
        tags=["gunicorn", "python"],
        confidence=0.7,
    )
    second = await call(
        client,
        "save_lesson",
        problem="Gunicorn workers are killed with WORKER TIMEOUT during slow report generation.",
        resolution="Move report generation to a background job queue and return 202 immediately.",
        tags=["gunicorn", "python"],
        confidence=0.7,
    )
    assert first["merged"] is False and second["merged"] is False
    pair = {first["id"], second["id"]}
    query = "web server kills workers while building big reports"

    before = await recall(client, query, limit=5)
    top_two = [hit["id"] for hit in before[:2]]
    assert set(top_two) == pair, f"the two fixes should lead before voting: {[h['problem'] for h in before]}"
    leader, other = top_two

    for _ in range(5):
        await call(client, "downvote_lesson", id=leader)
        await call(client, "upvote_lesson", id=other)

    after = await recall(client, query, limit=5)
    assert after[0]["id"] == other, (
        f"the upvoted fix should lead after voting; got {[(h['resolution'], h['score']) for h in after[:2]]}"
    )
    assert after[0]["upvotes"] == 5 and after[0]["downvotes"] == 0
    demoted = await call(client, "get_lesson", id=leader)
    assert (demoted["upvotes"], demoted["downvotes"]) == (0, 5)
    assert all(hit["score"] < after[0]["score"] for hit in after if hit["id"] == leader)


CONFIDENCE_STEPS = (0.2, 0.4, 0.6, 0.8, 0.95)


@pytest.mark.model
async def test_tag_and_confidence_filters_restrict_recall(client: Client) -> None:
    confidence = {lesson.key: CONFIDENCE_STEPS[i % len(CONFIDENCE_STEPS)] for i, lesson in enumerate(CORPUS)}
    ids = await save_corpus(client, confidence)
    key_of = {v: k for k, v in ids.items()}
    tags_of = {lesson.key: set(lesson.tags) for lesson in CORPUS}

    def keys(hits: list[dict[str, Any]]) -> set[str]:
        return {key_of[hit["id"]] for hit in hits}

    # One tag: exactly the lessons carrying it, however the query reads.
    hits = await recall(client, "slow queries and locking problems", tags=["postgres"], limit=50)
    assert keys(hits) == {k for k, t in tags_of.items() if "postgres" in t}
    assert all("postgres" in hit["tags"] for hit in hits)

    # Several tags: only lessons carrying all of them, even when the query is about something else.
    hits = await recall(client, "browser layout is broken", tags=["python", "packaging"], limit=50)
    expected = {k for k, t in tags_of.items() if {"python", "packaging"} <= t}
    assert len(expected) >= 3
    assert keys(hits) == expected
    assert not any("css" in hit["tags"] for hit in hits)

    # Tags are matched case-insensitively, as they are stored lower-cased.
    hits = await recall(client, "container shutdown", tags=["Docker"], limit=50)
    assert keys(hits) == {k for k, t in tags_of.items() if "docker" in t}

    # A tag no lesson has gives nothing.
    assert await recall(client, "database connection pool", tags=["no-such-tag"]) == []

    # min_confidence: nothing less certain comes back, and everything at least that certain can.
    confident = {k for k, c in confidence.items() if c >= 0.8}
    assert 0 < len(confident) <= 50
    hits = await recall(client, "production problem", min_confidence=0.8, limit=50)
    assert all(hit["confidence"] >= 0.8 for hit in hits)
    assert keys(hits) == confident

    # Both together: tagged and confident enough.
    hits = await recall(client, "database trouble", tags=["database"], min_confidence=0.6, limit=50)
    expected = {k for k, t in tags_of.items() if "database" in t and confidence[k] >= 0.6}
    assert expected
    assert keys(hits) == expected
    assert all("database" in hit["tags"] and hit["confidence"] >= 0.6 for hit in hits)

    # A threshold above every lesson gives nothing.
    assert await recall(client, "anything at all", min_confidence=0.99) == []


# -- near-duplicates and dialog turns (issue 13) ------------------------------------------------

_CONSUMER = "The Kafka consumer of {service} rebalances in a loop after librdkafka {version}"
_FIX = "Processing exceeded max.poll.interval.ms; {person} set max_poll_records to {number} in {path}."
_BASE = {
    "service": "billing-api",
    "version": "2.3.1",
    "person": "Sven",
    "number": "50",
    "path": "/etc/app/consumer.properties",
}
# Siblings that differ from the base lesson by one entity; the last two are another problem.
_CHANGES = (
    {},
    {"version": "2.3.4"},
    {"version": "2.4.0"},
    {"version": "3.2.1"},
    {"number": "5"},
    {"number": "500"},
    {"path": "/srv/conf/consumer.properties"},
    {"path": "/opt/kafka/consumer.properties"},
    {"service": "search-service"},
    {"service": "ledger-worker"},
    {"person": "Amara"},
    {"person": "Ines"},
)
SIBLINGS: tuple[tuple[str, str], ...] = (
    *((_CONSUMER.format(**{**_BASE, **c}), _FIX.format(**{**_BASE, **c})) for c in _CHANGES),
    *(
        (
            f"The Kafka consumer of billing-api processes messages twice after restarts since librdkafka {v}",
            "Offsets were committed before processing finished; Sven set commit_interval_ms to 50 "
            "in /etc/app/consumer.properties.",
        )
        for v in ("2.3.4", "2.4.0")
    ),
)
# Each question paraphrases the problem and names the entity that tells its sibling apart.
SIBLING_QUESTIONS: dict[str, int] = {
    "event stream reader keeps giving up its partitions since 2.3.4": 1,
    "partitions keep being reassigned after moving to librdkafka 3.2.1": 3,
    "consumer group churn where max_poll_records ended up at 5": 4,
    "the rebalancing loop where max_poll_records went to 500": 5,
    "the rebalancing loop configured through /opt/kafka/consumer.properties": 7,
    "stream reader losing its partitions on ledger-worker": 9,
    "what did Ines change when the consumer kept rebalancing?": 11,
}

# A dialog saved turn by turn, as the retrieval evaluation saves one: every turn carries the
# speaker and the date, and most turns are small talk that says nothing else.
_SMALL_TALK = (
    "Later!",
    "Morning! Got a minute?",
    "Always, go on.",
    "Ha, nice.",
    "Talk soon!",
    "Bye! Say hi to everyone.",
    "Did you watch the match last night?",
    "Only the second half.",
    "Right, dinner time.",
    "Same here, busy week.",
    "Did you find anything good in there?",
    "Anyway, I should go.",
)
_NEWS = (
    ("Bruno", "The bench is done! I used larch, and it took thirteen hours in the end."),
    ("Farid", "I finally started violin lessons. My teacher is a retired session player called Lenny."),
    ("Bruno", "My sister is getting married in Lisbon next spring."),
    (
        "Farid",
        "Big news: we are moving to Maple Heights next month, because the landlord is selling the building.",
    ),
    ("Bruno", "Honestly the team, and they let me bring my dog to the office."),
    ("Farid", "I did something impulsive: I signed up for the Lakeside 10K trail race."),
    ("Bruno", "We tried Pho Minh last Saturday. I had the crab linguine."),
)


def _dialog() -> tuple[tuple[int, str, str], ...]:
    """(day, speaker, text): a session a day, four turns of small talk (the two speakers in
    turn) and one piece of news each, then a last session of small talk only."""
    sessions = [[*_SMALL_TALK[i % 3 : i % 3 + 4], news] for i, news in enumerate(_NEWS)]
    sessions.append(list(_SMALL_TALK))
    turns = []
    for day, session in enumerate(sessions, start=1):
        for i, turn in enumerate(session):
            speaker, text = turn if isinstance(turn, tuple) else (("Bruno", "Farid")[i % 2], turn)
            turns.append((day, speaker, text))
    return tuple(turns)


DIALOG = _dialog()
DIALOG_QUESTIONS: dict[str, str] = {
    "What wood did Bruno use?": _NEWS[0][1],
    "Who teaches Farid music?": _NEWS[1][1],
    "Where will Bruno's sister get married?": _NEWS[2][1],
    "Which neighbourhood is Farid moving to?": _NEWS[3][1],
    "Why did Bruno accept the job offer?": _NEWS[4][1],
    "Which race did Farid enter?": _NEWS[5][1],
    "Which restaurant did Bruno try?": _NEWS[6][1],
}


@pytest.mark.model
async def test_near_duplicates_are_told_apart_by_the_entity_the_question_names(client: Client) -> None:
    ids = []
    for problem, resolution in SIBLINGS:
        saved = await call(client, "save_lesson", problem=problem, resolution=resolution, tags=["kafka"])
        assert saved["merged"] is False
        ids.append(saved["id"])
    for question, target in SIBLING_QUESTIONS.items():
        got = [hit["id"] for hit in await recall(client, question, limit=3)]
        assert ids[target] in got, f"{question!r}: {[ids.index(i) for i in got]}"


@pytest.mark.model
async def test_dialog_questions_find_the_turn_that_answers_not_the_speakers_small_talk(
    client: Client,
) -> None:
    said: dict[str, str] = {}
    for day, speaker, text in DIALOG:
        saved = await call(
            client,
            "save_lesson",
            problem=f"{speaker} on {day} March 2024: {text}",
            resolution=text,
            context=f"conversation c01, session {day}, Bruno with Farid",
            tags=["dialog"],
        )
        said[saved["id"]] = text
    assert len(said) == len(DIALOG)
    for question, answer in DIALOG_QUESTIONS.items():
        got = [said[hit["id"]] for hit in await recall(client, question, limit=3)]
        assert answer in got, f"{question!r}: {got}"
