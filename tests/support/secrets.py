"""Generated secrets of every shape Lore redacts, for the redaction and fuzz tests.

Each kind has a Hypothesis strategy that makes fresh values in the vendor's real format
(random bodies, so a test is never about one memorised sample), and ``disguised`` hides
a secret the ways issue 21 lists: an invisible character inside it, or fullwidth letters.
Prefixes are split from bodies so repository secret scanners do not flag this file.
"""

from __future__ import annotations

import base64
import json
import string
import unicodedata

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from lore_mcp import redaction

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
KEY = ALNUM + "_-"
BASE64 = ALNUM + "+/"
HEX = "0123456789abcdef"
# Characters that hide inside a secret without showing (what Lore strips before matching): every
# default-ignorable code point and format character (test_shapes checks the table whole).
INVISIBLE = tuple(sorted(redaction.INVISIBLE))


# --- fixed samples -----------------------------------------------------------------------------

# Fake values in real formats, one per kind the first redaction tests named.
OPENAI_PROJECT_KEY = (
    "sk-" + "proj-" + "Xy7Qw3Ertz9LmN2bVc5KpA8sDf4GhJ1kZx6Cv_Bn0MqWeRtYuIoPaSdFgHjKlZx"
    "T3BlbkFJ" + "q2Wm9Zx8Cv7Bn6Lk5Jh4Gf3Ds2Aa1Qw-E4rT5yU6iO7pL8kJ9hG0fD1sA2zX3cV4bN5mM"
)
OPENAI_CLASSIC_KEY = "sk-" + "aB3dE5fG7hJ9kL1mN2pQ" + "T3BlbkFJ" + "r4StU6vW8xY0zA2bC4dE"
ANTHROPIC_KEY = (
    "sk-" + "ant-api03-" + "Rk9wZ3Jp_dHlVbm5pY2Fk-ZWZha2VrZXlmb3J0ZXN0aW5nb25seWRvbm90dXNlaXRhbnl3aGVyZQ"
    "Xq8Zp2Lm4Nv6Bc1" + "AA"
)
AWS_ACCESS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_CLASSIC_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
# The samples several suites plant (redaction through the tools, secret names, the property tests).
AWS_KEY_ID = "AKIA" + "2KGAFRFW0H9NYWT1"
GITHUB_TOKEN = "ghp_" + "Zx9Kq2Lm4Nv6Bc8Dw1Ef3Gh5Jk7Mn0Pq2Rs4Tv"
# The shapes issue 21 found missed.
GOOGLE_KEY = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
STRIPE_KEY = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GITHUB_FINE_GRAINED_TOKEN = (
    "github_pat_"
    + "11AAAAAAA0xYzAbCdEfGhIj_"
    + "Kl9Mn8Op7Qr6St5Uv4Wx3Yz2Ab1Cd0Ef9Gh8Ij7Kl6Mn5Op4Qr3St2Uv1Wx0Yz9Ab8"
)
SLACK_BOT_TOKEN = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
OPAQUE_BEARER = "ya29.a0AfH6SMBx3Jq7Lm9Np2Qr5St8Uv1Wx4Yz"
LORE_KEY = "lore_sk_" + "4f9Qx2Lm8Nz7Rt3Vb6Wc1Yd5Ke0Hj9Ga"
# The team server's OAuth credentials: an access token, a refresh token, an authorization code.
LORE_ACCESS_TOKEN = "lore_at_" + "Xq3-kP9vR2mZ7tL0wN5bC8yH1jF4dG6sA_eU2oI9rT4"
LORE_REFRESH_TOKEN = "lore_rt_" + "_b7Kd2Qm9Zx4Lp1Wv6Nc3Rt8Yh0Jf5Gs2Ae7Uo4Ik9Ml"
LORE_AUTH_CODE = "lore_ac_" + "-9Hs4Td1Qw8Ez3Rx6Cv0Bn5Mk2Lj7Pg4Fa9Yu1Io6Ke2"
RSA_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo\n"
)
RSA_PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\n" + RSA_BODY + "-----END RSA PRIVATE KEY-----"


# --- generated secrets ---------------------------------------------------------------------------


def _run(alphabet: str, size: int, max_size: int | None = None) -> SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size if max_size is None else max_size)


