"""Other memory servers' exports as Lore lesson lines, for ``lore-memory import --from``.

``server-memory``: a lesson per observation (problem ``entity (type)``, context its relations).
``mcp-memory-service``: a lesson per memory (problem its first line, times kept). Ids are ULIDs
hashed from each record's identity and ``created_at``, so a re-import adds only what is new. A
malformed record is reported and left out; the rest still converts."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from ulid import ULID

from lore_mcp.errors import InvalidArgument
from lore_mcp.redaction import fit, redact
from lore_mcp.services.transfer import checked_lesson, json_object, refusal
from stores import MAX_TAG_CHARS, MAX_TAGS, MAX_TEXT_CHARS

SOURCES = ("server-memory", "mcp-memory-service")
PROBLEM_CHARS = 200
_HEX = re.compile(r"\A[0-9a-fA-F]{1,128}\Z")  # \Z, not $: "$" lets a final newline by


@dataclass
class Conversion:
    """Lore lesson lines (JSON strings) and one error sentence per record left out."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def lesson_lines(source: str, text: str) -> list[str]:
    """The lesson lines of a foreign export; ``ValueError`` naming every bad record if any."""
    converted = convert(source, text)
    if converted.errors:
        raise ValueError("; ".join(converted.errors))
    return converted.lines


def convert(source: str, text: str) -> Conversion:
    """A foreign export as Lore lesson lines, with the records it could not read."""
    if source == "server-memory":
        return _server_memory(text)
    if source == "mcp-memory-service":
        return _mcp_memory_service(text)
    raise ValueError(f"unknown source {source!r} (expected one of {', '.join(SOURCES)})")


def stable_id(source: str, *identity: str, millis: int = 0) -> str:
    """A ULID-shaped id: ``millis`` as its time, a hash of source and identity as the rest."""
    digest = hashlib.sha256("\0".join((source, *identity)).encode("utf-8")).digest()
    value = (max(0, min(millis, (1 << 48) - 1)) << 80) | int.from_bytes(digest[:10], "big")
    return str(ULID.from_int(value))


class _Converter:
    def __init__(self, source: str) -> None:
        self.source, self.result = source, Conversion()
        self.seen: set[str] = set()

    def error(self, where: str, why: str) -> None:
        self.result.errors.append(f"{where}: {why}")

    def add(self, where: str, lesson: dict[str, Any]) -> None:
        """Check the lesson as ``import_file`` will, so every line handed on is a good one."""
        if lesson["id"] in self.seen:
            return  # the same record twice in one file
        try:
            checked_lesson(lesson)
        except (ValidationError, InvalidArgument) as exc:
            self.error(where, refusal(exc).removeprefix("Invalid arguments: "))
            return
        self.seen.add(lesson["id"])
        self.result.lines.append(json.dumps({"type": "lesson", **lesson}, ensure_ascii=False))


