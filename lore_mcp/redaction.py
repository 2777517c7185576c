"""Remove secrets from text before Lore stores or embeds it: agents paste logs, configs and shell sessions,
and what is saved is kept, shared with a team and sent to an embedding model. Each secret becomes
``[REDACTED:kind]``, the stable kind of the ``lore_mcp.secret_rules`` rule that found it (README lists them).

Matching sees the text with compatibility forms folded (NFKC: fullwidth "sk-" reads "sk-") and invisible
characters removed (zero-width spaces and joiners, soft hyphen, variation selectors, tags...), so neither
hides a secret. What is stored keeps the caller's characters: each match maps back to its original span."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lore_mcp.secret_rules import FILLER, RULES, Rule

# What a redacted secret becomes, as a group: splitting on it keeps the markers, at odd positions.
MARKER = re.compile(r"(\[REDACTED:[a-z_]+\])")
# Characters that can split a secret unseen: every Default_Ignorable_Code_Point (unassigned ones too: a
# later Unicode may give them meaning) and format character (Cf). test_shapes.py checks it against Unicode.
_IGNORABLE_RANGES = (
    (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
    (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
INVISIBLE = frozenset(chr(cp) for first, last in _IGNORABLE_RANGES for cp in range(first, last + 1))
# Where characters whose NFKC form holds ASCII live (fullwidth, mathematical, circled letters, ligatures,
# odd spaces...): only these can dress up an ASCII secret, and folding only them keeps the table small
# (test_shapes.py checks every code point).
_FOLDING_RANGES = (
    (0xA0, 0xBE), (0x132, 0x17F), (0x1C4, 0x1F3), (0x2B0, 0x2E3), (0x37A, 0x385),
    (0x1D2C, 0x1DBB), (0x1E9A, 0x1E9A), (0x1FBD, 0x20A8), (0x2100, 0x2189), (0x2460, 0x24EA),
    (0x2A74, 0x2A76), (0x2C7C, 0x2C7D), (0x3000, 0x3000), (0x309B, 0x309C), (0x3200, 0x325F),
    (0x32B1, 0x32CF), (0x3358, 0x33FF), (0xA7F2, 0xA7F4), (0xFB00, 0xFB29), (0xFC5E, 0xFC63),
    (0xFDFA, 0xFE7E), (0xFF01, 0xFF5E), (0xFFE3, 0xFFE3), (0x107A5, 0x107A5),
    (0x1D400, 0x1D6A3), (0x1D7CE, 0x1D7FF), (0x1F100, 0x1F190), (0x1FBF0, 0x1FBF9),
)  # fmt: skip
# What each such character reads as while matching ("" for the invisible ones).
FOLD: dict[str, str] = {
    chr(cp): folded
    for first, last in _FOLDING_RANGES
    for cp in range(first, last + 1)
    if (folded := unicodedata.normalize("NFKC", chr(cp))) != chr(cp)
} | dict.fromkeys(INVISIBLE, "")


# The BMP characters in FOLD exactly (compiled to one table look-up) or a few astral blocks (a
# non-folding one is left as is). One class of every range is tested range by range: 10x slower on CJK.
_BMP_FOLDABLE = "".join(re.escape(c) for c in sorted(FOLD) if ord(c) < 0x10000)
_ASTRAL_BLOCKS = "".join(
    f"{chr(first)}-{chr(last)}" for first, last in _FOLDING_RANGES + _IGNORABLE_RANGES if first >= 0x10000
)
_FOLDABLE = re.compile(f"[{_BMP_FOLDABLE}]|[{_ASTRAL_BLOCKS}]")


# Short texts found to hold no secret (tags, project names, sources repeat in every lesson of an
# import): found again, they need no rule. A secret is never kept here; the count is bounded.
_CLEAN: set[str] = set()
_CLEAN_CHARS, _CLEAN_COUNT = 64, 20_000


@dataclass(frozen=True)
class Redacted:
    text: str  # the text with each secret replaced by "[REDACTED:kind]"
    kinds: tuple[str, ...]  # sorted, de-duplicated kinds found (empty if none)


def redact(text: str) -> Redacted:
    """Replace every secret in ``text`` with ``[REDACTED:kind]``."""
    found: set[str] = set()
    return Redacted(text=_scrub(text, found), kinds=tuple(sorted(found)))


def secret_kinds(text: str) -> tuple[str, ...]:
    """Kinds of secret in ``text``: names are refused, not redacted (a redacted name is another name)."""
    return redact(text).kinds


def _scrub(text: str, found: set[str]) -> str:
    """``text`` with its secrets replaced; adds the kinds replaced to ``found``."""
    if text in _CLEAN:
        return text
    view, folded = _normalised(text)
    spans = _find(view, found)
    if not spans:
        if len(text) <= _CLEAN_CHARS and len(_CLEAN) < _CLEAN_COUNT:
            _CLEAN.add(text)
        return text
    if folded:
        spans = _map_back(text, spans)
    return _splice(text, [(start, end, f"[REDACTED:{kind}]") for start, end, kind in spans])


def _splice(text: str, replacements: list[tuple[int, int, str]]) -> str:
    """``text`` with each of the sorted, disjoint (start, end) spans replaced by its string."""
    pieces, last = [], 0
    for start, end, new in replacements:
        pieces += [text[last:start], new]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _normalised(text: str) -> tuple[str, bool]:
    """The text matching sees, and whether it differs from ``text``."""
    present = set() if text.isascii() else set(_FOLDABLE.findall(text))
    if not present:
        return text, False
    # One C-speed replace per distinct character: CJK text has a thousand fullwidth commas but few
    # distinct foldable characters. (NFKC output is stable: nothing folds twice.)
    for char in present:
        text = text.replace(char, FOLD.get(char, char))
    return text, True


def _map_back(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans of the normalised text as spans of ``text``, covering every original character they came from."""
    origin: list[int] = []
    last = 0
    for m in _FOLDABLE.finditer(text):
        origin += range(last, m.start())
        origin += [m.start()] * len(FOLD.get(m.group(), m.group()))
        last = m.end()
    origin += range(last, len(text))
    return [(origin[start], origin[end - 1] + 1, kind) for start, end, kind in spans]


