"""Synthetic lessons in near-duplicate families, and paraphrased questions that name one entity.

Why: a memory that merges or mis-ranks lessons which differ by one service name,
environment, version, number, path or person loses exactly the knowledge an agent
needs ("the Redis client of billing-api times out during failover in staging" is
not the lesson about search-service in production). This set is built so that most
lessons have siblings that differ from them by exactly one entity, and every
question names the entity that tells its target apart.

Shape of the corpus:

- 20 components, each with 3 issues (a symptom, how else to say it, a cause, a fix
  and the setting the fix changed): 60 kinds of problem.
- A lesson fills one issue with seven entities: service (30 names), environment
  (6), the library version, the setting's number, the config file's path and the
  person who fixed it, and a problem/resolution template pair.
- A *family* is one filled lesson and 1-7 siblings that change exactly one of the
  entities (the family's axis: service, environment, version, number, path or
  person) and nothing else, template included. About one family in ten is a
  single lesson.

Questions (one per target lesson, ``questions`` of them, targets drawn from
families with siblings) describe the component and symptom in other words, always
name the axis entity, and name further entities of the target, in random order,
until no other lesson of the corpus matches everything the question names; so
each question has exactly one right answer, known from the slots, not from text
similarity. Everything is deterministic for a given seed and size.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# (name, other words for it, library, config file, tag, issues)
# issue: (symptom, symptom in other words, cause, fix, setting)
Issue = tuple[str, str, str, str, str]
COMPONENTS: list[tuple[str, str, str, str, str, list[Issue]]] = [
    (
        "the Redis client",
        "our Redis connection layer",
        "redis-py",
        "redis.yaml",
        "redis",
        [
            (
                "times out during failover",
                "hangs when the primary switches over",
                "the client kept a stale primary address after the failover",
                "enable sentinel discovery and retry on READONLY errors",
                "socket_timeout",
            ),
            (
                "returns stale cache entries after deploys",
                "serves outdated values once a release goes out",
                "cache keys did not include the schema version",
                "prefix every key with the build number",
                "key_ttl_seconds",
            ),
            (
                "exhausts its connection pool under load",
                "runs out of pooled connections at peak traffic",
                "each request opened a pool of its own",
                "share a single pool per process",
                "max_connections",
            ),
        ],
    ),
    (
        "the Postgres connection pool",
        "database connection pooling",
        "psycopg",
        "database.toml",
        "postgres",
        [
            (
                "leaks connections after request timeouts",
                "keeps connections checked out when requests are cancelled",
                "cancelled requests never returned their connection",
                "return connections in a finally block",
                "pool_max_size",
            ),
            (
                "deadlocks during batch updates",
                "locks up when bulk writes run together",
                "two jobs updated rows in opposite order",
                "update rows in primary-key order everywhere",
                "lock_timeout_ms",
            ),
            (
                "makes queries 40x slower after a migration",
                "makes queries crawl once the schema change lands",
                "the planner picked a sequential scan on stale statistics",
                "run ANALYZE after each migration",
                "statistics_target",
            ),
        ],
    ),
    (
        "the Kafka consumer",
        "the event stream reader",
        "librdkafka",
        "consumer.properties",
        "kafka",
        [
            (
                "rebalances in a loop",
                "keeps giving up its partitions",
                "message processing exceeded max.poll.interval.ms",
                "process records in smaller batches",
                "max_poll_records",
            ),
            (
                "processes messages twice after restarts",
                "handles the same event again when it comes back up",
                "offsets were committed before processing finished",
                "commit offsets only after the handler succeeds",
                "commit_interval_ms",
            ),
            (
                "falls hours behind at peak",
                "lags far behind the producers during the busy hours",
                "a single partition held most of the keys",
                "repartition by a higher-cardinality key",
                "partition_count",
            ),
        ],
    ),
    (
        "the nginx ingress",
        "the reverse proxy in front",
        "ingress-nginx",
        "ingress.conf",
        "nginx",
        [
            (
                "returns 413 on file uploads",
                "rejects big uploads as too large",
                "client_max_body_size defaulted to 1 MB",
                "raise the body size limit on the upload route",
                "client_max_body_size_mb",
            ),
            (
                "drops websocket connections after a minute",
                "cuts long-lived sockets after sixty seconds",
                "proxy_read_timeout closed idle sockets",
                "raise the read timeout and send pings",
                "proxy_read_timeout_s",
            ),
            (
                "returns 502 during rollouts",
                "answers bad gateway while pods are replaced",
                "pods were killed before draining connections",
                "add a preStop sleep before shutdown",
                "prestop_sleep_s",
            ),
        ],
    ),
    (
        "TLS certificate renewal",
        "certificate rotation",
        "cert-manager",
        "issuer.yaml",
        "tls",
        [
            (
                "fails silently before expiry",
                "does not renew and nobody notices until it lapses",
                "the ACME challenge was blocked by the firewall",
                "open port 80 for the HTTP-01 solver",
                "renew_before_days",
            ),
            (
                "serves the old certificate after renewal",
                "keeps presenting the expired cert after rotation",
                "the proxy cached the certificate at startup",
                "reload the proxy when the secret changes",
                "reload_interval_s",
            ),
            (
                "breaks mobile clients with a chain error",
                "makes phones reject the handshake",
                "the intermediate certificate was missing from the bundle",
                "ship the full chain",
                "chain_depth",
            ),
        ],
    ),
    (
        "the Celery workers",
        "the background task runners",
        "celery",
        "celeryconfig.py",
        "celery",
        [
            (
                "run the same task twice",
                "execute jobs a second time",
                "visibility_timeout was shorter than the task runtime",
                "raise the visibility timeout above the longest task",
                "visibility_timeout_s",
            ),
            (
                "leak memory until they are OOM-killed",
                "grow in memory until the kernel kills them",
                "a module-level cache grew without bound",
                "recycle workers after a number of tasks",
                "max_tasks_per_child",
            ),
            (
                "stop consuming after a broker restart",
                "go idle once the message broker comes back",
                "heartbeats were disabled so dead connections went unnoticed",
                "enable broker heartbeats",
                "broker_heartbeat_s",
            ),
        ],
    ),
    (
        "S3 multipart uploads",
        "object storage uploads",
        "boto3",
        "storage.ini",
        "s3",
        [
            (
                "fail for files over 5 GB",
                "break on very large files",
                "a single-part upload was used above the size limit",
                "switch to multipart above the threshold",
                "multipart_threshold_mb",
            ),
            (
                "leave orphaned parts that cost money",
                "accumulate abandoned chunks in the bucket",
                "aborted uploads were never cleaned up",
                "add a lifecycle rule that aborts incomplete uploads",
                "abort_after_days",
            ),
            (
                "are throttled with SlowDown errors",
                "get rate limited by the storage service",
                "all keys shared one prefix",
                "spread keys across hashed prefixes",
                "prefix_count",
            ),
        ],
    ),
    (
        "JWT validation",
        "token verification",
        "pyjwt",
        "auth.yaml",
        "auth",
        [
            (
                "rejects fresh tokens as expired",
                "treats just-issued tokens as already expired",
                "server clocks drifted apart",
                "allow clock skew leeway and run NTP",
                "leeway_s",
            ),
            (
                "fails after the signing key rotated",
                "breaks once the keys are rolled over",
                "the JWKS cache never refreshed",
                "refetch JWKS when a kid is unknown",
                "jwks_cache_ttl_s",
            ),
            (
                "accepts tokens for another audience",
                "lets through tokens meant for a different app",
                "the aud claim was never checked",
                "validate aud and iss on every request",
                "max_token_age_min",
            ),
        ],
    ),
    (
        "the Elasticsearch indexer",
        "search indexing",
        "elasticsearch-py",
        "indexer.yml",
        "elasticsearch",
        [
            (
                "rejects bulk requests with 429",
                "gets pushed back with too many requests during bulk loads",
                "the write thread pool queue overflowed",
                "send smaller bulk batches with backoff",
                "bulk_batch_size",
            ),
            (
                "shows deleted documents in results",
                "still returns removed records in searches",
                "deletes went to an alias that pointed at the old index",
                "write through the alias only after the swap",
                "refresh_interval_s",
            ),
            (
                "runs out of heap during aggregations",
                "blows its memory on big facet queries",
                "a terms aggregation ran on a high-cardinality field",
                "use a composite aggregation with paging",
                "max_buckets",
            ),
        ],
    ),
    (
        "the Docker build",
        "image builds",
        "BuildKit",
        "docker-bake.hcl",
        "docker",
        [
            (
                "misses the cache on every commit",
                "rebuilds every layer from scratch each push",
                "the source was copied before installing dependencies",
                "copy the lockfile first and install dependencies in their own layer",
                "cache_max_gb",
            ),
            (
                "produces a 3 GB image",
                "ships a huge image",
                "build tools were left in the final stage",
                "copy only the built artifacts into a slim stage",
                "max_image_mb",
            ),
            (
                "exits with code 137",
                "gets killed by the OOM killer mid-build",
                "the build container hit its memory limit",
                "raise the builder memory limit",
                "builder_memory_gb",
            ),
        ],
    ),
    (
        "the horizontal pod autoscaler",
        "pod autoscaling",
        "metrics-server",
        "hpa.yaml",
        "kubernetes",
        [
            (
                "never scales up under load",
                "stays at the minimum replica count when traffic climbs",
                "CPU requests were not set",
                "set CPU requests on every container",
                "max_replicas",
            ),
            (
                "flaps between replica counts",
                "keeps adding and removing pods",
                "the stabilization window was zero",
                "add a scale-down stabilization window",
                "stabilization_window_s",
            ),
            (
                "scales on the wrong metric",
                "reacts to a metric that does not matter",
                "the metrics adapter exposed the queue depth of another service",
                "fix the metric selector labels",
                "target_utilization_pct",
            ),
        ],
    ),
    (
        "the GraphQL gateway",
        "our GraphQL layer",
        "apollo-server",
        "gateway.config.js",
        "graphql",
        [
            (
                "makes N+1 database queries",
                "fires one query per row",
                "resolvers fetched each child separately",
                "batch child lookups with a dataloader",
                "dataloader_batch_size",
            ),
            (
                "times out on deeply nested queries",
                "chokes on heavily nested requests",
                "there was no query depth limit",
                "reject queries deeper than the limit",
                "max_query_depth",
            ),
            (
                "leaks internal errors to clients",
                "shows stack traces to callers",
                "debug mode was left on",
                "mask errors outside development",
                "max_error_length",
            ),
        ],
    ),
    (
        "the Stripe webhook handler",
        "payment event callbacks",
        "stripe-python",
        "payments.env",
        "stripe",
        [
            (
                "rejects valid signatures",
                "refuses correctly signed events",
                "the body was parsed as JSON before verification",
                "verify the signature against the raw bytes",
                "tolerance_s",
            ),
            (
                "double-charges on retries",
                "bills customers twice when requests are retried",
                "idempotency keys were regenerated on every retry",
                "persist the idempotency key with the order",
                "retry_limit",
            ),
            (
                "drops events during deploys",
                "loses callbacks while a release rolls out",
                "the endpoint returned 500 while starting",
                "queue events and acknowledge after persisting",
                "queue_capacity",
            ),
        ],
    ),
    (
        "the cron scheduler",
        "scheduled jobs",
        "APScheduler",
        "schedule.yaml",
        "cron",
        [
            (
                "runs jobs twice after daylight saving changes",
                "fires jobs a second time when the clocks go back",
                "schedules were written in local time",
                "schedule everything in UTC",
                "misfire_grace_s",
            ),
            (
                "skips runs when a job overlaps",
                "silently drops runs if the previous one is still going",
                "max_instances was one with coalescing on",
                "allow queued runs or shorten the job",
                "max_instances",
            ),
            (
                "runs on every replica at once",
                "executes on all pods simultaneously",
                "each replica ran its own scheduler",
                "take a leader lock before running",
                "lock_ttl_s",
            ),
        ],
    ),
    (
        "the gRPC client",
        "our RPC stubs",
        "grpcio",
        "grpc.json",
        "grpc",
        [
            (
                "fails with UNAVAILABLE after idle periods",
                "errors out after sitting idle",
                "the load balancer killed idle HTTP/2 connections",
                "enable keepalive pings",
                "keepalive_time_s",
            ),
            (
                "sends all traffic to one backend",
                "pins every request to a single server",
                "pick_first balancing kept one long-lived connection",
                "use round_robin balancing",
                "max_connection_age_s",
            ),
            (
                "hits deadline exceeded on large payloads",
                "runs past its deadline on big messages",
                "the message size limit forced retries with chunking",
                "raise the max message size",
                "max_message_mb",
            ),
        ],
    ),
    (
        "the log shipper",
        "log forwarding",
        "fluent-bit",
        "fluent-bit.conf",
        "logging",
        [
            (
                "drops lines under bursts",
                "loses log lines when volume spikes",
                "the memory buffer overflowed",
                "switch to a filesystem buffer",
                "buffer_mb",
            ),
            (
                "duplicates lines after restarts",
                "sends the same logs again on restart",
                "the position database was on an ephemeral volume",
                "keep the offsets on a persistent volume",
                "flush_interval_s",
            ),
            (
                "splits stack traces into separate events",
                "breaks multi-line exceptions into pieces",
                "no multiline parser was configured",
                "add a multiline parser for the runtime",
                "multiline_flush_ms",
            ),
        ],
    ),
    (
        "the frontend bundle",
        "the web app build",
        "webpack",
        "webpack.config.js",
        "frontend",
        [
            (
                "ships a 5 MB bundle",
                "sends a huge script to browsers",
                "a date library was imported with all locales",
                "import only the needed locales",
                "max_bundle_kb",
            ),
            (
                "serves stale assets after release",
                "shows the old UI after a deploy",
                "asset names were not fingerprinted",
                "fingerprint asset filenames",
                "cache_max_age_s",
            ),
            (
                "throws hydration mismatches",
                "renders differently on server and client",
                "timestamps rendered on the server differed from the client",
                "render time-dependent values after mount",
                "hydration_timeout_ms",
            ),
        ],
    ),
    (
        "the Terraform state",
        "infrastructure state",
        "terraform",
        "backend.tf",
        "terraform",
        [
            (
                "stays locked after a crashed run",
                "is stuck behind a lock from a dead job",
                "the CI runner died holding the lock",
                "force-unlock after checking no run is active",
                "lock_timeout_min",
            ),
            (
                "plans to recreate the database",
                "wants to destroy and rebuild the database",
                "a changed attribute forced replacement",
                "add lifecycle ignore_changes for that attribute",
                "parallelism",
            ),
            (
                "shows drift on every plan",
                "reports changes nobody made",
                "the provider normalised tags differently",
                "pin the provider and normalise tags",
                "refresh_parallelism",
            ),
        ],
    ),
    (
        "Prometheus alerting",
        "our monitoring alerts",
        "alertmanager",
        "alerts.rules.yml",
        "monitoring",
        [
            (
                "pages on every blip",
                "wakes people up for momentary spikes",
                "the rules had no for-duration",
                "add a for clause to each rule",
                "for_minutes",
            ),
            (
                "never fires for a dead target",
                "stays silent when a target disappears",
                "absent series were not alerted on",
                "alert on absent() for each job",
                "scrape_interval_s",
            ),
            (
                "runs out of memory on high-cardinality labels",
                "blows up memory because of too many label values",
                "a label carried user ids",
                "drop the label at scrape time",
                "series_limit",
            ),
        ],
    ),
    (
        "outgoing email",
        "the mail sender",
        "postfix",
        "main.cf",
        "email",
        [
            (
                "lands in spam",
                "ends up in junk folders",
                "DKIM signing was missing",
                "publish DKIM and SPF records",
                "dkim_key_bits",
            ),
            (
                "is rate limited by the provider",
                "gets throttled by the mail provider",
                "bursts exceeded the hourly quota",
                "queue mail and send at a steady rate",
                "max_per_minute",
            ),
            (
                "sends duplicate messages",
                "delivers the same message twice",
                "retries fired after a timeout although the first send succeeded",
                "deduplicate by message id",
                "retry_delay_s",
            ),
        ],
    ),
]

SERVICES = (
    "billing-api search-service checkout-web ledger-worker auth-gateway inventory-sync notification-hub "
    "payments-core user-profile order-router report-builder media-transcoder pricing-engine fraud-scorer "
    "catalog-indexer shipping-tracker email-dispatcher session-store analytics-ingest feature-flags "
    "audit-logger tenant-admin webhook-relay cart-service recommendation-api geo-locator invoice-renderer "
    "chat-backend export-scheduler identity-broker"
).split()
ENVIRONMENTS = ["production", "staging", "development", "QA", "canary", "sandbox"]
PEOPLE = (
    "Priya Tomasz Amara Kenji Lucia Dmitri Fatima Oskar Ines Rahul Sven Mei Jamal Helga Carlos Yuki Nadia "
    "Pieter Zainab Marco Aoife Bongani Leilani Mateus Saanvi Emeka Greta Hamid Solveig Tariq"
).split()
NUMBERS = [2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 45, 50, 60, 64, 75, 90, 100, 120, 128, 150, 200]
NUMBERS += [250, 256, 300, 400, 500, 512, 600, 750, 1000, 1024, 1500, 2000, 2048, 3000, 4096, 5000]
PATH_ROOTS = ["/etc", "/srv", "/opt", "/var/lib", "/usr/local/etc", "/home/deploy"]
PATH_DIRS = ["app", "conf", "runtime", "deploy", "settings", "shared", "config.d", "overrides"]

AXES = ["service", "env", "version", "number", "path", "person"]
AXIS_WEIGHTS = [30, 25, 12, 12, 10, 11]

# Templates of a family stay fixed; only the axis entity changes between siblings.
PROBLEMS = [
    "{Component} in {service} {symptom} in {env} after the upgrade to {lib} {version}",
    "{service} on {env}: {component} {symptom} since {lib} {version}",
    "In {env}, {component} of {service} {symptom} (seen after moving to {lib} {version})",
]
RESOLUTIONS = [
    "{Cause}. {person} fixed it by setting {setting} to {number} in {path}; {fix}.",
    "Root cause: {cause}. Fix: {fix}; {setting} is now {number} in {path} ({person}).",
    "{person} found that {cause}. Changed {setting} to {number} in {path}, then: {fix}.",
]
QUESTION_OPENINGS = [
    "how did we fix {comp} that {symptom}{mods}?",
    "what was the fix when {comp} {symptom}{mods}?",
    "{Comp} {symptom}{mods}: what was the root cause?",
    "why does {comp} {symptom}{mods}, and what did we change?",
    "remind me what resolved {comp} that {symptom}{mods}",
]
MODIFIERS: dict[str, list[str]] = {
    "service": [" for {service}", " in the {service} service", " on {service}"],
    "env": [" in {env}", " on the {env} environment", " in the {env} cluster"],
    "version": [
        " after bumping {lib} to {version}",
        " with {lib} {version}",
        " once {lib} {version} rolled out",
    ],
    "number": [" where {setting} ended up at {number}", " (the case where {setting} went to {number})"],
    "path": [" with the setting in {path}", " configured through {path}"],
    "person": [" that {person} fixed", " ({person} handled it)", " the one {person} sorted out"],
}


@dataclass(frozen=True)
class FamilyLesson:
    """One lesson of the set: its text and the entities it was filled with."""

    key: str  # "f<family>-<member>"
    family: int
    axis: str
    component: int
    issue: int
    slots: dict[str, str]
    problem: str
    resolution: str
    tags: tuple[str, ...]

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``save_lesson``."""
        return {"problem": self.problem, "resolution": self.resolution, "tags": list(self.tags)}


