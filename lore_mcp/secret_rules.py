"""The shapes of secret ``lore_mcp.redaction`` removes, one rule per shape: what ``detect-secrets``' default
plugins catch (patterns are Lore's own; ``test_shapes.py`` checks it finds nothing left), plus the vendors
memory meets most. Every pattern starts on a literal or a bounded run with no nested ambiguous repetition,
so 1 MB scans in linear time; a literal first and look-behind for what precedes let the engine skip ahead."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# Stands in for redacted text while later rules look: same length, so positions hold; never in the
# matched text (normalisation removes U+200B); neither space nor word character.
FILLER = "\u200b"

# A key character (base64url); in a look-behind, one before a prefix glues it to a longer identifier.
_KEY = r"[A-Za-z0-9_-]"
# Looks random: a digit, a lower- and an upper-case letter in its first 80 characters. Identifiers and
# words seldom hold all three; most vendors' real keys always do.
_RANDOM = "".join(f"(?={_KEY}{{0,80}}?[{c}])" for c in ("0-9", "a-z", "A-Z"))


def _unglued(*before: str) -> str:
    """A prefix's left boundary: no key character glued in front ("task-force" holds "sk-force"), or
    what follows looks random, since a key pasted against a word ("xsk_live_...") is still a key.
    Prefixes whose keys lack a class (Slack, Hugging Face) or are words ("sk-", "ey") keep the plain one."""
    return "(?:" + "".join(f"(?<!{b})" for b in before) + f"|{_RANDOM})"


# What a value may not start with: text already redacted, or a marker in the input.
_NOT_REDACTED = rf"(?!{FILLER}|\[REDACTED:)"

Span = tuple[int, int]
Validator = Callable[[re.Match[str]], Span | None]


class Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    # Lowercase substrings, one of which every match holds (``test_shapes.py`` checks): a text with none skips
    # the rule's scan, so prose costs almost nothing. A rule with none always runs.
    hints: tuple[str, ...] = ()
    # The span to redact, or None to leave the match; without one, the "secret" group or the match.
    validator: Validator | None = None
    # Lower case, for the lower-cased text: a case-insensitive pattern makes the engine try every position.
    lowered: bool = False


def _rule(
    kind: str, pattern: str, hints: str = "", validator: Validator | None = None, lowered: bool = False
) -> Rule:
    """A rule from its pattern's text and its hints, space-separated."""
    return Rule(kind, re.compile(pattern), tuple(hints.split()), validator, lowered)


# Luhn doubles every second digit from the right, adding the product's digits (5->1, 9->9), in C here.
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
    """The match extended back over its head: ``shortest``-``longest`` ``run`` chars, led by ``first``."""
    text, end = m.string, m.start()
    start = end
    while start > end - longest - 1 and start > 0 and text[start - 1] in run:
        start -= 1
    return (start, m.end()) if shortest <= end - start <= longest and text[start] in first else None


_KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


# An unquoted value spaced from its "=" or ":" ("password: hunter2") is a secret only as one token of 6+
# characters with a digit or symbol: prose ("token: none"), code ("password = os.getenv(...)") and paths
# ("secret: /run/secrets/db") stay. Quoted values and ones tight against the sign are always secrets.
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


# A value follows a secret-named key ("DB_PASSWORD=", '"api_key": ') when "=", ":", ":=" or "=>" comes
# next; "==" and "::" do not count.
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
    """``_assigned_span`` only after a qualifier: "api_key" names a secret, "sort_key" does not."""
    return _assigned_span(m) if _KEY_QUALIFIER.search(m.string, max(0, m.start() - 10), m.start()) else None


def _assignment(name: str, hint: str, validator: Validator = _assigned_span) -> Rule:
    """A rule for the value of keys whose name ends in ``name`` (lower case)."""
    return _rule("secret_assignment", name + _ASSIGNED, hint, validator=validator, lowered=True)


# Names whose value is a secret (detect-secrets' keyword list): any identifier ending in one, a rule a literal.
# "pass", "pw", "pwd" only as a word or after a separator ("bypass" names nothing secret).
_ASSIGNMENTS = (
    _assignment(r"pass(?:word|wd|phrase|(?<![a-z0-9]pass))", "pass"),
    _assignment(r"pw(?<![a-z0-9]pw)d?", "pw"),
    _assignment("secret", "secret"),
    _assignment("token", "token"),
    _assignment("credentials?", "credential"),
    _assignment("contrase(?:ñ|n)a", "contrase"),
    _assignment("key", "key", _qualified_key_span),
    # A command-line flag and its value: "--password hunter2", "--api-key abc123...".
    _rule(
        "secret_assignment",
        r"--(?:[a-z0-9]{1,30}-){0,5}(?:password|passwd|passphrase|pass|pwd|pw|secret|token|credentials?"
        r"|[a-z0-9]{1,30}-?key)(?P<sign>[ \t]+)"
        rf"(?P<bare>(?![-$<{{%]){_NOT_REDACTED}[^\s\"'`]+)",
        "--",
        validator=_assigned_span,
        lowered=True,
    ),
)

