"""Vocabulary of the data-platform set: attribute values, their other names, entity names, contexts.

Each attribute value has one canonical slot value, the form a lesson writes it in, and the forms
a hurried person uses instead, each tagged with the kind of paraphrase it is. A form is either a
bare word ("Ireland"), placed into the dimension's clause ("in {}"), or "clause|bare" when the
clause does not follow the pattern. Numbers in lesson text are kept away from the digits that
versions and region codes use, so that no sibling's words are a subset of another's.
"""

from __future__ import annotations

# dimension -> (clause pattern, slot key)
DIMENSIONS: dict[str, tuple[str, str]] = {
    "region": ("in {}", "region"),
    "python": ("on {}", "runtime"),
    "java": ("on {}", "runtime"),
    "cuda": ("with {}", "runtime"),
    "spark": ("on {}", "runtime"),
    "os": ("on {}", "os"),
    "store": ("on {}", "store"),
    "tier": ("for {} customers", "tier"),
    "schedule": ("in the {} run", "schedule"),
}

# Dimensions without digits in their values: the only ones a family may vary second or hold fixed.
WORDY = ("store", "tier", "schedule")

# dimension -> canonical value -> (form a lesson uses, [(other form, kind), ...])
VALUES: dict[str, dict[str, tuple[str, list[tuple[str, str]]]]] = {
    "region": {
        "us-east-1": ("us-east-1", [("North Virginia", "region-name"), ("N. Virginia", "region-name")]),
        "us-east-2": ("us-east-2", [("Ohio", "region-name"), ("in the Ohio region|Ohio", "region-name")]),
        "us-west-1": (
            "us-west-1",
            [("N. California", "region-name"), ("Northern California", "region-name")],
        ),
        "us-west-2": (
            "us-west-2",
            [("Oregon", "region-name"), ("in the Oregon region|Oregon", "region-name")],
        ),
        "eu-west-1": ("eu-west-1", [("Ireland", "region-name"), ("Dublin", "region-name")]),
        "eu-west-2": (
            "eu-west-2",
            [("London", "region-name"), ("in the London region|London", "region-name")],
        ),
        "eu-central-1": (
            "eu-central-1",
            [("Frankfurt", "region-name"), ("in the German region|Frankfurt", "region-name")],
        ),
        "ap-southeast-1": ("ap-southeast-1", [("Singapore", "region-name"), ("in SG|SG", "abbreviation")]),
        "ap-northeast-1": (
            "ap-northeast-1",
            [("Tokyo", "region-name"), ("in the Japan region|Tokyo", "region-name")],
        ),
        "ap-south-1": (
            "ap-south-1",
            [("Mumbai", "region-name"), ("in the India region|Mumbai", "region-name")],
        ),
        "sa-east-1": ("sa-east-1", [("São Paulo", "region-name"), ("Sao Paulo", "region-name")]),
    },
    "python": {
        "python-3.8": ("Python 3.8", [("py38", "version-alias"), ("python3.8", "spacing")]),
        "python-3.9": ("Python 3.9", [("py39", "version-alias"), ("python3.9", "spacing")]),
        "python-3.10": ("Python 3.10", [("py310", "version-alias"), ("CPython 3.10", "version-alias")]),
        "python-3.11": ("Python 3.11", [("py311", "version-alias"), ("CPython 3.11", "version-alias")]),
        "python-3.12": ("Python 3.12", [("py312", "version-alias"), ("python3.12", "spacing")]),
    },
    "java": {
        "java-8": ("Java 8", [("JDK 1.8", "version-alias"), ("jdk8", "version-alias")]),
        "java-11": ("Java 11", [("JDK 11", "version-alias"), ("openjdk11", "version-alias")]),
        "java-17": ("Java 17", [("JDK 17", "version-alias"), ("Temurin 17", "version-alias")]),
        "java-21": ("Java 21", [("JDK 21", "version-alias"), ("jdk21", "version-alias")]),
    },
    "cuda": {
        "cuda-11.8": (
            "CUDA 11.8",
            [("cu118", "version-alias"), ("with the cu118 wheels|cu118", "version-alias")],
        ),
        "cuda-12.1": (
            "CUDA 12.1",
            [("cu121", "version-alias"), ("with the cu121 wheels|cu121", "version-alias")],
        ),
        "cuda-12.4": (
            "CUDA 12.4",
            [("cu124", "version-alias"), ("with the cu124 wheels|cu124", "version-alias")],
        ),
        "cuda-12.6": (
            "CUDA 12.6",
            [("cu126", "version-alias"), ("on the cu126 image|cu126", "version-alias")],
        ),
    },
    "spark": {
        "spark-3.2": ("Spark 3.2", [("EMR 6.6", "version-alias"), ("DBR 10.4 LTS", "version-alias")]),
        "spark-3.3": ("Spark 3.3", [("EMR 6.9", "version-alias"), ("DBR 12.2 LTS", "version-alias")]),
        "spark-3.4": ("Spark 3.4", [("EMR 6.15", "version-alias"), ("DBR 13.3 LTS", "version-alias")]),
        "spark-3.5": ("Spark 3.5", [("EMR 7.0", "version-alias"), ("DBR 14.3 LTS", "version-alias")]),
    },
    "os": {
        "ubuntu-20.04": ("Ubuntu 20.04", [("Focal", "os-codename"), ("on focal nodes|focal", "os-codename")]),
        "ubuntu-22.04": (
            "Ubuntu 22.04",
            [("Jammy", "os-codename"), ("on the jammy boxes|jammy", "os-codename")],
        ),
        "ubuntu-24.04": ("Ubuntu 24.04", [("Noble", "os-codename"), ("on noble hosts|noble", "os-codename")]),
        "debian-12": (
            "Debian 12",
            [("Bookworm", "os-codename"), ("on bookworm images|bookworm", "os-codename")],
        ),
        "macos": (
            "macOS",
            [("Mac", "os-synonym"), ("OS X", "os-synonym"), ("on the MacBooks|MacBooks", "os-synonym")],
        ),
        "windows": ("Windows", [("Win11", "abbreviation"), ("on the win laptops|win", "abbreviation")]),
        "amazon-linux-2023": (
            "Amazon Linux 2023",
            [("AL2023", "abbreviation"), ("on al2023 AMIs|AL2023", "abbreviation")],
        ),
        "rhel-9": ("RHEL 9", [("Red Hat 9", "os-synonym"), ("rhel9", "spacing")]),
    },
    "store": {
        "postgres": (
            "Postgres",
            [("PG", "abbreviation"), ("PostgreSQL", "store-synonym"), ("pg", "abbreviation")],
        ),
        "bigquery": ("BigQuery", [("BQ", "abbreviation"), ("Big Query", "spacing")]),
        "clickhouse": ("ClickHouse", [("CH", "abbreviation"), ("Click House", "spacing")]),
        "elasticsearch": ("Elasticsearch", [("ES", "abbreviation"), ("Elastic", "store-synonym")]),
        "mongodb": ("MongoDB", [("Mongo", "abbreviation"), ("mongo", "abbreviation")]),
        "dynamodb": ("DynamoDB", [("Dynamo", "abbreviation"), ("DDB", "abbreviation")]),
        "sqlserver": ("SQL Server", [("MSSQL", "abbreviation"), ("SqlServer", "spacing")]),
        "cassandra": ("Cassandra", [("C*", "abbreviation"), ("Cass", "abbreviation")]),
    },
    "tier": {
        "enterprise": (
            "enterprise",
            [("for large accounts|large-account", "tier-synonym"), ("for ENT accounts|ENT", "abbreviation")],
        ),
        "free": (
            "free-tier",
            [
                ("for non-paying users|non-paying", "tier-synonym"),
                ("for free plan users|free plan", "spacing"),
            ],
        ),
        "pro": ("Pro-plan", [("for paid self-serve accounts|self-serve", "tier-synonym")]),
        "starter": ("Starter-plan", [("for entry-level paid accounts|entry-level", "tier-synonym")]),
        "internal": (
            "internal",
            [
                ("for our own staff accounts|staff", "tier-synonym"),
                ("for dogfood accounts|dogfood", "tier-synonym"),
            ],
        ),
        "trial": ("trial", [("for prospects still evaluating|evaluation", "tier-synonym")]),
    },
    "schedule": {
        "nightly": (
            "nightly",
            [("overnight|overnight", "schedule-synonym"), ("at 2 a.m.|2am", "schedule-synonym")],
        ),
        "hourly": (
            "hourly",
            [("every hour|every hour", "schedule-synonym"), ("on the hour|top-of-hour", "schedule-synonym")],
        ),
        "weekly": (
            "weekly",
            [
                ("in the Sunday run|Sunday", "schedule-synonym"),
                ("once a week|once a week", "schedule-synonym"),
            ],
        ),
        "month-end": (
            "month-end",
            [("at EOM|EOM", "abbreviation"), ("during month close|month close", "schedule-synonym")],
        ),
        "quarter-hour": (
            "15-minute",
            [
                ("every quarter hour|quarter-hourly", "schedule-synonym"),
                ("in the */15 cron|*/15", "abbreviation"),
            ],
        ),
        "on-demand": (
            "on-demand",
            [("when triggered by hand|manual", "schedule-synonym"), ("in ad hoc runs|ad hoc", "spacing")],
        ),
    },
}