@dataclass(frozen=True)
class FamilyQuestion:
    """A paraphrased question whose one right answer is ``target``."""

    id: str
    text: str
    target: str
    axis: str
    named: tuple[str, ...]  # entities the question names, the axis first
    family_size: int


@dataclass
class FamilySet:
    lessons: list[FamilyLesson] = field(default_factory=list)
    questions: list[FamilyQuestion] = field(default_factory=list)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class FamilyGenerator:
    """Deterministic near-duplicate families and questions for one corpus size."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def _entity(self, axis: str, comp: int) -> str:
        r = self.rng
        if axis == "service":
            return r.choice(SERVICES)
        if axis == "env":
            return r.choice(ENVIRONMENTS)
        if axis == "version":
            return f"{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 15)}"
        if axis == "number":
            return str(r.choice(NUMBERS))
        if axis == "path":
            return f"{r.choice(PATH_ROOTS)}/{r.choice(PATH_DIRS)}/{COMPONENTS[comp][3]}"
        return r.choice(PEOPLE)

    def _fill(self, comp: int, issue: int, slots: dict[str, str], tpl: tuple[int, int]) -> tuple[str, str]:
        name, _, lib, _, _, issues = COMPONENTS[comp]
        symptom, _, cause, fix, setting = issues[issue]
        values = {
            **slots,
            "component": name,
            "Component": _cap(name),
            "lib": lib,
            "symptom": symptom,
            "cause": cause,
            "Cause": _cap(cause),
            "fix": fix,
            "setting": setting,
        }
        return PROBLEMS[tpl[0]].format(**values), RESOLUTIONS[tpl[1]].format(**values)

    def _family(self, number: int, size: int) -> list[FamilyLesson]:
        r = self.rng
        comp, issue = r.randrange(len(COMPONENTS)), r.randrange(3)
        axis = r.choices(AXES, AXIS_WEIGHTS)[0]
        if axis == "env":
            size = min(size, len(ENVIRONMENTS))
        base = {a: self._entity(a, comp) for a in AXES}
        values = [base[axis]]
        for _ in range(200):  # distinct values of the axis entity
            if len(values) == size:
                break
            candidate = self._entity(axis, comp)
            if candidate not in values:
                values.append(candidate)
        tpl = (r.randrange(len(PROBLEMS)), r.randrange(len(RESOLUTIONS)))
        members = []
        for i, value in enumerate(values):
            slots = {**base, axis: value}
            problem, resolution = self._fill(comp, issue, slots, tpl)
            members.append(
                FamilyLesson(
                    key=f"f{number}-{i}",
                    family=number,
                    axis=axis,
                    component=comp,
                    issue=issue,
                    slots=slots,
                    problem=problem,
                    resolution=resolution,
                    tags=(COMPONENTS[comp][4],),
                )
            )
        return members

    def lessons(self, n: int) -> Iterator[FamilyLesson]:
        """``n`` distinct lessons, family after family (the last one cut to fit)."""
        seen: set[tuple[str, str]] = set()
        produced, number = 0, 0
        while produced < n:
            size = 1 if self.rng.random() < 0.1 else self.rng.randint(2, 8)
            for lesson in self._family(number, size):
                if produced == n:
                    return
                if (lesson.problem, lesson.resolution) in seen:
                    continue  # the same draw twice; the set holds distinct texts only
                seen.add((lesson.problem, lesson.resolution))
                produced += 1
                yield lesson
            number += 1

    def questions(self, lessons: list[FamilyLesson], n: int) -> list[FamilyQuestion]:
        """``n`` questions, each about a different lesson that has siblings."""
        by_issue: dict[tuple[int, int], list[FamilyLesson]] = {}
        family_size: dict[int, int] = {}
        for lesson in lessons:
            by_issue.setdefault((lesson.component, lesson.issue), []).append(lesson)
            family_size[lesson.family] = family_size.get(lesson.family, 0) + 1
        pool = [x for x in lessons if family_size[x.family] > 1]
        targets = self.rng.sample(pool, min(n, len(pool)))
        return [
            self._question(i, target, by_issue[(target.component, target.issue)], family_size[target.family])
            for i, target in enumerate(targets)
        ]

    def _question(
        self, number: int, target: FamilyLesson, rivals: list[FamilyLesson], family_size: int
    ) -> FamilyQuestion:
        r = self.rng
        others = [a for a in AXES if a != target.axis]
        r.shuffle(others)
        named = [target.axis]
        remaining = [x for x in rivals if x is not target]
        for axis in others:
            remaining = [x for x in remaining if all(x.slots[a] == target.slots[a] for a in named)]
            if not remaining:
                break
            named.append(axis)
        else:
            remaining = [x for x in remaining if all(x.slots[a] == target.slots[a] for a in named)]
            assert not remaining, "two lessons share every entity"
        name, other_name, lib, _, _, issues = COMPONENTS[target.component]
        symptom, other_symptom, _, _, setting = issues[target.issue]
        comp = other_name if r.random() < 0.7 else name
        mods_order = named[:]
        r.shuffle(mods_order)
        values = {**target.slots, "lib": lib, "setting": setting}
        mods = "".join(r.choice(MODIFIERS[a]).format(**values) for a in mods_order)
        text = r.choice(QUESTION_OPENINGS).format(
            comp=comp, Comp=_cap(comp), symptom=other_symptom if r.random() < 0.85 else symptom, mods=mods
        )
        return FamilyQuestion(
            id=f"q{number}",
            text=_cap(text),
            target=target.key,
            axis=target.axis,
            named=tuple(named),
            family_size=family_size,
        )


def build(size: int, questions: int = 200, seed: int = 20261123) -> FamilySet:
    """The set for one corpus size: ``size`` lessons and ``questions`` questions."""
    generator = FamilyGenerator(seed + size)
    lessons = list(generator.lessons(size))
    return FamilySet(lessons=lessons, questions=generator.questions(lessons, questions))


# -- true duplicates: the same lesson said again, which should merge -------------------------

RESTATEMENT_KINDS = ("case", "spacing", "punctuation", "shorter")
# Where a template's last clause starts; cutting there leaves a prefix of the lesson that
# says strictly less (the fix, the person, the library version), never something else.
_PROBLEM_CUTS = (" after the upgrade to ", " since ", " (seen after ")
_RESOLUTION_CUTS = ("; ", ", then: ", " (")
_SENTENCE_END = re.compile(r"[.,;:!?()](?=\s|$)|(?<=\s)\(")


@dataclass(frozen=True)
class Restatement:
    """A lesson of the set saved again in other words that add nothing: it should merge."""

    key: str  # "r<n>"
    of: str  # the key of the lesson it restates
    kind: str  # one of RESTATEMENT_KINDS
    problem: str
    resolution: str
    tags: tuple[str, ...]


def _cut(text: str, separators: tuple[str, ...]) -> str:
    """``text`` up to the last of ``separators`` it contains, as a sentence."""
    at = max(text.rfind(s) for s in separators)
    return text if at <= 0 else text[:at].rstrip(" .;,:") + "."


def restate(lesson: FamilyLesson, kind: str, rng: random.Random) -> tuple[str, str]:
    """``lesson``'s problem and resolution said again the ``kind`` way."""
    problem, resolution = lesson.problem, lesson.resolution
    if kind == "case":
        return (
            (problem.lower(), resolution.upper())
            if rng.random() < 0.5
            else (problem.upper(), resolution.lower())
        )
    if kind == "spacing":
        return "  " + problem.replace(" ", "   ", 3) + "\n", resolution.replace(" ", "\t", 2) + " "
    if kind == "punctuation":
        return _SENTENCE_END.sub("", problem) + "!", _SENTENCE_END.sub("", resolution)
    if kind == "shorter":
        return _cut(problem, _PROBLEM_CUTS), _cut(resolution, _RESOLUTION_CUTS)
    raise ValueError(f"unknown restatement kind {kind!r}")


def restatements(lessons: list[FamilyLesson], n: int, seed: int = 20261123) -> list[Restatement]:
    """``n`` true duplicates of lessons drawn from ``lessons``, the kinds in turn.

    Why: the dedup rule must keep merging what really is the same lesson (other case,
    spacing or punctuation, or a restatement that drops a clause) while it refuses
    every sibling that differs by one entity; the harness counts both.
    """
    rng = random.Random(seed)
    originals = rng.sample(lessons, min(n, len(lessons)))
    out = []
    for i, lesson in enumerate(originals):
        kind = RESTATEMENT_KINDS[i % len(RESTATEMENT_KINDS)]
        problem, resolution = restate(lesson, kind, rng)
        out.append(Restatement(f"r{i}", lesson.key, kind, problem, resolution, lesson.tags))
    return out


if __name__ == "__main__":
    import sys

    built = build(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
    for lesson in built.lessons[:12]:
        print(lesson.key, "|", lesson.problem, "|", lesson.resolution)
    for question in built.questions[:12]:
        print(question.id, question.target, question.named, "|", question.text)
