"""Remove secrets from text before Lore stores or embeds it.

Agents paste logs, configs and shell sessions into memories. Anything saved is
kept forever, shared with a team and sent to an embedding model, so credentials
must be stripped first, on every save. Each secret becomes ``[REDACTED:kind]``,
where ``kind`` is one of these stable strings:

- ``lore_api_key``: Lore's own keys, ``lore_sk_`` + 20 or more key characters.
- ``anthropic_key``: ``sk-ant-...`` (checked before ``openai_key``).
- ``openai_key``: ``sk-...``, ``sk-proj-...`` and other ``sk-`` keys; the body
  must be 20+ characters and contain a digit, so prose like "sk-learn" survives.
- ``github_token``: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36 characters,
  and fine-grained ``github_pat_...`` tokens.
- ``slack_token``: ``xoxb-``, ``xoxp-``, ``xoxa-``, ``xoxr-``, ``xoxs-``,
  ``xoxe-`` and ``xapp-`` tokens.
- ``aws_access_key``: ``AKIA``/``ASIA`` + 16 uppercase letters or digits, or
  the same lower-cased (with a digit), since upper-casing recovers it.
- ``aws_secret_key``: a 40-character secret after an ``aws_secret_access_key``
  or ``SecretAccessKey`` label (the value has no recognisable shape alone).
- ``jwt``: three base64url segments, the first starting ``eyJ`` (or ``eyj``,
  lower-cased).
- ``private_key``: a PEM ``-----BEGIN ... PRIVATE KEY-----`` block through its
  END line (RSA, EC, OPENSSH, ENCRYPTED, PGP ...); a block with no END line is
  redacted through its header and base64 lines.
- ``url_password``: the password in ``scheme://user:password@host``; the
  scheme, user and host are kept.
- ``bearer_token``: the value after ``Authorization: Bearer``, or after a bare
  ``Bearer`` when it looks like a token (16+ characters with a digit). The
  word "Bearer" is kept.
- ``credit_card``: 13-19 digits, bare or in 4-4-4-4 / 4-6-5 groups joined by
  one space or dash, starting 2-6 (the card networks' ranges) and passing the
  Luhn check.

Every pattern is compiled once, anchored on a literal or bounded run, and has no
nested ambiguous repetition, so a 1 MB text is scanned in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["MARKER", "Redacted", "fit", "lower_outside_markers", "redact", "redact_json", "redact_many"]

# What a redacted secret becomes; other code uses it to keep markers whole.
MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")


@dataclass(frozen=True)
class Redacted:
    text: str  # the text with each secret replaced by "[REDACTED:kind]"
    kinds: tuple[str, ...]  # sorted, de-duplicated kinds found (empty if none)


# Luhn doubles every second digit from the right and adds the digits of the
# product: 0->0, 1->2, ... 5->1 (10), 9->9 (18). Translating those digits and
# summing the bytes keeps the check in C; a digit-rich 1 MB text can hold
# tens of thousands of card-shaped runs, so a Python-level loop shows up.
_DOUBLED = str.maketrans("0123456789", "0246813579")


def _luhn(digits: str) -> bool:
    checked = digits[-1::-2] + digits[-2::-2].translate(_DOUBLED)
    return (sum(checked.encode("ascii")) - ord("0") * len(checked)) % 10 == 0


def _card_span(m: re.Match[str]) -> tuple[int, int] | None:
    """The part of a card-shaped match that passes Luhn, or None to keep it all."""
    groups = m.group(0).replace("-", " ").split(" ")
    if _luhn("".join(groups)):
        return m.span()
    # "4111 1111 1111 1111 123" is a card then a CVV: try the first four groups.
    if len(groups) == 5 and _luhn("".join(groups[:4])):
        return m.start(), m.end() - len(groups[4]) - 1
    return None


# A key character: base64url, which covers most vendors' key alphabets. The same
# class is used in look-behinds: a key character just before a prefix glues it
# to a longer identifier ("task-force" contains "sk-force", which is not a key).
_KEY = r"[A-Za-z0-9_-]"


class _Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    # Lowercase substrings, one of which any match must contain. Checking them with
    # `in` first skips most regex scans: a plain-prose save costs almost nothing.
    hints: tuple[str, ...] = ()
    # Returns the span to redact, or None to leave the match alone.
    validator: Callable[[re.Match[str]], tuple[int, int] | None] | None = None


# A pattern with a "secret" group redacts only that group, keeping context such
# as "Bearer " or "postgres://bob:". Order matters: more specific kinds come
# first, and no later pattern matches an earlier "[REDACTED:kind]" marker.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        # First, because the base64 inside a key can look like other tokens. The
        # body may not contain "-----", so an unterminated BEGIN scans only to the
        # next dashes rather than to the end of the text (no quadratic blow-up).
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[^-]*(?:-(?!----)[^-]*)*-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----"
            # Truncated paste with no END line: take header and base64 lines.
            # Each line must be consumed whole, or the match would stop early.
            r"|(?:\r?\n(?:[A-Za-z-]+:[^\r\n]*|[A-Za-z0-9+/=]*(?![^\r\n])))*)"
        ),
        ("private key",),
    ),
    # Literal first, then a look-behind: a pattern that starts with its literal
    # lets the regex engine skip ahead quickly instead of testing every position.
    _Rule("lore_api_key", re.compile(rf"lore_sk_(?<!{_KEY}lore_sk_){_KEY}{{20,}}"), ("lore_sk_",)),
    _Rule("anthropic_key", re.compile(rf"sk-ant-(?<!{_KEY}sk-ant-){_KEY}{{20,}}"), ("sk-ant-",)),
    # The digit requirement keeps hyphenated prose ("sk-learn-compatible-api")
    # while real keys (random or hex bodies) essentially always have one.
    _Rule("openai_key", re.compile(rf"sk-(?<!{_KEY}sk-)(?=[A-Za-z_-]*[0-9]){_KEY}{{20,}}"), ("sk-",)),
    _Rule(
        "github_token",
        re.compile(rf"(?<!{_KEY})(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{20,}})"),
        ("gh",),
    ),
    # Slack tokens have a digit after the dash; "xoxo-hugs" is not a token.
    _Rule(
        "slack_token",
        re.compile(rf"(?<!{_KEY})(?:xox[abeprs](?:\.xox[bp])?|xapp)-[0-9][A-Za-z0-9-]{{8,}}"),
        ("xox", "xapp-"),
    ),
    _Rule(
        # Upper case as AWS issues them, or all lower case with a digit: a key that
        # went through lower-casing somewhere is recovered by upper-casing it again.
        "aws_access_key",
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?:AKIA|ASIA)[A-Z0-9]{16}|(?:akia|asia)(?=[a-z]{0,15}[0-9])[a-z0-9]{16})"
            r"(?![A-Za-z0-9])"
        ),
        ("akia", "asia"),
    ),
    _Rule(
        "aws_secret_key",
        re.compile(
            r"(?i:(?:aws_?)?secret_?access_?key)[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        ("secret",),
    ),
    # "eyj" too: a lower-cased token still gives most of its payload away.
    _Rule("jwt", re.compile(rf"ey[Jj](?<!{_KEY}ey[Jj]){_KEY}+\.{_KEY}{{2,}}\.{_KEY}*"), ("eyj",)),
    _Rule(
        # The scheme is bounded so a long run of letters cannot go quadratic.
        # A password already redacted by a more specific kind is left as is.
        "url_password",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]]*:"
            r"(?!\[REDACTED:)(?P<secret>[^\s/?#@]+(?:@[^\s/?#@]+)*)(?=@)"
        ),
        ("://",),
    ),
    _Rule(
        # After an Authorization header any value is a credential.
        "bearer_token",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:bearer)[ \t]+"
            r"(?P<secret>[A-Za-z0-9._~+/-]+=*)"
        ),
        ("authorization",),
    ),
    _Rule(
        # A bare "Bearer" is often English ("the bearer of bad news"), so the
        # value must look like a token: 16+ token characters with a digit.
        "bearer_token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+"
            r"(?P<secret>(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
        ),
        ("bearer",),
    ),
    _Rule(
        # Card networks use leading digits 2-6, which skips millisecond and
        # nanosecond timestamps (leading 1). "+", "-" or "." touching the digits
        # means a phone number, UUID, ID or decimal, not a card.
        "credit_card",
        re.compile(
            r"[2-6](?<![\w.+-][2-6])(?:[0-9]{12,18}"
            r"|[0-9]{3}(?P<sep>[ -])[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{1,4}(?:(?P=sep)[0-9]{1,3})?"
            r"|[0-9]{3}(?P<sep2>[ -])[0-9]{6}(?P=sep2)[0-9]{4,5})"
            r"(?!\w|[.-][0-9])"
        ),
        validator=_card_span,
    ),
)


def _apply(rule: _Rule, text: str, found: set[str]) -> str:
    marker = f"[REDACTED:{rule.kind}]"
    partial = "secret" in rule.pattern.groupindex

    def replace(m: re.Match[str]) -> str:
        span = rule.validator(m) if rule.validator else m.span("secret" if partial else 0)
        if span is None:
            return m.group(0)
        found.add(rule.kind)
        whole = m.group(0)
        return whole[: span[0] - m.start()] + marker + whole[span[1] - m.start() :]

    return rule.pattern.sub(replace, text)


# Any rule's hint, or the start of a card number: text with neither holds no secret.
# One search in C instead of a Python loop over the rules keeps redacting many
# short strings (every value of a 50,000-row plan) cheap.
# (Every card shape starts with a digit 2-6 and at least seven more digits, in one
# run or after a space or dash following the first four.)
_ANY_HINT = re.compile(
    "|".join(re.escape(h) for rule in _RULES for h in rule.hints) + r"|[2-6][0-9]{3}[ -]?[0-9]{4}"
)


def redact(text: str) -> Redacted:
    """Replace every secret in ``text`` with ``[REDACTED:kind]``."""
    found: set[str] = set()
    text = _scrub(text, found)
    return Redacted(text=text, kinds=tuple(sorted(found)))


def _scrub(text: str, found: set[str]) -> str:
    """``text`` with its secrets replaced; adds the kinds replaced to ``found``."""
    # Hints are looked up once, in the original text: the markers added along the
    # way hold no hint of a later rule, so they cannot create new matches.
    lowered = text.lower()
    if not _ANY_HINT.search(lowered):
        return text
    for rule in _RULES:
        if not rule.hints or any(hint in lowered for hint in rule.hints):
            text = _apply(rule, text, found)
    return text


def redact_many(texts: Iterable[str | None]) -> tuple[list[str | None], tuple[str, ...]]:
    """Redact several fields at once; None stays None; kinds is the sorted union."""
    out: list[str | None] = []
    kinds: set[str] = set()
    for text in texts:
        if text is None:
            out.append(None)
            continue
        result = redact(text)
        out.append(result.text)
        kinds.update(result.kinds)
    return out, tuple(sorted(kinds))


def redact_json(value: Any) -> tuple[Any, tuple[str, ...]]:
    """Redact every string in a JSON value, object keys included; kinds is the sorted union.

    Callers bound the value's depth first (``lessons_service.check_json``): this
    walks it recursively. Two keys of one object that redact to the same text are
    kept apart with a ``#2``, ``#3`` ... suffix, so no value is lost.
    """
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
    pieces, last = [], 0
    for m in MARKER.finditer(text):
        pieces += [text[last : m.start()].lower(), m.group(0)]
        last = m.end()
    pieces.append(text[last:].lower())
    return "".join(pieces)


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters without cutting a marker in two.

    A marker can be longer than the secret it replaced, so redacted text may
    outgrow a field's limit; a marker that would be cut is dropped whole.
    """
    if len(text) <= limit:
        return text
    cut = limit
    for m in MARKER.finditer(text, 0, limit + 30):
        if m.start() < limit < m.end():
            cut = m.start()
    return text[:cut].rstrip()