def _tags(values: list[str]) -> list[str]:
    """Tags trimmed, cut to Lore's limit, de-duplicated ignoring case. Case is kept: import
    redacts before lower-casing. Redacted before the cut, so no part of a secret survives."""
    clean: dict[str, str] = {}
    for value in values:
        tag = _cut(value.strip(), MAX_TAG_CHARS)
        if tag:
            clean.setdefault(tag.lower(), tag)
    return list(clean.values())[:MAX_TAGS]


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, redacted first when it has to be cut."""
    return text if len(text) <= limit else fit(redact(text).text, limit).strip()


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _server_memory(text: str) -> Conversion:
    out = _Converter("server-memory")
    entities: list[tuple[int, str, str, list[str]]] = []
    relations: list[tuple[str, str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"line {number}"
        data = json_object(line) if line.strip() else None
        if isinstance(data, str):
            out.error(where, data)
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        if kind == "entity":
            name, entity_type = _text(data.get("name")), _text(data.get("entityType"))
            observations = data.get("observations", [])
            if name is None or entity_type is None:
                out.error(where, "an entity needs a non-empty 'name' and 'entityType'")
            elif not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                out.error(where, "an entity's 'observations' must be a list of strings")
            else:
                entities.append((number, name, entity_type, observations))
        elif kind == "relation":
            ends = [_text(data.get(key)) for key in ("from", "to", "relationType")]
            if any(end is None for end in ends):
                out.error(where, "a relation needs a non-empty 'from', 'to' and 'relationType'")
            else:
                source, target, relation = (end for end in ends if end is not None)
                relations.append((source, relation, target))
        else:
            out.error(where, f"unknown type {kind!r} (expected 'entity' or 'relation')")
    _add_observations(out, entities, relations)
    return out.result


def _add_observations(
    out: _Converter, entities: list[tuple[int, str, str, list[str]]], relations: list[tuple[str, str, str]]
) -> None:
    """A lesson per observation, after the whole file: relations may come on any line."""
    for number, name, entity_type, observations in entities:
        linked = [f"{a} {r} {b}" for a, r, b in relations if name in (a, b)]
        context = f"Relations: {'; '.join(linked)}." if linked else None
        if context is not None and len(context) > MAX_TEXT_CHARS:
            context = _cut(context, MAX_TEXT_CHARS - 1) + "…"
        for index, observation in enumerate(observations, start=1):
            if not observation.strip():
                continue
            out.add(
                f"line {number}: observation {index}",
                {
                    "id": stable_id(out.source, name, observation.strip()),
                    "problem": f"{name} ({entity_type})",
                    "resolution": observation.strip(),
                    "context": context,
                    "tags": _tags([entity_type, name]),
                    "source": out.source,
                    "meta": {"imported_from": out.source},
                },
            )


def _mcp_memory_service(text: str) -> Conversion:
    out = _Converter("mcp-memory-service")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        out.error(f"line {exc.lineno}", f"not JSON ({exc.msg})")
        return out.result
    except RecursionError:
        out.error("line 1", "not JSON (nested too deeply)")
        return out.result
    memories = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(memories, list):
        out.error("file", "expected mcp-memory-service's export: a JSON object with a 'memories' list")
        return out.result
    for number, memory in enumerate(memories, start=1):
        try:
            lesson = _service_lesson(out.source, memory)
        except ValueError as exc:
            out.error(f"memory {number}", str(exc))
            continue
        out.add(f"memory {number}", lesson)
    return out.result


def _service_lesson(source: str, memory: Any) -> dict[str, Any]:
    """A memory as a lesson, its id from content hash and creation time (stable on re-import);
    ``ValueError`` says why a memory cannot be one."""
    if not isinstance(memory, dict):
        raise ValueError("expected a JSON object")
    content = _text(memory.get("content"))
    if content is None:
        raise ValueError("'content' must be non-empty text")
    tags = memory.get("tags") or []
    if isinstance(tags, str):  # the service also takes "a,b,c"
        tags = tags.split(",")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("'tags' must be a list of strings")
    created, updated = _when(memory.get("created_at")), _when(memory.get("updated_at"))
    content_hash = memory.get("content_hash")
    if not isinstance(content_hash, str) or not _HEX.fullmatch(content_hash):
        content_hash = hashlib.sha256(content.encode("utf-8")).hexdigest()
    millis = int(created.timestamp() * 1000) if created else 0
    return {
        "id": stable_id(source, _text(memory.get("store")) or "default", content_hash.lower(), millis=millis),
        "problem": _first_line(content),
        "resolution": content,
        "tags": _tags(
            [t for t in tags if t.strip().lower() != "untagged"] + [_text(memory.get("memory_type")) or ""]
        ),
        "source": source,
        "created_at": created.isoformat() if created else None,
        "updated_at": changed.isoformat() if (changed := updated or created) else None,
        "meta": {"imported_from": source, "content_hash": content_hash.lower()},
    }


def _first_line(content: str) -> str:
    """The memory's first line, cut at a word near ``PROBLEM_CHARS``."""
    line = content.splitlines()[0].strip()
    if len(line) <= PROBLEM_CHARS:
        return line
    cut = _cut(line, PROBLEM_CHARS - 1)
    if " " in cut[PROBLEM_CHARS // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def _when(value: Any) -> datetime | None:
    """A timestamp as the service writes it: seconds since the epoch, or ISO 8601."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("timestamps must be seconds since 1970 or ISO 8601")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp {value} is out of range") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"timestamp {value!r} is not ISO 8601") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError("timestamps must be seconds since 1970 or ISO 8601")