# What follows an AWS secret's label, and the Authorization header before its scheme.
_AWS_SECRET = r"[\"']?[ \t]*(?:=>|:=|[:=])[ \t]*[\"']?(?P<secret>[a-z0-9/+]{40})(?![a-z0-9/+])"
_AUTHORIZATION = r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"

RULES: tuple[Rule, ...] = (
    # First: the base64 inside a key can look like other tokens. PEM has five dashes, SSH2 four and a space.
    # The body may not hold four dashes: an unterminated BEGIN scans only to the next ones (not quadratic).
    _rule(
        "private_key",
        r"----(?<!-----)-? ?BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)? ?-{4,5}"
        r"(?:[^-]*(?:-(?!---)[^-]*)*-{4,5} ?END (?P=label)PRIVATE KEY(?: BLOCK)? ?-{4,5}"
        # Truncated paste, no END: take header and base64 lines, each whole or the match stops early.
        r"|(?:\r?\n(?:[A-Za-z-]+:[^\r\n]*|[A-Za-z0-9+/=]*(?![^\r\n])))*)",
        "private",
    ),
    # A PuTTY key file: its header line and every header or base64 line through Private-MAC.
    _rule(
        "private_key",
        r"PuTTY-User-Key-File-[0-9]+:[^\r\n]*"
        r"(?:\r?\n(?!Private-MAC:)(?:[A-Za-z-]+:[^\r\n]*|[A-Za-z0-9+/=]+(?![^\r\n])))*"
        r"(?:\r?\nPrivate-MAC:[^\r\n]*)?",
        "putty-user-key-file-",
    ),
    _rule("lore_api_key", rf"lore_sk_{_unglued(_KEY + 'lore_sk_')}{_KEY}{{20,}}", "lore_sk_"),
    # The team server's OAuth access/refresh tokens and codes (transport.oauth.tokens): prefix + 43 chars.
    _rule("lore_oauth_token", rf"lore_(?:at|rt|ac)_{_unglued(_KEY + 'lore_.._')}{_KEY}{{20,}}", "lore_"),
    _rule("anthropic_key", rf"sk-ant-{_unglued(_KEY + 'sk-ant-')}{_KEY}{{20,}}", "sk-ant-"),
    # A digit is required: hyphenated prose ("sk-learn-compatible-api") stays; real keys have one.
    _rule("openai_key", rf"sk-(?<!{_KEY}sk-)(?=[A-Za-z_-]*[0-9]){_KEY}{{20,}}", "sk-"),
    _rule(
        "stripe_key",
        rf"[rs]k_(?:live|test)_{_unglued('[A-Za-z0-9][rs]k_(?:live|test)_')}[A-Za-z0-9]{{16,}}",
        "k_live_ k_test_",
    ),
    _rule(
        "github_token", rf"gh[pousr]_{_unglued(_KEY + 'gh._')}[A-Za-z0-9_]{{36,}}", "ghp_ gho_ ghu_ ghs_ ghr_"
    ),
    _rule("github_token", rf"github_pat_{_unglued(_KEY + 'github_pat_')}[A-Za-z0-9_]{{20,}}", "github_pat_"),
    _rule(
        "gitlab_token",
        rf"gl{_unglued(_KEY + 'gl')}(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-{_KEY}{{20,}}",
        "glpat- gldt- glft- glsoat- glrt- glcbt- glimt- glptt- glagent- gloas-",
    ),
    _rule("gitlab_token", rf"GR1348941{_unglued(_KEY + 'GR1348941')}{_KEY}{{20,}}", "gr1348941"),
    _rule("google_api_key", rf"AIza{_unglued(_KEY + 'AIza')}{_KEY}{{35}}", "aiza"),
    _rule("huggingface_token", rf"hf_(?<!{_KEY}hf_)[A-Za-z0-9]{{30,}}", "hf_"),
    # Slack tokens have a digit after the dash; "xoxo-hugs" is not a token.
    _rule(
        "slack_token", rf"(?<!{_KEY})(?:xox[abeoprs](?:\.xox[bp])?|xapp)-[0-9][A-Za-z0-9-]{{8,}}", "xox xapp-"
    ),
    # The path of an incoming webhook is its secret; the host stays.
    _rule(
        "slack_webhook",
        r"hooks\.slack\.com/services/(?P<secret>T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+)",
        "hooks.slack.com/services/",
    ),
    # Upper case as issued, or lower case with a digit: a lower-cased key is recovered by upper-casing.
    _rule(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}"
        r"|(?:akia|asia)(?=[a-z]{0,15}[0-9])[a-z0-9]{16})(?![A-Za-z0-9])",
        "akia asia abia acca a3t",
    ),
    # The 40-character secret has no shape of its own: it is known by its label ("SecretAccessKey" ...).
    _rule("aws_secret_key", r"secret_?access_?key" + _AWS_SECRET, "secret", lowered=True),
    _rule(
        "aws_secret_key",
        r"aws[a-z0-9_.-]{0,20}?(?:key|token|pass[a-z0-9_]*|pwd|pw)" + _AWS_SECRET,
        "aws",
        lowered=True,
    ),
    _rule("azure_storage_key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})", "accountkey="),
    _rule("sendgrid_key", rf"SG\.{_unglued(_KEY + 'SG[.]')}{_KEY}{{22}}\.{_KEY}{{43}}", "sg."),
    _rule(
        "square_token", rf"sq0(?:csp|atp)-{_unglued(_KEY + 'sq0csp-', _KEY + 'sq0atp-')}{_KEY}{{22,}}", "sq0"
    ),
    _rule("pypi_token", rf"pypi-AgE{_KEY}{{50,}}", "pypi-age"),
    # npm's own tokens, and whatever an .npmrc gives as a registry's _authToken.
    _rule(
        "npm_token",
        rf"npm_{_unglued(_KEY + 'npm_')}[A-Za-z0-9]{{36,}}|:_authToken=(?P<secret>{_NOT_REDACTED}[^\s\"']+)",
        "npm_ _authtoken=",
    ),
    _rule("mailchimp_key", r"(?<![A-Za-z0-9])[0-9a-z]{32}-us[0-9]{1,2}(?![A-Za-z0-9])", "-us"),
    _rule("artifactory_token", r"AKCp(?<![A-Za-z0-9]AKCp)[A-Za-z0-9]{10,}", "akcp"),
    # No fixed prefix, so found from a literal inside (a scan starting on a class tries every position):
    # Discord's first dot, Telegram's colon; the validator finds where each begins.
    _rule(
        "discord_token",
        rf"\.(?<={_KEY}{{24}}\.){_KEY}{{6}}\.{_KEY}{{27,}}",
        ".",
        validator=lambda m: _run_back(m, _KEY_CHARS, "MNO", 24, 26),
    ),
    _rule(
        "telegram_token",
        rf":(?<=[0-9]{{8}}:){_KEY}{{35}}(?!{_KEY})",
        ":",
        validator=lambda m: _run_back(m, "0123456789", "0123456789", 8, 10),
    ),
    _rule("twilio_key", r"AC(?<![A-Za-z0-9]AC)[a-z0-9]{32}(?![A-Za-z0-9])", "ac"),
    _rule("twilio_key", r"SK(?<![A-Za-z0-9]SK)[a-z0-9]{32}(?![A-Za-z0-9])", "sk"),
    # "eyj" too: a lower-cased token still gives most of its payload away.
    _rule("jwt", rf"ey[Jj](?<!{_KEY}ey[Jj]){_KEY}+\.{_KEY}{{2,}}\.{_KEY}*", "eyj"),
    # The scheme is bounded so a long run of letters cannot go quadratic; a redacted password stays.
    _rule(
        "url_password",
        r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]]*:"
        rf"{_NOT_REDACTED}(?P<secret>[^\s/?#@]+(?:@[^\s/?#@]+)*)(?=@)",
        "://",
    ),
    # After an Authorization header any value is a credential.
    _rule(
        "bearer_token",
        rf"{_AUTHORIZATION}(?i:bearer)[ \t]+{_NOT_REDACTED}(?P<secret>[A-Za-z0-9._~+/-]+=*)",
        "authorization",
    ),
    _rule(
        "basic_auth",
        rf"{_AUTHORIZATION}(?i:basic)[ \t]+{_NOT_REDACTED}(?P<secret>[A-Za-z0-9+/]+=*)",
        "authorization",
    ),
    # A bare "Bearer" is often English, so the value must look like a token: 16+ chars with a digit.
    _rule(
        "bearer_token",
        r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+(?P<secret>(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)",
        "bearer",
    ),
    # Networks lead with 2-6, skipping ms and ns timestamps (leading 1). "+", "-" or "." touching the
    # digits means a phone number, UUID, ID or decimal, not a card.
    _rule(
        "credit_card",
        r"[2-6](?<![\w.+-][2-6])(?:[0-9]{12,18}"
        r"|[0-9]{3}(?P<sep>[ -])[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{1,4}(?:(?P=sep)[0-9]{1,3})?"
        r"|[0-9]{3}(?P<sep2>[ -])[0-9]{6}(?P=sep2)[0-9]{4,5})"
        r"(?!\w|[.-][0-9])",
        "2 3 4 5 6",
        validator=_card_span,
    ),
    # Last: any value given to a secret-named key. Prose ("the password field is required") has no "="
    # or ":" after the name and stays.
    *_ASSIGNMENTS,
)
