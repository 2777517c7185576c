"""Synthetic lessons and recall queries for the benchmarks.

Lessons are built from templates filled with random vocabulary across twenty
engineering topics (a component, a symptom, a trigger, a cause, a fix, a service
name, an environment, versions), so that a corpus of 100k reads like real agent
memories and few pairs come near the 0.95 cosine at which a save merges into an
existing lesson. Queries are phrased the way an agent asks, from the same
vocabulary, and are never repeated, so the server's query-vector cache never
answers a timed query.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# topic: (subjects, symptoms, causes, fixes, tags)
TOPICS: dict[str, tuple[list[str], list[str], list[str], list[str], list[str]]] = {
    "payments": (
        [
            "the Stripe webhook handler",
            "the checkout session",
            "the refund job",
            "invoice reconciliation",
            "the payment intent confirmation",
            "subscription renewal",
            "the Adyen notification endpoint",
        ],
        [
            "rejects valid signatures",
            "double-charges customers",
            "returns 400 on retries",
            "drops events silently",
            "times out after 30 seconds",
            "marks paid invoices as overdue",
        ],
        [
            "the raw body was parsed as JSON before signature verification",
            "idempotency keys were regenerated on every retry",
            "the webhook secret was rotated but not redeployed",
            "amounts were rounded as floats instead of integer cents",
            "events arrived out of order",
            "the test-mode key was used against live mode",
        ],
        [
            "verify the signature against the raw request bytes",
            "persist the idempotency key with the order",
            "reload secrets from the vault on rotation",
            "store money as integer minor units",
            "reorder events by their created timestamp before applying them",
            "check the key prefix at startup and refuse a mismatch",
        ],
        ["stripe", "payments", "webhooks", "billing"],
    ),
    "postgres": (
        [
            "a Postgres query",
            "the nightly VACUUM",
            "logical replication",
            "the connection pool",
            "a migration adding an index",
            "the orders table",
            "pgbouncer",
        ],
        [
            "becomes 40x slower",
            "deadlocks under concurrent writes",
            "runs out of connections",
            "locks the table for minutes",
            "lags hours behind the primary",
            "fails with serialization errors",
        ],
        [
            "the planner switched to a sequential scan after stale statistics",
            "two transactions updated rows in opposite order",
            "each worker opened its own pool",
            "CREATE INDEX was run without CONCURRENTLY",
            "a long-running transaction held back the xmin horizon",
            "autovacuum could not keep up with the update rate",
        ],
        [
            "run ANALYZE and raise the statistics target on the skewed column",
            "update rows in primary-key order in every code path",
            "share one pool per process and cap it",
            "build the index with CREATE INDEX CONCURRENTLY",
            "set idle_in_transaction_session_timeout",
            "tune autovacuum_vacuum_scale_factor for the hot table",
        ],
        ["postgres", "sql", "database", "performance"],
    ),
    "docker": (
        [
            "the Docker build",
            "a multi-stage image",
            "the container healthcheck",
            "docker compose",
            "the build cache",
            "a distroless image",
            "BuildKit",
        ],
        [
            "takes 20 minutes on every commit",
            "exits with code 137",
            "cannot resolve internal hostnames",
            "ships a 3 GB image",
            "runs as root in production",
            "loses files written to the volume",
        ],
        [
            "COPY . . came before installing dependencies so the cache was invalidated",
            "the container hit its memory limit and was OOM-killed",
            "the default bridge network had no DNS",
            "build tools were left in the final stage",
            "no USER directive was set",
            "the volume was mounted over the directory at runtime",
        ],
        [
            "copy the lockfile first and install dependencies in their own layer",
            "raise the memory limit and cap the heap below it",
            "put services on a user-defined network",
            "copy only the built artifacts into a slim final stage",
            "add a non-root USER and chown the app dir",
            "mount the volume at a separate path and migrate data on start",
        ],
        ["docker", "containers", "build", "devops"],
    ),
    "kubernetes": (
        [
            "a Kubernetes deployment",
            "the ingress controller",
            "the horizontal pod autoscaler",
            "a CronJob",
            "the readiness probe",
            "a StatefulSet",
            "the cluster autoscaler",
        ],
        [
            "keeps restarting in CrashLoopBackOff",
            "returns 502 during rollouts",
            "never scales up",
            "runs twice at the same time",
            "marks healthy pods unready",
            "gets stuck terminating",
        ],
        [
            "the liveness probe fired before the app finished warming up",
            "pods were killed before draining in-flight requests",
            "CPU requests were not set on the containers",
            "concurrencyPolicy was left at Allow",
            "the probe hit an endpoint that checked the database",
            "a finalizer waited on a deleted controller",
        ],
        [
            "add a startupProbe with a generous failure threshold",
            "add a preStop sleep and terminationGracePeriod",
            "set CPU requests so the HPA can compute utilisation",
            "set concurrencyPolicy to Forbid",
            "make readiness check only the process itself",
            "remove the stale finalizer with kubectl patch",
        ],
        ["kubernetes", "k8s", "deploy", "ops"],
    ),
    "frontend": (
        [
            "a React component",
            "the Next.js page",
            "server-side rendering",
            "the Redux store",
            "a useEffect hook",
            "the Vite dev server",
            "hydration",
        ],
        [
            "re-renders in an infinite loop",
            "shows stale data after navigation",
            "throws a hydration mismatch",
            "leaks event listeners",
            "breaks in Safari only",
            "flashes unstyled content",
        ],
        [
            "an object literal in the dependency array changed identity every render",
            "the fetch cache served the response from build time",
            "Date.now() rendered differently on server and client",
            "the cleanup function was never returned",
            "a regex lookbehind unsupported by that WebKit version was used",
            "CSS was injected after first paint",
        ],
        [
            "memoise the dependency with useMemo",
            "mark the route dynamic and disable the fetch cache",
            "render time-dependent values only after mount",
            "return a cleanup that removes the listener",
            "replace the lookbehind with a capture group",
            "extract critical CSS at build time",
        ],
        ["react", "frontend", "javascript", "ui"],
    ),
    "python": (
        [
            "pip install",
            "a Poetry lockfile",
            "the wheel build",
            "a virtualenv",
            "mypy",
            "pytest collection",
            "an asyncio service",
        ],
        [
            "fails to resolve dependencies",
            "picks the wrong Python version",
            "segfaults on import",
            "passes locally but fails in CI",
            "hangs on shutdown",
            "reports import cycles",
        ],
        [
            "two packages pinned incompatible versions of protobuf",
            "the shebang pointed at the system interpreter",
            "a binary wheel was built against a newer glibc",
            "tests relied on the order of dict iteration in fixtures",
            "a background task was never cancelled",
            "type-only imports were evaluated at runtime",
        ],
        [
            "relax the pin and add an upper bound after testing",
            "recreate the venv with an explicit interpreter",
            "install the manylinux2014 wheel or build from source",
            "make each test set up its own state",
            "cancel pending tasks in the shutdown handler",
            "move type-only imports under TYPE_CHECKING",
        ],
        ["python", "packaging", "pip", "tooling"],
    ),
    "ci": (
        [
            "the GitHub Actions workflow",
            "the CI cache",
            "a flaky integration test",
            "the release pipeline",
            "self-hosted runners",
            "the matrix build",
            "code coverage upload",
        ],
        [
            "fails randomly one run in ten",
            "never hits the cache",
            "publishes the wrong version",
            "runs out of disk space",
            "takes twice as long as last month",
            "skips jobs silently",
        ],
        [
            "the test depended on wall-clock time",
            "the cache key included the commit SHA",
            "the tag was read before checkout fetched tags",
            "old Docker layers were never pruned",
            "the matrix grew to include every minor version",
            "a path filter excluded the changed directory",
        ],
        [
            "inject a fake clock into the test",
            "key the cache on the lockfile hash",
            "fetch tags with fetch-depth 0 before versioning",
            "prune images in a scheduled job",
            "test only the oldest and newest supported versions",
            "widen the paths filter",
        ],
        ["ci", "github-actions", "testing", "release"],
    ),
    "auth": (
        [
            "the OAuth callback",
            "JWT validation",
            "session cookies",
            "the SSO login",
            "refresh tokens",
            "the API gateway authorizer",
            "SAML assertions",
        ],
        [
            "rejects tokens as expired",
            "logs users out every few minutes",
            "loops between login pages",
            "accepts tokens for the wrong audience",
            "breaks behind the load balancer",
            "fails for new tenants",
        ],
        [
            "server clocks drifted by more than the allowed skew",
            "the cookie domain did not match the subdomain",
            "the redirect URI registered with the provider had a trailing slash",
            "the audience claim was never checked",
            "the app saw http instead of https behind the proxy",
            "the JWKS cache never refreshed after key rotation",
        ],
        [
            "allow 60 seconds of leeway and run NTP",
            "set the cookie domain to the parent domain",
            "register the exact redirect URI",
            "validate aud and iss on every request",
            "trust X-Forwarded-Proto from the proxy",
            "refetch JWKS when a kid is unknown",
        ],
        ["auth", "oauth", "jwt", "security"],
    ),
    "redis": (
        [
            "the Redis cache",
            "a distributed lock",
            "Redis pub/sub",
            "the rate limiter",
            "session storage",
            "a sorted-set leaderboard",
            "Redis Cluster",
        ],
        [
            "evicts hot keys",
            "is held by two workers at once",
            "loses messages during reconnects",
            "lets bursts through",
            "spikes latency every hour",
            "returns MOVED errors",
        ],
        [
            "maxmemory-policy was allkeys-random",
            "the lock expired while the holder was paused by GC",
            "pub/sub has no persistence and the subscriber was disconnected",
            "the fixed window reset at minute boundaries",
            "an hourly job ran KEYS on a large keyspace",
            "the client was not cluster-aware",
        ],
        [
            "switch eviction to allkeys-lru",
            "use fencing tokens with the lock",
            "move to Redis Streams with consumer groups",
            "use a sliding-window or token bucket",
            "replace KEYS with SCAN",
            "use the cluster client",
        ],
        ["redis", "cache", "locking", "latency"],
    ),
    "nginx": (
        [
            "the nginx reverse proxy",
            "a WebSocket upstream",
            "gzip compression",
            "client uploads",
            "the upstream keepalive pool",
            "rate limiting in nginx",
            "the TLS terminator",
        ],
        [
            "returns 413 for large files",
            "drops WebSocket connections after 60 seconds",
            "serves stale assets",
            "returns 504 under load",
            "resets connections on reload",
            "ignores the real client IP",
        ],
        [
            "client_max_body_size defaulted to 1 MB",
            "proxy_read_timeout closed idle sockets",
            "cache headers made browsers keep old bundles",
            "upstream keepalive was not enabled",
            "worker_shutdown_timeout was too short",
            "real_ip_header was not configured",
        ],
        [
            "raise client_max_body_size for the upload route",
            "raise proxy_read_timeout and send pings",
            "fingerprint asset filenames",
            "enable keepalive and HTTP/1.1 to upstreams",
            "raise worker_shutdown_timeout",
            "set set_real_ip_from and real_ip_header",
        ],
        ["nginx", "proxy", "http", "infra"],
    ),
    "terraform": (
        [
            "terraform apply",
            "the Terraform state",
            "a module upgrade",
            "the AWS provider",
            "terraform plan",
            "workspaces",
            "a for_each resource",
        ],
        [
            "wants to destroy and recreate the database",
            "is locked by a crashed run",
            "shows perpetual diffs",
            "fails with a provider version conflict",
            "takes 15 minutes to refresh",
            "renames every resource",
        ],
        [
            "a ForceNew attribute changed",
            "the DynamoDB lock was never released",
            "the API normalised a JSON policy differently",
            "two modules required incompatible provider ranges",
            "state held thousands of resources in one root module",
            "the for_each keys were list indexes",
        ],
        [
            "add lifecycle prevent_destroy and move the attribute change out",
            "force-unlock with the lock id",
            "normalise the policy with jsonencode",
            "align provider constraints across modules",
            "split the root module by lifecycle",
            "key for_each by stable names and use moved blocks",
        ],
        ["terraform", "iac", "aws", "infra"],
    ),
    "aws": (
        [
            "an S3 upload",
            "the IAM role",
            "a Lambda function",
            "CloudFront",
            "SQS consumers",
            "the RDS failover",
            "presigned URLs",
        ],
        [
            "gets AccessDenied",
            "cold-starts for 8 seconds",
            "serves an old version",
            "processes messages twice",
            "drops connections for a minute",
            "expire immediately",
        ],
        [
            "the bucket policy required encryption headers",
            "the package bundled the whole SDK",
            "the invalidation was never issued",
            "the visibility timeout was shorter than processing time",
            "the app cached the old writer IP",
            "the signing credentials were from a short-lived session",
        ],
        [
            "send the SSE header on every put",
            "bundle only the clients used",
            "invalidate paths on deploy",
            "set the visibility timeout to six times the processing time",
            "connect through the cluster endpoint and lower DNS TTL",
            "sign with the role's long-lived credentials",
        ],
        ["aws", "s3", "iam", "cloud"],
    ),
    "kafka": (
        [
            "a Kafka consumer group",
            "the producer",
            "topic partitions",
            "the schema registry",
            "Kafka Connect",
            "exactly-once processing",
            "consumer lag",
        ],
        [
            "rebalances constantly",
            "loses messages on broker restart",
            "is skewed onto one partition",
            "rejects new schema versions",
            "stops after a bad record",
            "grows without bound",
        ],
        [
            "max.poll.interval.ms was shorter than batch processing time",
            "acks was set to 1",
            "every message used the same key",
            "a field was removed without a default",
            "the error tolerance was none",
            "consumers were fewer than partitions",
        ],
        [
            "raise max.poll.interval.ms and shrink batches",
            "set acks to all and enable idempotence",
            "key messages by a high-cardinality id",
            "add defaults to keep schemas backward compatible",
            "route bad records to a dead-letter topic",
            "scale consumers up to the partition count",
        ],
        ["kafka", "streaming", "messaging", "events"],
    ),
    "git": (
        [
            "git rebase",
            "a merge",
            "the pre-commit hook",
            "git LFS",
            "a monorepo checkout",
            "submodules",
            "a force-push",
        ],
        [
            "rewrites commits already on main",
            "reintroduces a reverted change",
            "runs for minutes",
            "downloads pointer files instead of content",
            "clones 8 GB",
            "points at a missing commit",
        ],
        [
            "the branch was rebased after being shared",
            "the revert was itself merged back",
            "the hook ran the whole test suite",
            "LFS was not installed on the machine",
            "full history was cloned for every job",
            "the submodule commit was never pushed",
        ],
        [
            "only rebase local branches and merge shared ones",
            "revert the revert explicitly",
            "run only the linters on staged files",
            "install git-lfs and run git lfs pull",
            "use a shallow partial clone",
            "push submodules before the parent",
        ],
        ["git", "vcs", "workflow", "tooling"],
    ),
    "node": (
        [
            "npm install",
            "the Node.js server",
            "an Express middleware",
            "the event loop",
            "a TypeScript build",
            "ESM imports",
            "the Jest suite",
        ],
        [
            "installs a different tree each time",
            "leaks memory over a day",
            "swallows errors",
            "blocks for seconds",
            "cannot find type declarations",
            "fails with ERR_REQUIRE_ESM",
        ],
        [
            "the lockfile was not committed",
            "a module-level Map cached every request",
            "async errors were not passed to next()",
            "JSON.parse ran on a 50 MB payload",
            "moduleResolution did not match the package exports",
            "a dependency became ESM-only",
        ],
        [
            "commit the lockfile and use npm ci",
            "bound the cache with an LRU",
            "wrap async handlers so rejections reach the error middleware",
            "stream-parse large payloads",
            "set moduleResolution to bundler",
            "use dynamic import or pin the last CommonJS release",
        ],
        ["node", "npm", "javascript", "typescript"],
    ),
    "network": (
        [
            "TLS handshakes",
            "DNS resolution",
            "the corporate proxy",
            "HTTP/2 connections",
            "gRPC calls",
            "the service mesh sidecar",
            "certificate renewal",
        ],
        [
            "fail with certificate verify failed",
            "take five seconds",
            "break outbound calls",
            "stall under concurrency",
            "fail with UNAVAILABLE",
            "expire without warning",
        ],
        [
            "the intermediate certificate was missing from the chain",
            "resolv.conf had ndots 5",
            "NO_PROXY did not include internal domains",
            "the server capped concurrent streams",
            "the load balancer killed idle connections",
            "the renewal cron ran in a container that was gone",
        ],
        [
            "serve the full chain",
            "lower ndots or use fully qualified names",
            "add internal domains to NO_PROXY",
            "open more connections or raise the stream limit",
            "enable keepalive pings below the idle timeout",
            "alert on certificate expiry 21 days ahead",
        ],
        ["tls", "dns", "networking", "grpc"],
    ),
    "queues": (
        [
            "a Celery worker",
            "the task queue",
            "scheduled jobs",
            "RabbitMQ",
            "retries with backoff",
            "the beat scheduler",
            "a Sidekiq job",
        ],
        [
            "runs tasks twice",
            "stalls with tasks stuck in reserved",
            "fires every job at midnight UTC",
            "piles up unacked messages",
            "retries forever",
            "runs the schedule on every replica",
        ],
        [
            "acks_late without idempotent tasks",
            "prefetch multiplier reserved tasks on a dead worker",
            "the scheduler ran in UTC while users expected local time",
            "consumers crashed before acking",
            "no max retries was set",
            "beat was deployed with every web replica",
        ],
        [
            "make tasks idempotent with a dedup key",
            "set prefetch multiplier to 1 for long tasks",
            "store schedules with an explicit timezone",
            "ack after processing and add a dead-letter queue",
            "cap retries and alert on exhaustion",
            "run exactly one beat instance",
        ],
        ["celery", "queues", "jobs", "rabbitmq"],
    ),
    "search": (
        [
            "Elasticsearch",
            "the search index",
            "a reindex",
            "OpenSearch",
            "relevance tuning",
            "the ingest pipeline",
            "autocomplete",
        ],
        [
            "returns no hits for accented words",
            "goes red after a node restart",
            "doubles disk usage",
            "rejects bulk requests",
            "ranks exact matches below partial ones",
            "lags minutes behind writes",
        ],
        [
            "the analyzer lacked asciifolding",
            "replicas were set to zero",
            "the old index was kept after the alias switch",
            "the bulk queue was full",
            "the title field was not boosted",
            "refresh_interval was set to 5 minutes",
        ],
        [
            "add an asciifolding filter and reindex",
            "set at least one replica",
            "delete the old index after swapping the alias",
            "shrink bulk batches and retry on 429",
            "boost exact title matches with a keyword subfield",
            "lower refresh_interval for that index",
        ],
        ["elasticsearch", "search", "indexing", "opensearch"],
    ),
    "rust": (
        [
            "cargo build",
            "a Rust async service",
            "the borrow checker",
            "a tokio runtime",
            "cross-compilation",
            "serde deserialisation",
            "clippy",
        ],
        [
            "takes 10 minutes incrementally",
            "panics with a runtime inside a runtime",
            "rejects a self-referential struct",
            "deadlocks under load",
            "fails to link for musl",
            "rejects valid JSON",
        ],
        [
            "one crate re-exported everything and recompiled on each change",
            "block_on was called inside async code",
            "the struct held a reference into itself",
            "a std Mutex guard was held across an await",
            "openssl was linked dynamically",
            "a field used snake_case while the JSON was camelCase",
        ],
        [
            "split the crate and use a faster linker",
            "make the caller async instead of calling block_on",
            "store indices instead of references",
            "switch to tokio's Mutex or drop the guard before awaiting",
            "use rustls instead of openssl",
            "add serde rename_all camelCase",
        ],
        ["rust", "cargo", "tokio", "build"],
    ),
    "mobile": (
        [
            "the iOS build",
            "an Android release",
            "push notifications",
            "the React Native bridge",
            "code signing",
            "the app store upload",
            "deep links",
        ],
        [
            "fails only on the archive step",
            "crashes on startup on Android 8",
            "arrive on iOS but not Android",
            "freezes the UI thread",
            "reports an expired profile",
            "open the browser instead of the app",
        ],
        [
            "a dependency lacked the arm64 slice",
            "a Java 8 API was used without desugaring",
            "the FCM token was never registered after reinstall",
            "a synchronous native call ran on the main thread",
            "the provisioning profile did not include the new device",
            "the association file was served with redirects",
        ],
        [
            "exclude the simulator arch or update the framework",
            "enable core library desugaring",
            "refresh the push token on every launch",
            "move the native call to a background queue",
            "regenerate the profile with the device",
            "serve the association file directly with 200",
        ],
        ["ios", "android", "mobile", "react-native"],
    ),
}

TRIGGERS = [
    "after a deploy",
    "under heavy load",
    "on cold start",
    "only in staging",
    "during the nightly batch",
    "right after a failover",
    "behind the corporate proxy",
    "when tests run in parallel",
    "on ARM runners",
    "after rotating credentials",
    "for users in Asia",
    "on the first request of the day",
    "after the framework upgrade",
    "when the disk is nearly full",
    "during Black Friday traffic",
    "only for large tenants",
    "after switching regions",
    "when two replicas start together",
    "after daylight saving time changed",
    "on machines with many cores",
]
ADJECTIVES = [
    "amber",
    "brisk",
    "cobalt",
    "dusty",
    "ember",
    "frosty",
    "gentle",
    "hollow",
    "ivory",
    "jolly",
    "keen",
    "lunar",
    "mossy",
    "nimble",
    "opal",
    "plaid",
    "quiet",
    "rusty",
    "sable",
    "tidal",
    "umber",
    "velvet",
    "windy",
    "young",
    "zesty",
]
NOUNS = [
    "ledger",
    "harbor",
    "falcon",
    "orchard",
    "beacon",
    "canyon",
    "drift",
    "ember",
    "fjord",
    "gazette",
    "heron",
    "inlet",
    "juniper",
    "kestrel",
    "lagoon",
    "meadow",
    "nebula",
    "otter",
    "pylon",
    "quarry",
    "raven",
    "summit",
    "thicket",
    "upland",
    "vortex",
]
ROLES = ["api", "worker", "gateway", "scheduler", "ingest", "web", "billing", "search", "auth", "sync"]
ENVIRONMENTS = [
    "Ubuntu 22.04",
    "Debian 12",
    "Alpine 3.19",
    "macOS 14 on Apple silicon",
    "Windows 11 with WSL2",
    "Amazon Linux 2023",
    "GKE",
    "EKS",
    "AKS",
    "Fly.io",
    "Heroku",
    "bare-metal servers",
    "a Raspberry Pi",
]
RUNTIMES = ["Python", "Node", "Go", "Java", "Ruby", "Rust", "PHP", "Elixir", ".NET", "Kotlin"]
DIAGNOSTICS = [
    "strace",
    "EXPLAIN ANALYZE",
    "tcpdump",
    "the debug logs",
    "py-spy",
    "a git bisect",
    "kubectl describe",
    "curl -v",
    "a heap snapshot",
    "the flame graph",
    "distributed tracing",
    "the audit log",
]
IMPACTS = ["checkout", "onboarding", "the nightly report", "search", "login", "exports", "the mobile app"]
PROBLEM_TEMPLATES = [
    "{subject} {symptom} {trigger} in {service}",
    "{service}: {subject} {symptom} {trigger}",
    "{Subject} in {service} {symptom} {trigger}, breaking {impact}",
    "Since moving to {env}, {subject} {symptom}",
    "{Subject} {symptom} for about {pct}% of requests {trigger}",
    "After upgrading to {version}, {subject} in {service} {symptom}",
]
RESOLUTION_TEMPLATES = [
    "Root cause: {cause}. Fix: {fix}.",
    "{Fix}. It turned out {cause}; confirmed with {diag}.",
    "Found with {diag} that {cause}. {Fix}, then added a regression test in {service}.",
    "{Cause}. The fix was to {fix} and redeploy {service}.",
    "We {diag_verb} with {diag} and saw that {cause}. Solution: {fix}.",
]
QUERY_TEMPLATES = [
    "{subject} {symptom} {trigger}",
    "how do I fix {subject} that {symptom}",
    "why {subject} {symptom} on {env}",
    "{service} {subject} {symptom}",
    "{Subject} {symptom} {trigger}, any known fix?",
    "{subject} {symptom} after upgrading to {version}",
]
DIAG_VERBS = ["dug in", "investigated", "reproduced it", "traced it", "profiled it"]


@dataclass(frozen=True)
class Lesson:
    """Keyword arguments for ``save_lesson`` / ``LessonService.make_draft``."""

    problem: str
    resolution: str
    context: str | None
    tags: list[str]
    confidence: float
    source: str | None

    def arguments(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "resolution": self.resolution,
            "context": self.context,
            "tags": self.tags,
            "confidence": self.confidence,
            "source": self.source,
        }


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class Generator:
    """Reproducible streams of distinct lessons and queries."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self._seen_queries: set[str] = set()

    def _service(self) -> str:
        r = self.rng
        return f"{r.choice(ADJECTIVES)}-{r.choice(NOUNS)}-{r.choice(ROLES)}"

    def _version(self, runtime: str) -> str:
        r = self.rng
        return f"{runtime} {r.randint(1, 24)}.{r.randint(0, 19)}"

    def _slots(self) -> tuple[str, dict[str, str]]:
        r = self.rng
        topic = r.choice(list(TOPICS))
        subjects, symptoms, causes, fixes, _ = TOPICS[topic]
        subject, cause, fix = r.choice(subjects), r.choice(causes), r.choice(fixes)
        slots = {
            "subject": subject,
            "Subject": _cap(subject),
            "symptom": r.choice(symptoms),
            "trigger": r.choice(TRIGGERS),
            "service": self._service(),
            "env": r.choice(ENVIRONMENTS),
            "impact": r.choice(IMPACTS),
            "pct": str(r.choice([1, 2, 3, 5, 10, 15, 20, 30, 50])),
            "version": self._version(r.choice(RUNTIMES)),
            "cause": cause,
            "Cause": _cap(cause),
            "fix": fix,
            "Fix": _cap(fix),
            "diag": r.choice(DIAGNOSTICS),
            "diag_verb": r.choice(DIAG_VERBS),
        }
        return topic, slots

    def lesson(self) -> Lesson:
        return self.topic_lesson()[1]

    def topic_lesson(self) -> tuple[str, Lesson]:
        """A lesson and the topic it was drawn from (``benchmarks/scale_corpus.py`` mixes
        vectors of the same topic)."""
        r = self.rng
        topic, slots = self._slots()
        tags = TOPICS[topic][4]
        context = f"{slots['env']}, {self._version(r.choice(RUNTIMES))}, service {slots['service']}"
        if r.random() < 0.02:  # a pasted connection string, so redaction has something to do
            secret = "".join(r.choices(string.ascii_letters + string.digits, k=16))
            context += f", DATABASE_URL=postgres://app:{secret}@db-{r.randint(1, 9)}.internal:5432/app"
        return topic, Lesson(
            problem=r.choice(PROBLEM_TEMPLATES).format(**slots),
            resolution=r.choice(RESOLUTION_TEMPLATES).format(**slots),
            context=context if r.random() < 0.7 else None,
            tags=r.sample(tags, r.randint(1, 3)),
            confidence=round(r.uniform(0.3, 0.95), 2),
            source=r.choice([None, "agent", "incident review", "pairing session"]),
        )

    def lessons(self, n: int) -> Iterator[Lesson]:
        for _ in range(n):
            yield self.lesson()

    def query(self) -> str:
        """A query not returned before by this generator."""
        while True:
            _, slots = self._slots()
            text = self.rng.choice(QUERY_TEMPLATES).format(**slots)
            if text not in self._seen_queries:
                self._seen_queries.add(text)
                return text

    def queries(self, n: int) -> list[str]:
        return [self.query() for _ in range(n)]
