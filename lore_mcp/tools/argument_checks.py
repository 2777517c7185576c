"""Argument checks the SDK's validation skips or words badly, run first against the input schema.

The SDK ignores unknown names (a misspelt ``tag=`` dropped the tags and the save succeeded) and
compares NaN or Infinity with bounds ("should be less than or equal to 1"); both come back here
as ``VALIDATION_ERROR`` with a clear sentence."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from lore_mcp.errors import InvalidArgument
from lore_mcp.redaction import redact

# Unknown names listed, and chars of each: they are the caller's text, so the sentence stays short.
MAX_NAMES_SHOWN = 5
MAX_NAME_CHARS = 40
# How JSON parsers spell the non-finite numbers: the client sent them so.
_JSON_NAMES = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def check_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Refuse names the listed input ``schema`` lacks, and non-finite numbers."""
    accepted = list(schema.get("properties", {}))
    unknown = [name for name in arguments if name not in accepted]
    if unknown:
        raise InvalidArgument(unknown_sentence(tool, unknown, accepted))
    found = _non_finite(arguments)
    if found is not None:
        path, value = found
        bounds = _bounds(_schema_at(schema, path))
        raise InvalidArgument(
            f"{_path_text(path)} must be a finite number{bounds}, not {_JSON_NAMES[str(value)]}."
        )


def unknown_sentence(tool: str, unknown: list[str], accepted: list[str]) -> str:
    """The refusal of ``unknown`` argument names, with the nearest accepted name for each."""
    shown = [_name_text(name) for name in unknown[:MAX_NAMES_SHOWN]]
    more = len(unknown) - len(shown)
    listed = ", ".join(shown) + (f" and {more} more" if more else "")
    sentence = f"{tool} has no {'argument' if len(unknown) == 1 else 'arguments'} {listed}"
    guesses = [
        (name, close[0])
        for name in unknown[:MAX_NAMES_SHOWN]
        if (close := difflib.get_close_matches(name, accepted, n=1, cutoff=0.6))
    ]
    if len(unknown) == 1 and guesses:
        sentence += f"; did you mean {guesses[0][1]!r}?"
    elif guesses:
        sentence += "; did you mean " + ", ".join(f"{g!r} for {_name_text(n)}" for n, g in guesses) + "?"
    else:
        sentence += "."
    return f"{sentence} It takes {', '.join(accepted)}." if accepted else f"{sentence} It takes no arguments."


def _name_text(name: str) -> str:
    """A caller's argument name as a refusal shows it: redacted and shortened."""
    text = redact(name).text
    return repr(text if len(text) <= MAX_NAME_CHARS else text[:MAX_NAME_CHARS] + "…")


def _non_finite(arguments: Mapping[str, Any]) -> tuple[tuple[Any, ...], float] | None:
    """Path and value of the first non-finite number; iterative, so deep nesting costs no stack."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((key,), value) for key, value in arguments.items()]
    stack.reverse()
    while stack:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path, item
        elif isinstance(item, Mapping):
            stack.extend(reversed([((*path, key), inner) for key, inner in item.items()]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([((*path, i), inner) for i, inner in enumerate(item)]))
    return None


def _path_text(path: tuple[Any, ...]) -> str:
    """``lessons[0].confidence``: schema names as they are, other keys redacted, cut, quoted."""
    text = str(path[0])
    for step in path[1:]:
        if isinstance(step, int):
            text += f"[{step}]"
        elif step.isidentifier() and len(step) <= MAX_NAME_CHARS:
            text += f".{step}"
        else:
            text += f"[{_name_text(str(step))}]"
    return text


def _schema_at(schema: Mapping[str, Any], path: tuple[Any, ...]) -> Mapping[str, Any]:
    """The part of ``schema`` that describes the value at ``path``; empty where none does."""
    here: Mapping[str, Any] = schema
    for step in path:
        for option in _options(schema, here):
            if isinstance(step, int) and isinstance(option.get("items"), Mapping):
                here = option["items"]
                break
            if isinstance(step, str) and step in option.get("properties", {}):
                here = option["properties"][step]
                break
        else:
            return {}
    return here


def _options(root: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``schema`` and its ``anyOf``/``oneOf`` alternatives, each with its ``$ref`` followed."""
    options = [schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())]
    return [_resolved(root, option) for option in options if isinstance(option, Mapping)]


def _resolved(root: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        if isinstance(found, Mapping):
            return found
    return schema


# A number's bounds as a refusal words them, in this order.
_BOUND_WORDS = {
    "minimum": "at least",
    "exclusiveMinimum": "greater than",
    "maximum": "at most",
    "exclusiveMaximum": "less than",
}


def _bounds(schema: Mapping[str, Any]) -> str:
    """`` between 0 and 1`` (or ``greater than 0 and at most 36500``) from the number's schema."""
    for option in [schema, *schema.get("anyOf", ())]:
        if not isinstance(option, Mapping) or option.get("type") not in ("number", "integer"):
            continue
        low, high = option.get("minimum"), option.get("maximum")
        if low is not None and high is not None:
            return f" between {low:g} and {high:g}"
        parts = [
            f"{word} {option[key]:g}" for key, word in _BOUND_WORDS.items() if option.get(key) is not None
        ]
        return (" " + " and ".join(parts)) if parts else ""
    return ""
