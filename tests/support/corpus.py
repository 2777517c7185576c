"""The retrieval corpus shared by several test modules: varied software-engineering lessons
and paraphrased queries that share few words with their targets."""

from __future__ import annotations

from dataclasses import dataclass


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
