"""The distinguishing attributes of the ops-runbook set and every way of writing them.

Each attribute value has one canonical name (the slot value), one phrase the lessons use, and
the phrases questions may use instead: synonyms, and separately abbreviations, so a question's
``kind`` says which of them it took. No phrase of one value may appear in another value's
phrases (checked by the tests), so naming an attribute in other words never names a sibling.
"""

from __future__ import annotations

from typing import NamedTuple


class Value(NamedTuple):
    """One canonical attribute value and how lessons and questions write it."""

    lesson: str
    synonyms: tuple[str, ...]
    abbreviations: tuple[str, ...] = ()


# Environments, written to follow "in".
ENVS: dict[str, Value] = {
    "production": Value(
        "production",
        ("the live environment", "the customer-facing stack", "live", "the real user traffic stack"),
        ("prod", "PRD"),
    ),
    "staging": Value(
        "staging",
        ("pre-prod", "the rehearsal environment", "the pre-release stack", "the release-candidate stack"),
        ("stg",),
    ),
    "qa": Value(
        "the test environment",
        ("QA", "the quality-assurance stack", "the testers' cluster"),
    ),
    "development": Value(
        "the development environment",
        ("the developer sandbox", "the engineers' scratch stack", "the sandbox cluster"),
        ("dev",),
    ),
    "canary": Value(
        "the canary ring",
        ("the early-rollout slice", "the one-percent cohort", "the first rollout wave"),
    ),
    "dr": Value(
        "the disaster-recovery site",
        ("the failover region", "the standby site", "the backup region we fail over to"),
        ("DR",),
    ),
}

# Client platforms, written as a noun phrase (subject or object).
PLATFORMS: dict[str, Value] = {
    "mobile": Value(
        "mobile clients", ("the phones", "iOS and Android apps", "handsets", "the app-store builds")
    ),
    "web": Value("web browsers", ("the website", "the browser front end", "people on the site in Chrome")),
    "desktop": Value(
        "the desktop app",
        ("the installed Windows and Mac client", "the laptop application", "the Electron client"),
    ),
    "tv": Value(
        "smart TV apps",
        ("living-room devices", "set-top boxes", "the television client", "the Roku and Fire sticks"),
    ),
    "partner": Value(
        "partner API consumers",
        ("third-party integrators", "the companies that call us server to server", "B2B integrations"),
    ),
}

# Owning teams, written as a noun phrase (subject or object).
TEAMS: dict[str, Value] = {
    "sre": Value(
        "the site reliability engineering team",
        ("the on-call rotation", "whoever carries the pager", "the reliability folks"),
        ("SRE", "the SREs"),
    ),
    "infra": Value(
        "the compute infrastructure team",
        ("the people who run the clusters", "the cluster owners", "the hosting group"),
        ("infra",),
    ),
    "releng": Value(
        "release engineering",
        ("the build-and-release crew", "the deploy pipeline owners", "the people who ship the builds"),
        ("releng",),
    ),
    "security": Value(
        "the security engineering team",
        ("the vulnerability response crew", "the people guarding credentials", "the threat group"),
        ("secops", "appsec"),
    ),
    "dba": Value(
        "the database administration team",
        ("the Postgres keepers", "the schema owners", "the people who babysit the data stores"),
        ("the DBAs",),
    ),
    "data": Value(
        "data engineering",
        ("the analytics pipeline people", "the warehouse owners", "the ETL folks"),
        ("data eng",),
    ),
}

# Service names are two words, a prefix and a suffix; siblings may share either, so only the
# other word tells them apart. A prefix may have an abbreviation questions can use.
PREFIXES: dict[str, str] = {
    "payment": "",
    "checkout": "",
    "search": "",
    "notification": "notif",
    "profile": "",
    "session": "",
    "media": "",
    "billing": "",
    "inventory": "inv",
    "pricing": "",
    "authentication": "auth",
    "recommendation": "recs",
    "configuration": "config",
    "order": "",
}
SUFFIXES: tuple[str, ...] = (
    "gateway",
    "worker",
    "api",
    "indexer",
    "scheduler",
    "cache",
    "proxy",
    "sync",
    "router",
)
# How a service name may be written; lessons use one of the first three.
SPELLINGS: tuple[str, ...] = ("hyphen", "camel", "snake", "spaced")


def spell(prefix: str, suffix: str, spelling: str) -> str:
    """Write the service ``prefix``-``suffix`` in one spelling."""
    if spelling == "hyphen":
        return f"{prefix}-{suffix}"
    if spelling == "camel":
        return prefix.capitalize() + suffix.capitalize()
    if spelling == "snake":
        return f"{prefix}_{suffix}"
    return f"{prefix} {suffix}"


class Scenario(NamedTuple):
    """One runbook situation: how lessons and questions describe it (``ops_runbook_scenarios``)."""

    name: str
    tags: tuple[str, ...]
    problems: tuple[str, ...]
    resolutions: tuple[str, ...]
    cores: tuple[str, ...]
    details: dict[str, tuple[str, ...]]


ATTRIBUTES: dict[str, dict[str, Value]] = {"env": ENVS, "platform": PLATFORMS, "team": TEAMS}
