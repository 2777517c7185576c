"""What went wrong and what fixed it: the runbook situations of the ops-runbook set.

Problem templates name ``{svc}``, ``{env}`` and ``{plat}``, resolutions ``{team}``; both may use
the scenario's detail slots, which a family's siblings share. The question ``cores`` say the same
problem in other words and name only ``{svc}``; the question builder adds the other attributes,
each written as the question's kind demands.
"""

from __future__ import annotations

from benchmarks.sets.ops_runbook_vocab import Scenario

S = Scenario
SCENARIOS: tuple[Scenario, ...] = (
    S(
        "tls-expiry",
        ("tls", "certificates", "outage"),
        (
            "The TLS certificate of {svc} in {env} expired overnight and {plat} got handshake failures until morning.",
            "After its TLS certificate lapsed unnoticed, {svc} in {env} rejected every connection from {plat}.",
        ),
        (
            "{team} renewed the certificate, switched it to automatic renewal {days} days before expiry and added an expiry alert.",
            "{team} reissued the cert through the ACME client and now gets paged {days} days before any certificate runs out.",
        ),
        (
            "{svc} refusing secure connections because a cert ran out",
            "handshake errors from {svc} once its certificate went stale",
            "an out-of-date certificate on {svc} breaking HTTPS",
        ),
        {"days": ("14", "21", "30")},
    ),
    S(
        "dns-cutover",
        ("dns", "loadbalancer", "migration"),
        (
            "After {svc} moved to a new load balancer in {env}, {plat} kept resolving the old address for hours because the DNS TTL was {ttl} seconds.",
            "A load balancer swap for {svc} in {env} left {plat} on the retired IP for hours: the record's TTL was {ttl} seconds.",
        ),
        (
            "{team} lowered the TTL to 60 seconds a day before the cut-over and kept the old balancer serving until traffic drained.",
        ),
        (
            "traffic for {svc} still going to the previous IP after switching balancers",
            "stale name resolution sending {svc} requests to a decommissioned front end",
        ),
        {"ttl": ("3600", "86400", "14400")},
    ),
    S(
        "migration-lock",
        ("deploy", "database", "migration"),
        (
            "A deploy of {svc} to {env} ran a schema migration that locked the {table} table, and {plat} timed out for {n} minutes.",
            "The {svc} release in {env} held a lock on {table} during its migration, so requests from {plat} hung for {n} minutes.",
        ),
        (
            "{team} split the migration into an online backfill and a short rename, and long migrations now run outside the deploy.",
            "{team} rewrote the change as an expand-and-contract migration with a lock timeout of two seconds.",
        ),
        (
            "a schema change shipped with {svc} freezing a table",
            "timeouts while the {svc} rollout's DDL blocked writes",
        ),
        {"table": ("orders", "accounts", "events", "invoices"), "n": ("7", "12", "25")},
    ),
    S(
        "queue-backlog",
        ("queue", "latency", "consumers"),
        (
            "The {queue} queue feeding {svc} in {env} grew to {n}k messages and {plat} received updates hours late.",
            "Consumers of {svc} in {env} fell behind on the {queue} queue ({n}k waiting), so {plat} saw stale data.",
        ),
        (
            "{team} raised consumer concurrency, added a dead-letter queue for poison messages and added an alert for when the oldest message is over {m} minutes old.",
        ),
        (
            "messages piling up in front of {svc} so things showed up hours later",
            "delayed delivery because {svc} could not drain its backlog",
        ),
        {
            "queue": ("events", "email", "webhook", "ledger"),
            "n": ("40", "120", "300"),
            "m": ("5", "10", "15"),
        },
    ),
    S(
        "cache-stampede",
        ("cache", "database", "latency"),
        (
            "When the {svc} cache was flushed in {env}, every request from {plat} went straight to the database and latency hit {n} seconds.",
            "Flushing the cache of {svc} in {env} sent all {plat} traffic to the primary database at once; p99 reached {n} seconds.",
        ),
        (
            "{team} added request coalescing and jittered expiry so keys no longer expire together, and warm the cache before a flush.",
        ),
        (
            "a thundering herd on the DB after clearing {svc}'s cached data",
            "everything missing the cache at the same moment for {svc} and the database melting down",
        ),
        {"n": ("4", "9", "15")},
    ),
    S(
        "flag-blast",
        ("flags", "rollout", "incident"),
        (
            "A feature flag of {svc} was switched on for all of {env} instead of a {pct}% slice, and {plat} got the unfinished flow.",
            "Someone enabled a {svc} flag for everyone in {env} rather than {pct}%, exposing {plat} to a half-built feature.",
        ),
        (
            "{team} turned the flag back off, and flag changes there now need a second reviewer and must start at a small percentage.",
        ),
        (
            "a toggle for {svc} that went to every user instead of a gradual rollout",
            "an experiment switch on {svc} accidentally set to one hundred percent",
        ),
        {"pct": ("1", "5", "10")},
    ),
    S(
        "flaky-pipeline",
        ("ci", "tests", "pipeline"),
        (
            "The pipeline that ships {svc} to {env} failed about one run in {n} on flaky end-to-end tests for {plat}.",
            "Deploys of {svc} to {env} kept getting blocked by unreliable browser-free end-to-end checks covering {plat}, one run in {n}.",
        ),
        (
            "{team} quarantined the flaky tests, now retries them once with a report, and named a weekly owner to clear the quarantine list.",
        ),
        (
            "builds of {svc} going red at random because of unreliable integration checks",
            "intermittent CI failures holding up {svc} releases",
        ),
        {"n": ("5", "8", "12")},
    ),
    S(
        "bad-config",
        ("config", "rollout", "validation"),
        (
            "A config push for {svc} in {env} carried a wrong upstream base URL, and {plat} started showing blank screens.",
            "The {svc} settings rolled out to {env} pointed at a non-existent upstream, so {plat} rendered empty pages.",
        ),
        (
            "{team} reverted to the last known-good config and added schema validation plus a smoke test to the config pipeline.",
        ),
        (
            "a bad settings change pointing {svc} at the wrong endpoint",
            "empty views right after a configuration update to {svc}",
        ),
        {},
    ),
    S(
        "noisy-alert",
        ("alerting", "oncall", "slo"),
        (
            "The latency alert of {svc} in {env} fired dozens of times a night on short {plat} spikes, and real pages got ignored.",
            "Brief latency blips from {plat} kept triggering the {svc} alert in {env} all night, so responders muted it.",
        ),
        (
            "{team} replaced the threshold with a burn-rate SLO rule over {m} minutes and routed the warnings to a ticket queue.",
        ),
        (
            "too many pointless pages about {svc} response time so people tuned them out",
            "a slowness alarm for {svc} that kept waking people up for nothing",
        ),
        {"m": ("30", "60")},
    ),
    S(
        "disk-full",
        ("disk", "logging", "capacity"),
        (
            "Debug logging left on in {svc} filled the disks in {env} within {n} hours, and requests from {plat} began to fail.",
            "In {env} the {svc} hosts ran out of disk after {n} hours of debug logs, and {plat} calls started erroring.",
        ),
        (
            "{team} set log rotation with a size cap, made debug off by default and added an alert at 80 percent disk usage.",
        ),
        (
            "{svc} machines running out of storage because of verbose log output",
            "no space left on the {svc} nodes after someone enabled debug output",
        ),
        {"n": ("6", "18", "30")},
    ),
    S(
        "retry-storm",
        ("retries", "ratelimit", "backoff"),
        (
            "After a brief outage, a retry loop in {plat} hammered {svc} in {env} and tripped the rate limiter for every caller.",
            "Tight client retries from {plat} overwhelmed {svc} in {env} after a blip, and the global rate limit locked everyone out.",
        ),
        (
            "{team} added exponential backoff with jitter in the clients and per-client rate-limit buckets on the server.",
        ),
        (
            "clients retrying without pause until {svc} throttled all users",
            "a burst of repeated requests that set off {svc}'s throttle",
        ),
        {},
    ),
    S(
        "memory-leak",
        ("memory", "oom", "upgrade"),
        (
            "After the {ver} runtime upgrade, {svc} in {env} leaked memory and was OOM-killed every few hours while serving {plat}.",
            "Since moving to runtime {ver}, the {svc} pods in {env} grew until the kernel killed them, dropping {plat} requests.",
        ),
        (
            "{team} pinned the previous runtime, found an unbounded in-process cache with a heap profile, and capped it.",
        ),
        (
            "{svc} containers getting killed for running out of RAM after an upgrade",
            "resident memory growing without limit in {svc} until it was terminated",
        ),
        {"ver": ("3.12", "21", "20.11", "1.22")},
    ),
    S(
        "clock-skew",
        ("time", "tokens", "ntp"),
        (
            "Tokens issued by {svc} in {env} were rejected by {plat} because one node's clock had drifted {n} seconds.",
            "One {svc} node in {env} ran {n} seconds fast, and {plat} refused the tokens it signed as not yet valid.",
        ),
        (
            "{team} enabled NTP drift monitoring on every node and allowed a small leeway when checking token timestamps.",
        ),
        (
            "credentials minted by {svc} refused because of time drift",
            "{svc} signing tokens that looked like they came from the future",
        ),
        {"n": ("40", "90", "180")},
    ),
    S(
        "pool-exhaustion",
        ("database", "connections", "capacity"),
        (
            "During the evening peak {svc} in {env} exhausted its database connection pool and {plat} got {code} errors.",
            "The connection pool of {svc} in {env} ran dry at peak hours, so {plat} saw {code} responses.",
        ),
        (
            "{team} put a connection pooler in front of the database and lowered the per-instance pool so totals stay under the server limit.",
        ),
        (
            "{svc} running out of DB connections at busy times",
            "too many open database sessions from {svc} causing failed calls",
        ),
        {"code": ("500", "503", "504")},
    ),
    S(
        "secret-rotation",
        ("secrets", "rotation", "auth"),
        (
            "A rotated API secret was not picked up by {svc} in {env}, so calls from {plat} failed with 401 until a restart.",
            "After the credential rotation, {svc} in {env} kept the old key in memory and {plat} got unauthorized errors.",
        ),
        (
            "{team} made the service reload secrets from the vault on change and keep old and new keys valid for an hour.",
        ),
        (
            "{svc} still holding the previous credential after it was rotated",
            "401s from {svc} because it never reloaded a changed key",
        ),
        {},
    ),
    S(
        "slow-autoscale",
        ("autoscaling", "capacity", "traffic"),
        (
            "Traffic from {plat} for the {event} spike outran {svc} in {env}; autoscaling took {n} minutes to add capacity.",
            "In {env}, {svc} scaled out too slowly for the {event} surge and requests from {plat} queued for {n} minutes.",
        ),
        ("{team} now pre-scales before known events and scales on request queue depth instead of CPU.",),
        (
            "not enough {svc} capacity when a burst of traffic arrived",
            "the autoscaler lagging behind a surge on {svc}",
        ),
        {"event": ("launch", "newsletter", "holiday sale", "sports final"), "n": ("8", "15", "20")},
    ),
    S(
        "cdn-error-cache",
        ("cdn", "caching", "incident"),
        (
            "The CDN cached an error page from {svc} in {env} for {n} minutes, and {plat} kept seeing it after the fix.",
            "Edge caches held a 502 page of {svc} in {env} for {n} minutes, so {plat} stayed broken after recovery.",
        ),
        (
            "{team} stopped caching 5xx responses at the edge and added a purge step to the incident checklist.",
        ),
        (
            "edge servers still serving an old failure page for {svc}",
            "a broken response from {svc} stuck in the content delivery network",
        ),
        {"n": ("10", "30", "45")},
    ),
    S(
        "double-cron",
        ("cron", "idempotency", "failover"),
        (
            "A scheduled job in {svc} ran twice in {env} after a failover, and {plat} users got every {item} twice.",
            "After failover, both {svc} schedulers in {env} fired the same job, sending {plat} duplicate {item}s.",
        ),
        (
            "{team} wrapped the job in a lease-based distributed lock and made sends idempotent with a dedupe key.",
        ),
        (
            "a timed task in {svc} executing two times so people received doubles",
            "duplicate sends from a {svc} periodic job",
        ),
        {"item": ("receipt", "reminder", "push message", "digest")},
    ),
    S(
        "blind-canary",
        ("canary", "deploy", "metrics"),
        (
            "A bad build of {svc} passed automated canary analysis in {env} because it only watched server errors, not {plat} crashes.",
            "The canary check for {svc} in {env} approved a build that crashed {plat}, since it ignored client-side errors.",
        ),
        (
            "{team} added client crash rate and key business metrics to the canary analysis and lengthened the bake to {m} minutes.",
        ),
        (
            "a broken {svc} release slipping through automated rollout checks",
            "progressive delivery of {svc} missing a crash it should have caught",
        ),
        {"m": ("30", "45", "60")},
    ),
    S(
        "idle-timeout",
        ("websocket", "loadbalancer", "timeouts"),
        (
            "Long-lived connections from {plat} to {svc} in {env} dropped every {n} seconds because the balancer idle timeout was short.",
            "{plat} lost their streaming connection to {svc} in {env} every {n} seconds: the load balancer closed idle sockets.",
        ),
        ("{team} raised the idle timeout and added an application heartbeat every 30 seconds.",),
        (
            "persistent sockets to {svc} disconnecting on a fixed interval",
            "realtime sessions with {svc} cut off after a minute of quiet",
        ),
        {"n": ("60", "90", "120")},
    ),
    S(
        "empty-backups",
        ("backups", "restore", "dataloss"),
        (
            "A restore drill for {svc} in {env} showed the nightly backups had been empty for {n} days, putting {plat} user data at risk.",
            "Nightly snapshots of {svc} in {env} were zero bytes for {n} days; a restore for {plat} data would have failed.",
        ),
        (
            "{team} fixed the backup job's credentials and now runs an automatic restore test weekly with an alert on failure.",
        ),
        (
            "{svc} snapshots that turned out to contain nothing",
            "a recovery rehearsal for {svc} finding unusable dumps",
        ),
        {"n": ("9", "17", "40")},
    ),
    S(
        "client-timeout",
        ("dependencies", "timeouts", "upgrade"),
        (
            "Upgrading the HTTP client library in {svc} to {ver} removed the default timeout, and {plat} calls in {env} started hanging.",
            "A library bump to {ver} in {svc} left outbound calls without a timeout, so {plat} requests in {env} hung forever.",
        ),
        (
            "{team} set explicit timeouts on every outbound call and added a contract test that fails without them.",
        ),
        (
            "requests through {svc} stuck indefinitely after a dependency update",
            "{svc} outbound calls never giving up since a package bump",
        ),
        {"ver": ("2.0", "5.1", "0.27")},
    ),
    S(
        "pii-logs",
        ("privacy", "logging", "compliance"),
        (
            "In {env}, {svc} wrote full request bodies from {plat} into the logs, email addresses and phone numbers included.",
            "The {svc} request logger in {env} captured {plat} payloads with personal data in plain text.",
        ),
        (
            "{team} added a redaction filter to the logging pipeline, purged the affected indexes and reviewed every logged field.",
        ),
        (
            "personal information from users leaking into {svc}'s log output",
            "customer emails showing up in plain text in {svc} logs",
        ),
        {},
    ),
    S(
        "renamed-field",
        ("api", "compatibility", "versioning"),
        (
            "Older {plat} builds broke against {svc} in {env} when a response field was renamed with no deprecation period.",
            "{plat} on old versions crashed on {svc} responses in {env} after the {field} field got a new name.",
        ),
        ("{team} restored the old field beside the new one and now keeps both for two release cycles.",),
        (
            "a breaking response schema change in {svc} crashing outdated clients",
            "{svc} dropping a JSON key that older releases still read",
        ),
        {"field": ("user_id", "price", "status", "created")},
    ),
)