# Each rule's hints, one (hint, rule's index) each; "" (always there) for a rule without hints.
_HINTS = tuple((hint, i) for i, rule in enumerate(RULES) for hint in rule.hints or ("",))


def _find(view: str, found: set[str]) -> list[tuple[int, int, str]]:
    """Sorted, disjoint (start, end, kind) spans. Rules run in order, each match blanked with ``FILLER``
    before the next looks, so none matches inside an earlier secret."""
    lowered = view.lower()
    # Markers already there are blanked first so no rule reads one as a secret: redacting twice is a no-op.
    masked = MARKER.sub(lambda m: FILLER * len(m.group()), view) if "[REDACTED:" in view else view
    spans: list[tuple[int, int, str]] = []
    for i in sorted({i for hint, i in _HINTS if hint in lowered}):  # the rules whose hint is there, in order
        masked = _apply(RULES[i], masked, spans)
    found.update(kind for _, _, kind in spans)
    return _disjoint(spans)


def _apply(rule: Rule, masked: str, spans: list[tuple[int, int, str]]) -> str:
    """``masked`` with what ``rule`` finds blanked; adds the spans found to ``spans``."""
    matches = list(rule.pattern.finditer(_lower(masked) if rule.lowered else masked))
    if not matches:  # most rules find nothing: skip the copies below
        return masked
    partial = "secret" in rule.pattern.groupindex
    found = []
    for m in matches:
        # A "secret" group that took no part (another branch matched) means the whole match.
        span = rule.validator(m) if rule.validator else m.span("secret" if partial and m["secret"] else 0)
        if span is not None and span[0] < span[1]:
            found.append(span)
    spans += [(start, end, rule.kind) for start, end in found]
    return _splice(masked, [(start, end, FILLER * (end - start)) for start, end in found])


def _lower(text: str) -> str:
    """Lower-cased char for char so positions hold (ones whose lower case is longer, as U+0130, stay)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _disjoint(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlaps (a URL password holding a key) merged into one span, named after the longer."""
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            longer = kind if end - start > last_end - last_start else last_kind
            merged[-1] = (last_start, max(end, last_end), longer)
        else:
            merged.append((start, end, kind))
    return merged


def redact_many(texts: Iterable[str | None]) -> tuple[list[str | None], tuple[str, ...]]:
    """Redact several fields at once; None stays None; kinds is the sorted union."""
    found: set[str] = set()
    return [None if text is None else _scrub(text, found) for text in texts], tuple(sorted(found))


def redact_json(value: Any) -> tuple[Any, tuple[str, ...]]:
    """Redact every string in a JSON value, keys included (callers bound depth: this recurses). Keys that
    redact alike get a ``#2``, ``#3`` ... suffix, so no value is lost; kinds is the sorted union."""
    found: set[str] = set()
    return _redact_json(value, found), tuple(sorted(found))


def _redact_json(value: Any, found: set[str]) -> Any:
    if isinstance(value, str):
        return _scrub(value, found)
    if isinstance(value, list | tuple):
        return [_redact_json(item, found) for item in value]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str):
                key = _redact_json(key, found)
                base, n = key, 1
                while key in out:
                    n += 1
                    key = f"{base}#{n}"
            out[key] = _redact_json(item, found)
        return out
    return value


def lower_outside_markers(text: str) -> str:
    """Lower-case ``text`` but leave each ``[REDACTED:kind]`` as it is (tags are lower case)."""
    return "".join(part if i % 2 else part.lower() for i, part in enumerate(MARKER.split(text)))


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` without halving a marker (longer than its secret, it can outgrow a field)."""
    if len(text) <= limit:
        return text
    cut = limit
    for m in MARKER.finditer(text, 0, limit + 30):
        if m.start() < limit < m.end():
            cut = m.start()
    # Nor a character from its combining marks: lower-casing can make two of one ("İ" is "i̇").
    while 0 < cut < len(text) and unicodedata.combining(text[cut]):
        cut -= 1
    return text[:cut].rstrip()
