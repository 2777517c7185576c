"""Orgs and API keys for the CLI and root-only tools, one set of rules; the store only sees a key's digest."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from lore_mcp.auth import display_prefix, new_key, secret_digest
from lore_mcp.errors import InvalidArgument
from lore_mcp.redaction import fit, redact
from lore_mcp.services.lesson_input import PROJECT_PATTERN, check_not_secret, check_project, text_problem
from lore_mcp.services.models import Stored
from stores import ActivityNote, ConflictError, KeyStore

ORG_PATTERN = PROJECT_PATTERN  # org ids follow the same rule as project names
DEFAULT_ORG = "local"
MAX_KEY_NAME_CHARS = 100


class KeyOut(Stored):  # the stored key has no secret to leave out: only its digest
    """A key as listed: never its secret."""

    id: str
    name: str
    prefix: str
    org: str
    project: str | None
    root: bool
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedKey(KeyOut):
    """A key just created: the only time its secret is shown."""

    key: str
    redacted: list[str] = Field(
        default_factory=list, description="Kinds of secrets removed from the name before storing it."
    )


class KeyList(BaseModel):
    keys: list[KeyOut]


def check_org(org: str) -> str:
    if not isinstance(org, str) or not ORG_PATTERN.fullmatch(org):
        raise InvalidArgument(
            "org must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."
        )
    check_not_secret("org", org)
    return org


def check_key_name(name: str, what: str = "A key name") -> str:
    """A name of printable characters (which excludes U+0000 and lone surrogates)."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > MAX_KEY_NAME_CHARS or not name.isprintable():
        raise InvalidArgument(f"{what} must be 1-{MAX_KEY_NAME_CHARS} printable characters.")
    return name


def redact_name(name: str) -> tuple[str, list[str]]:
    """A checked name with secrets redacted (see ``check_key_name``), and their kinds."""
    result = redact(name)
    return fit(result.text, MAX_KEY_NAME_CHARS), list(result.kinds)


class KeyService:
    """Creating orgs and keys, listing and revoking keys (blocking: the key tools run them on worker threads)."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys

    def init_org(self, org: str = DEFAULT_ORG, *, name: str | None = None) -> CreatedKey:
        """Create the org and its first root key; refused when the org exists."""
        org = check_org(org)
        if self.keys.get_org(org) is not None:
            raise ConflictError(
                f"Org {org!r} is already initialised; create more keys with "
                "`lore-memory keys create --name NAME [--root]`."
            )
        self.keys.create_org(org, redact_name(check_key_name(name, "An org name"))[0] if name else org)
        return self.create_key(org, name="root", project=None, root=True)

    def create_key(
        self,
        org: str,
        *,
        name: str,
        project: str | None,
        root: bool,
        activity: tuple[str, ActivityNote] | None = None,
    ) -> CreatedKey:
        """A new key; ``activity`` logs it in that project in the same transaction (CLI: none)."""
        org = check_org(org)
        # Names are shown to every root key and in history, so they are redacted like stored text.
        name, kinds = redact_name(check_key_name(name))
        if project is not None:
            project = check_project(project)
            if root:
                raise InvalidArgument("A root key reaches every project; give it no project.")
        if self.keys.get_org(org) is None:
            raise InvalidArgument(f"There is no org {org!r}; run `lore-memory init` first.")
        raw = new_key()
        stored = self.keys.add_key(
            org,
            name=name,
            key_hash=secret_digest(raw),
            prefix=display_prefix(raw),
            project=project,
            root=root,
            activity=activity,
        )
        return CreatedKey(**KeyOut.of(stored).model_dump(), key=raw, redacted=kinds)

    def list_keys(self, org: str) -> list[KeyOut]:
        return [KeyOut.of(k) for k in self.keys.list_keys(check_org(org))]

    def revoke_key(
        self, org: str, key_id: str, *, activity: tuple[str, ActivityNote] | None = None
    ) -> KeyOut:
        if not isinstance(key_id, str) or not key_id or len(key_id) > 64 or text_problem(key_id):
            raise InvalidArgument("key id must be the id shown by list_keys.")
        return KeyOut.of(self.keys.revoke_key(check_org(org), key_id, activity=activity))