# Name parts every entity kind combines: a business area and a kind-specific pattern.
AREAS = (
    "orders payments invoices clickstream inventory shipments refunds ads search reviews sessions "
    "ledger fraud churn pricing catalog loyalty support returns signups subscriptions carts coupons "
    "payouts listings bookings telemetry sensors messages claims"
).split()

ENTITY_PATTERNS: dict[str, tuple[str, ...]] = {
    "job": ("{}_rollup", "{}_backfill", "{}_export", "{}_dedupe", "{}_snapshot", "{}_sync"),
    "topic": ("{}-events", "{}-cdc", "{}-updates", "{}.changes"),
    "table": ("fact_{}", "dim_{}", "stg_{}", "{}_agg"),
    "notebook": ("{}_eda", "{}-forecast-draft", "{}_cohorts", "{}-audit"),
    "model": ("{}-ranker", "{}-classifier", "{}-forecaster", "{}-scorer", "{}-embedder"),
    "migration": ("add_{}_index", "split_{}_table", "backfill_{}_ids", "rename_{}_status"),
    "pool": ("{}-gpu-pool", "{}-trainers", "{}-a100s", "{}-inference-gpus"),
    "bucket": ("{}-raw", "{}-archive", "{}-landing", "{}-exports"),
    "account": ("svc-{}-loader", "{}-reader", "{}-etl-bot", "{}-analyst-role"),
}

TEAMS = (
    "growth analytics",
    "payments data",
    "ML platform",
    "search relevance",
    "finance reporting",
    "risk modelling",
    "marketplace",
    "core data",
    "recommendations",
    "data infrastructure",
)

CONTEXTS = (
    "Found during the {team} on-call rotation; ticket DATA-{t}.",
    "Postmortem DP-{t} for the {team} team.",
    "Hit while moving the {team} pipelines onto the shared platform.",
    "Reported by the {team} analysts; took most of a day to pin down.",
    "From the {team} incident review, issue {t}.",
)

# Detail numbers: none of them is a version part or a region digit.
MINUTES = (25, 35, 40, 45, 50, 75, 90)
GIGABYTES = (48, 96, 160, 256, 320, 480)
COUNTS = ("two", "three", "four", "five", "six")
THOUSANDS = (25, 40, 50, 75, 250)