def _with_digit(alphabet: str, size: int) -> SearchStrategy[str]:
    """``size`` characters of ``alphabet`` with at least one digit (as real keys have)."""
    return st.tuples(_run(alphabet, size - 1), st.sampled_from(string.digits), st.integers(0, size - 1)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]
    )


def _b64url(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _jwt() -> SearchStrategy[str]:
    claims = st.fixed_dictionaries({"sub": _run(ALNUM, 4, 12), "iat": st.integers(0, 2**31)})
    return st.builds(
        lambda alg, payload, sig: f"{_b64url({'alg': alg, 'typ': 'JWT'})}.{_b64url(payload)}.{sig}",
        st.sampled_from(["HS256", "RS256", "ES256"]),
        claims,
        _run(KEY, 43),
    )


def _pem() -> SearchStrategy[str]:
    def block(label: str, lines: list[str]) -> str:
        tail = " BLOCK" if label == "PGP " else ""
        body = "\n".join(lines)
        return f"-----BEGIN {label}PRIVATE KEY{tail}-----\n{body}\n-----END {label}PRIVATE KEY{tail}-----"

    labels = st.sampled_from(["", "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", "PGP "])
    return st.builds(block, labels, st.lists(_run(BASE64, 64), min_size=1, max_size=4))


def _ssh2() -> SearchStrategy[str]:
    return st.builds(
        lambda body: (
            "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n"
            f'Comment: "rsa-key"\n{body}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----'
        ),
        _run(BASE64, 64),
    )


def _putty() -> SearchStrategy[str]:
    return st.builds(
        lambda public, private, mac: (
            "PuTTY-User-Key-File-" + "2: ssh-rsa\nEncryption: none\n"
            f"Comment: rsa-key\nPublic-Lines: 1\n{public}\nPrivate-Lines: 1\n{private}\nPrivate-MAC: {mac}"
        ),
        _run(BASE64, 64),
        _run(BASE64, 64),
        _run(HEX, 40),
    )


# Names whose value is a secret, as configs, env files, JSON and headers write them.
SECRET_NAMES = (
    "PASSWORD",
    "db_password",
    "PGPASSWORD",
    "passwd",
    "MYSQL_PWD",
    "smtp_pass",
    "api_key",
    "apiKey",
    "X-Api-Key",
    "client_secret",
    "clientSecret",
    "AUTH_TOKEN",
    "access_token",
    "secret",
    "secret_key",
    "private_key",
    "credentials",
    "contraseña",
    "cloudant_password",
    "ibm_cloud_iam_api_key",
)
# How a value is written after such a name; {n} is the name and {v} the value.
ASSIGNMENT_FORMS = (
    "{n}={v}",
    "export {n}={v}",
    '{n}="{v}"',
    "{n} = '{v}'",
    '"{n}": "{v}"',
    "'{n}': '{v}'",
    "{n}: {v}",
    '{n}: "{v}"',
    "{n} := {v}",
    "{n} => '{v}'",
    "?user=bob&{n}={v}&x=1",
)


def _assignment() -> SearchStrategy[tuple[str, str]]:
    """A secret-named key given a value, and the value (the part that must go)."""
    value = st.tuples(_with_digit(ALNUM, 12), _run("!@#$%^*+/=~_-", 0, 3)).map("".join)
    plain = st.builds(
        lambda form, name, v: (form.format(n=name, v=v), v),
        st.sampled_from(ASSIGNMENT_FORMS),
        st.sampled_from(SECRET_NAMES),
        value,
    )
    flag = st.builds(
        lambda name, v: (f"--{name} {v}", v),
        st.sampled_from(["password", "api-key", "token", "db-secret"]),
        value,
    )
    return st.one_of(plain, flag)


def _whole(strategy: SearchStrategy[str]) -> SearchStrategy[tuple[str, str]]:
    return strategy.map(lambda secret: (secret, secret))


def _value(pattern: str, strategy: SearchStrategy[str]) -> SearchStrategy[tuple[str, str]]:
    """A secret written as ``pattern`` around its value, where only the value is secret."""
    return strategy.map(lambda value: (pattern.format(value), value))


def _pem_needle(block: str) -> str:
    """What must not survive of a key block: a line of its body (the header says nothing)."""
    lines = [line for line in block.splitlines() if line and ":" not in line and "-" not in line]
    return max(lines, key=len)


# kind -> (secret as written, the part of it that must not survive redaction).
KINDS: dict[str, SearchStrategy[tuple[str, str]]] = {
    "lore_api_key": _whole(_run(KEY, 32).map(lambda b: "lore_sk_" + b)),
    "lore_oauth_token": _whole(
        st.builds(lambda p, b: p + b, st.sampled_from(["lore_at_", "lore_rt_", "lore_ac_"]), _run(KEY, 43))
    ),
    "anthropic_key": _whole(_run(KEY, 90).map(lambda b: "sk-" + "ant-api03-" + b)),
    "openai_key": _whole(
        st.one_of(
            st.builds(lambda a, b: "sk-" + "proj-" + a + "T3BlbkFJ" + b, _run(ALNUM, 40), _run(ALNUM, 20)),
            st.builds(lambda a, b: "sk-" + a + "T3BlbkFJ" + b, _run(ALNUM, 20), _run(ALNUM, 20)),
            _with_digit(ALNUM, 48).map(lambda b: "sk-" + b),
        )
    ),
    "stripe_key": _whole(
        st.builds(
            lambda p, b: p + b,
            st.sampled_from(["sk_" + "live_", "rk_" + "live_", "sk_" + "test_"]),
            _run(ALNUM, 24, 99),
        )
    ),
    "github_token": _whole(
        st.one_of(
            st.builds(
                lambda p, b: p + "_" + b,
                st.sampled_from(["ghp", "gho", "ghu", "ghs", "ghr"]),
                _run(ALNUM, 36),
            ),
            _run(ALNUM + "_", 82).map(lambda b: "github_" + "pat_" + b),
        )
    ),
    "gitlab_token": _whole(
        st.builds(
            lambda p, b: p + b,
            st.sampled_from(["glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "gloas-", "GR1348941"]),
            _run(KEY, 20, 50),
        )
    ),
    "google_api_key": _whole(_run(KEY, 35).map(lambda b: "AIza" + b)),
    "huggingface_token": _whole(_run(string.ascii_letters, 34).map(lambda b: "hf_" + b)),
    "slack_token": _whole(
        st.builds(
            lambda p, a, b, c: f"{p}-{a}-{b}-{c}",
            st.sampled_from(["xoxb", "xoxp", "xoxa", "xoxo", "xoxs", "xoxr"]),
            _run(string.digits, 10, 13),
            _run(string.digits, 10, 13),
            _run(LOWER_ALNUM, 24),
        )
    ),
    "slack_webhook": _value(
        "https://hooks.slack.com/services/{}",
        st.builds(
            lambda t, b, s: f"T{t}/B{b}/{s}", _run(UPPER_ALNUM, 8), _run(UPPER_ALNUM, 8), _run(ALNUM, 24)
        ),
    ),
    "aws_access_key": _whole(
        st.builds(
            lambda p, b: p + b,
            st.sampled_from(["AKIA", "ASIA", "ABIA", "ACCA", "A3T7"]),
            _run(UPPER_ALNUM, 16),
        )
    ),
    "aws_secret_key": st.builds(
        lambda label, b: (f"{label} = {b}", b),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "SecretAccessKey", "aws_key"]),
        _with_digit(ALNUM + "/+", 40),
    ),
    "azure_storage_key": _value(
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={}==;EndpointSuffix=core",
        _run(BASE64, 86),
    ),
    "sendgrid_key": _whole(st.builds(lambda a, b: f"SG.{a}.{b}", _run(KEY, 22), _run(KEY, 43))),
    "square_token": _whole(
        st.builds(lambda p, b: p + b, st.sampled_from(["sq0csp-", "sq0atp-"]), _run(KEY, 43))
    ),
    "pypi_token": _whole(_run(KEY, 70, 120).map(lambda b: "pypi-" + "AgEIcHlwaS5vcmc" + b)),
    "npm_token": st.one_of(
        _whole(_run(ALNUM, 36).map(lambda b: "npm_" + b)),
        _value("//registry.npmjs.org/:_authToken={}", _run(HEX + "-", 36)),
    ),
    "mailchimp_key": _whole(st.builds(lambda a, n: f"{a}-us{n}", _run(HEX, 32), st.integers(1, 99))),
    "artifactory_token": _whole(_run(ALNUM, 69).map(lambda b: "AKCp" + b)),
    "discord_token": _whole(
        st.builds(
            lambda f, a, b, c: f"{f}{a}.{b}.{c}",
            st.sampled_from("MNO"),
            _run(KEY, 23, 25),
            _run(KEY, 6),
            _run(KEY, 27, 38),
        )
    ),
    "telegram_token": _whole(
        st.builds(lambda d, b: f"{d}:{b}", st.integers(10_000_000, 9_999_999_999).map(str), _run(KEY, 35))
    ),
    "twilio_key": _whole(st.builds(lambda p, b: p + b, st.sampled_from(["AC", "SK"]), _run(LOWER_ALNUM, 32))),
    "jwt": _whole(_jwt()),
    "private_key": st.one_of(_pem(), _ssh2(), _putty()).map(lambda block: (block, _pem_needle(block))),
    "url_password": st.builds(
        lambda scheme, user, password: (f"{scheme}://{user}:{password}@db.example.com:5432/app", password),
        st.sampled_from(["postgres", "mysql", "redis", "https", "amqp"]),
        _run(string.ascii_lowercase, 1, 10),
        _with_digit(ALNUM, 12),
    ),
    "bearer_token": _value("Authorization: Bearer {}", _with_digit(ALNUM + "._-", 32)),
    "basic_auth": _value(
        "Authorization: Basic {}",
        st.binary(min_size=8, max_size=40).map(lambda b: base64.b64encode(b).decode()),
    ),
    "credit_card": _whole(
        st.sampled_from(
            [
                "4111 1111 1111 1111",
                "4242-4242-4242-4242",
                "5555555555554444",
                "3782 822463 10005",
                "6011111111111117",
            ]
        )
    ),
    "secret_assignment": _assignment(),
}


def secrets() -> SearchStrategy[tuple[str, str, str]]:
    """(kind, secret, needle) for every kind Lore redacts; the needle must not survive."""
    return st.sampled_from(sorted(KINDS)).flatmap(lambda kind: KINDS[kind].map(lambda pair: (kind, *pair)))


def fullwidth(text: str) -> str:
    """ASCII letters, digits and signs as their fullwidth forms (U+FF01..U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def disguised(secret: str) -> SearchStrategy[str]:
    """``secret`` with invisible characters inside it, or some or all of it fullwidth."""
    inside = st.tuples(st.integers(1, max(1, len(secret) - 1)), st.sampled_from(INVISIBLE)).map(
        lambda t: secret[: t[0]] + t[1] + secret[t[0] :]
    )
    return st.one_of(
        inside,
        st.just(fullwidth(secret)),
        st.integers(1, len(secret)).map(lambda n: fullwidth(secret[:n]) + secret[n:]),
    )


def seen(text: str) -> str:
    """``text`` as redaction's matching reads it: NFKC, invisible characters removed."""
    return unicodedata.normalize("NFKC", "".join(c for c in text if c not in INVISIBLE))


# What prose around a secret is made of: words no pattern or scanner reads as a secret.
WORDS = (
    "the",
    "deploy",
    "failed",
    "because",
    "config",
    "held",
    "rotate",
    "it",
    "now",
    "see",
    "log",
    "line",
    "retry",
    "worked",
    "after",
    "restart",
    "ok",
    "Déjà",
    "vu",
    "部署",
    "失败",
    "😀",
)
# What may sit between prose and a secret: anything that ends a token.
SEPARATORS = (" ", "\n", "\t", " (", ") ", ", ", "; ", ' "', '" ', " '", "' ", " <", "> ", "\n\n")


def prose(max_words: int = 6) -> SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), max_size=max_words).map(" ".join)


def embedded() -> SearchStrategy[tuple[str, str, str]]:
    """(kind, needle, text) where text holds a secret amid prose."""
    return st.builds(
        lambda ks, before, left, right, after: (ks[0], ks[2], before + left + ks[1] + right + after),
        secrets(),
        prose(),
        st.sampled_from(SEPARATORS),
        st.sampled_from(SEPARATORS),
        prose(),
    )
