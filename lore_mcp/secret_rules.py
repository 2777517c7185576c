"""The shapes of secret that ``lore_mcp.redaction`` removes, one rule per shape, apart from the
engine so that each stays readable: what ``detect-secrets``' default plugins catch (the patterns
are Lore's own; ``tests/unit/redaction/test_shapes.py`` checks it finds nothing left), plus the
vendors an agent's memory meets most.

Every pattern starts on a literal or a bounded run and has no nested ambiguous repetition, so a
1 MB text is scanned in linear time; one that starts with its literal and checks what precedes it
with a look-behind lets the engine skip ahead instead of testing every position.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# Stands in for text already redacted while later rules look: same length, so positions hold;
# never in the text matched (normalisation removes U+200B); neither space nor word character.
FILLER = "\u200b"

# A key character (base64url: most vendors' alphabets); in look-behinds, one just before a
# prefix glues it to a longer identifier ("task-force" holds "sk-force", not a key).
_KEY = r"[A-Za-z0-9_-]"
# A body that looks random: a digit, a lower- and an upper-case letter within its first 80
# characters. Identifiers and words seldom hold all three; real keys of most vendors always do.
_RANDOM = "".join(f"(?={_KEY}{{0,80}}?[{c}])" for c in ("0-9", "a-z", "A-Z"))


def _unglued(*before: str) -> str:
    """A prefix's left boundary: none of the look-behinds ``before`` matches (no key character
    glued in front: "task-force" holds "sk-force"), or what follows looks random, since a key
    pasted against a word ("xsk_live_...") is still a key. Prefixes whose keys lack one of the
    classes (Slack's, Hugging Face's) or that are words themselves ("sk-", "ey") keep the plain
    boundary."""
    return "(?:" + "".join(f"(?<!{b})" for b in before) + f"|{_RANDOM})"


# What a value may not start with: text already redacted, or a marker in the input.
_NOT_REDACTED = rf"(?!{FILLER}|\[REDACTED:)"

Span = tuple[int, int]


class Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    # Lowercase substrings, one of which any match contains: checked with `in` first, they skip
    # most scans, so plain prose costs almost nothing. A rule with none always runs.
    hints: tuple[str, ...] = ()
    # The span to redact, or None to leave the match; without one, the "secret" group or the match.
    validator: Callable[[re.Match[str]], Span | None] | None = None
    # Written in lower case for the lower-cased text, so it can start with its literal (a
    # case-insensitive pattern makes the engine try every position).
    lowered: bool = False


# --- validators -------------------------------------------------------------------------------

# Luhn doubles every second digit from the right and adds the product's digits (5->1, 9->9).
# Translating and summing bytes keeps it in C: a 1 MB text can hold thousands of card-shaped runs.
_DOUBLED = str.maketrans("0123456789", "0246813579")


def _luhn(digits: str) -> bool:
    checked = digits[-1::-2] + digits[-2::-2].translate(_DOUBLED)
    return (sum(checked.encode("ascii")) - ord("0") * len(checked)) % 10 == 0


def _card_span(m: re.Match[str]) -> Span | None:
    """The part of a card-shaped match that passes Luhn, or None to keep it all."""
    groups = m.group(0).replace("-", " ").split(" ")
    if _luhn("".join(groups)):
        return m.span()
    # "4111 1111 1111 1111 123" is a card then a CVV: try the first four groups.
    if len(groups) == 5 and _luhn("".join(groups[:4])):
        return m.start(), m.end() - len(groups[4]) - 1
    return None


def _run_back(m: re.Match[str], run: str, first: str, shortest: int, longest: int) -> Span | None:
    """The match extended back over the run of ``run`` characters before it (a token's
    head), when that run is ``shortest`` to ``longest`` long and starts with one of ``first``."""
    text, end = m.string, m.start()
    start = end
    while start > end - longest - 1 and start > 0 and text[start - 1] in run:
        start -= 1
    if not shortest <= end - start <= longest or text[start] not in first:
        return None
    return start, m.end()


_KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


# An unquoted value written with spaces around its "=" or ":" ("password: hunter2") is
# only taken for a secret when it is one token of 6+ characters holding a digit or a
# symbol: prose ("secret: the trick is...", "token: none"), code ("password =
# os.getenv(...)", "process.env.SECRET") and paths ("secret: /run/secrets/db") stay.
# Quoted values and values written tight against the sign ("PASSWORD=...", "--token=...",
# "?password=...") are always secrets.
_TOKEN = re.compile(r"[\w.~+/=!@#$%^*-]+")
_STRONG = re.compile(r"[0-9!@#$%^*+/=~]")
_TRAILING = ".,:;)]}>"


def _assigned_span(m: re.Match[str]) -> Span | None:
    """The value of a secret-named key, or None when it is empty, a placeholder or prose."""
    groups = m.groupdict()
    if groups.get("quoted") is not None:
        return m.span("quoted") if any(c.isalnum() for c in groups["quoted"]) else None
    start = m.start("bare")
    value = m.group("bare").rstrip(_TRAILING)
    if not any(c.isalnum() for c in value):
        return None
    tight = (
        m.group("sign") in ("=", ":")
        and not groups.get("close")
        and m.start("sign") == m.end("close")
        and m.end("sign") == start
    )
    if not tight and (
        len(value) < 6 or value[0] in "/~." or not _TOKEN.fullmatch(value) or not _STRONG.search(value)
    ):
        return None
    return start, start + len(value)


# --- the rules --------------------------------------------------------------------------------

# A value follows a secret-named key ("DB_PASSWORD=", '"api_key": ', "token :=") when the
# name ends there and an "=", ":", ":=" or "=>" comes next; "==" and "::" do not count.
_ASSIGNED = (
    r"(?![a-z0-9_])(?P<close>[\"'\]]{0,2})[ \t]*(?P<sign>=>|:=|=(?!=)|:(?![:/]))[ \t]*"
    rf"(?:(?P<q>[\"'`])(?P<quoted>{_NOT_REDACTED}(?![$<{{%])[^\r\n]*?)(?P=q)"
    rf"|(?P<open>[\"'`]?)(?P<bare>{_NOT_REDACTED}(?![$<{{%])[^\s\"'`,;&]+))"
)
# What comes before "key" in a secret-named key: "api_key", "clientKey", "X-Api-Key".
_KEY_QUALIFIER = re.compile(
    r"(?:api|auth|access|secret|private|priv|client|service|account|db|database|encryption"
    r"|signing|master|session|app)[_-]?\Z"
)


def _qualified_key_span(m: re.Match[str]) -> Span | None:
    """As ``_assigned_span``, for a name ending in "key" only when a qualifier comes before
    it: "api_key" names a secret, "primary key" or "sort_key" does not."""
    if not _KEY_QUALIFIER.search(m.string, max(0, m.start() - 10), m.start()):
        return None
    return _assigned_span(m)


def _assignment(
    name: str, hint: str, validator: Callable[[re.Match[str]], Span | None] = _assigned_span
) -> Rule:
    """A rule for the value of keys whose name ends in ``name`` (lower case)."""
    return Rule("secret_assignment", re.compile(name + _ASSIGNED), (hint,), validator, lowered=True)


# Names whose value is a secret, after detect-secrets' keyword list: any identifier ending
# in one of these ("DB_PASSWORD", "clientSecret", "X-Api-Key", "aws_session_token"). One
# rule per literal, so each scan can skip ahead to it. "pass", "pw" and "pwd" only as a
# whole word or after a separator ("bypass" names nothing secret).
_ASSIGNMENTS = (
    _assignment(r"pass(?:word|wd|phrase|(?<![a-z0-9]pass))", "pass"),
    _assignment(r"pw(?<![a-z0-9]pw)d?", "pw"),
    _assignment("secret", "secret"),
    _assignment("token", "token"),
    _assignment("credentials?", "credential"),
    _assignment("contrase(?:ñ|n)a", "contrase"),
    _assignment("key", "key", _qualified_key_span),
    Rule(
        # A command-line flag and its value: "--password hunter2", "--api-key abc123...".
        "secret_assignment",
        re.compile(
            r"--(?:[a-z0-9]{1,30}-){0,5}(?:password|passwd|passphrase|pass|pwd|pw|secret|token|credentials?"
            r"|[a-z0-9]{1,30}-?key)(?P<sign>[ \t]+)"
            rf"(?P<bare>(?![-$<{{%]){_NOT_REDACTED}[^\s\"'`]+)"
        ),
        ("--",),
        _assigned_span,
        lowered=True,
    ),
)

RULES: tuple[Rule, ...] = (
    Rule(
        # First, because the base64 inside a key can look like other tokens. PEM has five
        # dashes, SSH2 ("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----") four and a space. The
        # body may not hold four dashes, so an unterminated BEGIN scans only to the next
        # dashes rather than to the end of the text (no quadratic blow-up).
        "private_key",
        re.compile(
            r"----(?<!-----)-? ?BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)? ?-{4,5}"
            r"(?:[^-]*(?:-(?!---)[^-]*)*-{4,5} ?END (?P=label)PRIVATE KEY(?: BLOCK)? ?-{4,5}"
            # Truncated paste with no END line: take header and base64 lines. Each line
            # must be consumed whole, or the match would stop early.
            r"|(?:\r?\n(?:[A-Za-z-]+:[^\r\n]*|[A-Za-z0-9+/=]*(?![^\r\n])))*)"
        ),
    ),
    Rule(
        # A PuTTY key file: its header line and every header or base64 line after it,
        # through its Private-MAC line.
        "private_key",
        re.compile(
            r"PuTTY-User-Key-File-[0-9]+:[^\r\n]*"
            r"(?:\r?\n(?!Private-MAC:)(?:[A-Za-z-]+:[^\r\n]*|[A-Za-z0-9+/=]+(?![^\r\n])))*"
            r"(?:\r?\nPrivate-MAC:[^\r\n]*)?"
        ),
    ),
    Rule("lore_api_key", re.compile(rf"lore_sk_{_unglued(_KEY + 'lore_sk_')}{_KEY}{{20,}}")),
    # What the team server's OAuth issues (lore_mcp.transport.oauth.tokens): access and refresh
    # tokens and authorization codes, each its prefix and 43 base64url characters.
    Rule("lore_oauth_token", re.compile(rf"lore_(?:at|rt|ac)_{_unglued(_KEY + 'lore_.._')}{_KEY}{{20,}}")),
    Rule("anthropic_key", re.compile(rf"sk-ant-{_unglued(_KEY + 'sk-ant-')}{_KEY}{{20,}}")),
    # The digit requirement keeps hyphenated prose ("sk-learn-compatible-api") while real
    # keys (random or hex bodies) essentially always have one.
    Rule("openai_key", re.compile(rf"sk-(?<!{_KEY}sk-)(?=[A-Za-z_-]*[0-9]){_KEY}{{20,}}")),
    Rule(
        "stripe_key",
        re.compile(rf"[rs]k_(?:live|test)_{_unglued('[A-Za-z0-9][rs]k_(?:live|test)_')}[A-Za-z0-9]{{16,}}"),
        ("k_live_", "k_test_"),
    ),
    Rule("github_token", re.compile(rf"gh[pousr]_{_unglued(_KEY + 'gh._')}[A-Za-z0-9_]{{36,}}")),
    Rule("github_token", re.compile(rf"github_pat_{_unglued(_KEY + 'github_pat_')}[A-Za-z0-9_]{{20,}}")),
    Rule(
        "gitlab_token",
        re.compile(rf"gl{_unglued(_KEY + 'gl')}(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-{_KEY}{{20,}}"),
    ),
    Rule("gitlab_token", re.compile(rf"GR1348941{_unglued(_KEY + 'GR1348941')}{_KEY}{{20,}}")),
    Rule("google_api_key", re.compile(rf"AIza{_unglued(_KEY + 'AIza')}{_KEY}{{35}}")),
    Rule("huggingface_token", re.compile(rf"hf_(?<!{_KEY}hf_)[A-Za-z0-9]{{30,}}")),
    Rule(
        # Slack tokens have a digit after the dash; "xoxo-hugs" is not a token.
        "slack_token",
        re.compile(rf"(?<!{_KEY})(?:xox[abeoprs](?:\.xox[bp])?|xapp)-[0-9][A-Za-z0-9-]{{8,}}"),
        ("xox", "xapp-"),
    ),
    Rule(
        # The path of an incoming webhook is its secret; the host stays.
        "slack_webhook",
        re.compile(r"hooks\.slack\.com/services/(?P<secret>T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+)"),
    ),
    Rule(
        # Upper case as AWS issues them, or all lower case with a digit: a key that went
        # through lower-casing somewhere is recovered by upper-casing it again.
        "aws_access_key",
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}"
            r"|(?:akia|asia)(?=[a-z]{0,15}[0-9])[a-z0-9]{16})(?![A-Za-z0-9])"
        ),
        ("akia", "asia", "abia", "acca", "a3t"),
    ),
    # The 40-character secret has no shape of its own: it is known by its label
    # ("aws_secret_access_key", "SecretAccessKey", "AWS_KEY" ...).
    *(
        Rule(
            "aws_secret_key",
            re.compile(
                label + r"[\"']?[ \t]*(?:=>|:=|[:=])[ \t]*[\"']?(?P<secret>[a-z0-9/+]{40})(?![a-z0-9/+])"
            ),
            (hint,),
            lowered=True,
        )
        for label, hint in (
            (r"secret_?access_?key", "secret"),
            (r"aws[a-z0-9_.-]{0,20}?(?:key|token|pass[a-z0-9_]*|pwd|pw)", "aws"),
        )
    ),
    Rule("azure_storage_key", re.compile(r"AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})")),
    Rule("sendgrid_key", re.compile(rf"SG\.{_unglued(_KEY + 'SG[.]')}{_KEY}{{22}}\.{_KEY}{{43}}")),
    Rule(
        "square_token",
        re.compile(rf"sq0(?:csp|atp)-{_unglued(_KEY + 'sq0csp-', _KEY + 'sq0atp-')}{_KEY}{{22,}}"),
    ),
    Rule("pypi_token", re.compile(rf"pypi-AgE{_KEY}{{50,}}")),
    Rule(
        # npm's own tokens, and whatever an .npmrc gives as a registry's _authToken.
        "npm_token",
        re.compile(
            rf"npm_{_unglued(_KEY + 'npm_')}[A-Za-z0-9]{{36,}}|:_authToken=(?P<secret>{_NOT_REDACTED}[^\s\"']+)"
        ),
        ("npm_", "_authtoken="),
    ),
    Rule("mailchimp_key", re.compile(r"(?<![A-Za-z0-9])[0-9a-z]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"), ("-us",)),
    Rule("artifactory_token", re.compile(r"AKCp(?<![A-Za-z0-9]AKCp)[A-Za-z0-9]{10,}")),
    # Three shapes without a fixed prefix, found from a literal inside them (a scan that
    # starts on a character class tries every position): a Discord bot token from its first
    # dot, a Telegram bot token from its colon; the validator finds where each begins.
    Rule(
        "discord_token",
        re.compile(rf"\.(?<={_KEY}{{24}}\.){_KEY}{{6}}\.{_KEY}{{27,}}"),
        validator=lambda m: _run_back(m, _KEY_CHARS, "MNO", 24, 26),
    ),
    Rule(
        "telegram_token",
        re.compile(rf":(?<=[0-9]{{8}}:){_KEY}{{35}}(?!{_KEY})"),
        validator=lambda m: _run_back(m, "0123456789", "0123456789", 8, 10),
    ),
    Rule("twilio_key", re.compile(r"AC(?<![A-Za-z0-9]AC)[a-z0-9]{32}(?![A-Za-z0-9])")),
    Rule("twilio_key", re.compile(r"SK(?<![A-Za-z0-9]SK)[a-z0-9]{32}(?![A-Za-z0-9])")),
    # "eyj" too: a lower-cased token still gives most of its payload away.
    Rule("jwt", re.compile(rf"ey[Jj](?<!{_KEY}ey[Jj]){_KEY}+\.{_KEY}{{2,}}\.{_KEY}*"), ("eyj",)),
    Rule(
        # The scheme is bounded so a long run of letters cannot go quadratic. A password
        # already redacted by a more specific kind is left as is.
        "url_password",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]]*:"
            rf"{_NOT_REDACTED}(?P<secret>[^\s/?#@]+(?:@[^\s/?#@]+)*)(?=@)"
        ),
        ("://",),
    ),
    Rule(
        # After an Authorization header any value is a credential.
        "bearer_token",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:bearer)[ \t]+"
            rf"{_NOT_REDACTED}(?P<secret>[A-Za-z0-9._~+/-]+=*)"
        ),
        ("authorization",),
    ),
    Rule(
        "basic_auth",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
            rf"{_NOT_REDACTED}(?P<secret>[A-Za-z0-9+/]+=*)"
        ),
        ("authorization",),
    ),
    Rule(
        # A bare "Bearer" is often English ("the bearer of bad news"), so the value must
        # look like a token: 16+ token characters with a digit.
        "bearer_token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+"
            r"(?P<secret>(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
        ),
        ("bearer",),
    ),
    Rule(
        # Card networks use leading digits 2-6, which skips millisecond and nanosecond
        # timestamps (leading 1). "+", "-" or "." touching the digits means a phone number,
        # UUID, ID or decimal, not a card.
        "credit_card",
        re.compile(
            r"[2-6](?<![\w.+-][2-6])(?:[0-9]{12,18}"
            r"|[0-9]{3}(?P<sep>[ -])[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{1,4}(?:(?P=sep)[0-9]{1,3})?"
            r"|[0-9]{3}(?P<sep2>[ -])[0-9]{6}(?P=sep2)[0-9]{4,5})"
            r"(?!\w|[.-][0-9])"
        ),
        # Its first digit: a text without one (most prose) skips a scan that starts on a class.
        ("2", "3", "4", "5", "6"),
        validator=_card_span,
    ),
    # Last: a value of any shape given to a secret-named key ("PASSWORD=...", "api_key: ...",
    # '"password": "..."'). Prose such as "the password field is required" has no "=" or
    # ":" after the name and stays.
    *_ASSIGNMENTS,
)
