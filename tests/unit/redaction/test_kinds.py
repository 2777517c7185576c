"""Secrets are stripped from text before Lore stores or embeds it."""

from __future__ import annotations

import pytest

from lore_mcp.redaction import Redacted, redact, redact_many
from lore_mcp.transport.oauth.tokens import ACCESS_PREFIX, CODE_PREFIX, REFRESH_PREFIX, new_secret
from tests.support.secrets import (
    ANTHROPIC_KEY,
    AWS_ACCESS_KEY,
    AWS_SECRET_KEY,
    GITHUB_CLASSIC_TOKEN,
    GITHUB_FINE_GRAINED_TOKEN,
    JWT,
    LORE_ACCESS_TOKEN,
    LORE_AUTH_CODE,
    LORE_KEY,
    LORE_REFRESH_TOKEN,
    OPAQUE_BEARER,
    OPENAI_CLASSIC_KEY,
    OPENAI_PROJECT_KEY,
    RSA_BODY,
    RSA_PRIVATE_KEY,
    SLACK_BOT_TOKEN,
)


def _assert_redacted(text: str, secret: str, kind: str) -> Redacted:
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert kind in result.kinds
    return result


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"OPENAI_API_KEY={OPENAI_PROJECT_KEY}", OPENAI_PROJECT_KEY, "openai_key"),
        (f'client = OpenAI(api_key="{OPENAI_CLASSIC_KEY}")', OPENAI_CLASSIC_KEY, "openai_key"),
        (f"export ANTHROPIC_API_KEY={ANTHROPIC_KEY}", ANTHROPIC_KEY, "anthropic_key"),
        (f"aws_access_key_id = {AWS_ACCESS_KEY}", AWS_ACCESS_KEY, "aws_access_key"),
        (f"aws_secret_access_key = {AWS_SECRET_KEY}", AWS_SECRET_KEY, "aws_secret_key"),
        (f"git clone https://{GITHUB_CLASSIC_TOKEN}@github.com/o/r", GITHUB_CLASSIC_TOKEN, "github_token"),
        (f"GH_TOKEN={GITHUB_FINE_GRAINED_TOKEN}", GITHUB_FINE_GRAINED_TOKEN, "github_token"),
        (f"SLACK_BOT_TOKEN={SLACK_BOT_TOKEN} # posts to #deploys", SLACK_BOT_TOKEN, "slack_token"),
        (f"the session cookie was {JWT}; it expired", JWT, "jwt"),
        (f"curl -H 'Authorization: Bearer {OPAQUE_BEARER}' https://api", OPAQUE_BEARER, "bearer_token"),
        (f"key file:\n{RSA_PRIVATE_KEY}\nthen run ssh-add", RSA_BODY, "private_key"),
        ("DATABASE_URL=postgresql://user:s3cr3t@host/db", "s3cr3t", "url_password"),
        ("paid with 4111 1111 1111 1111 last week", "4111 1111 1111 1111", "credit_card"),
        ("Stripe test card 4242-4242-4242-4242 works", "4242-4242-4242-4242", "credit_card"),
        (f"LORE_API_KEY={LORE_KEY}", LORE_KEY, "lore_api_key"),
        (f"the connector's token {LORE_ACCESS_TOKEN} expired", LORE_ACCESS_TOKEN, "lore_oauth_token"),
        (f"REFRESH={LORE_REFRESH_TOKEN}", LORE_REFRESH_TOKEN, "lore_oauth_token"),
        (f"GET /callback?code={LORE_AUTH_CODE}&state=x1", LORE_AUTH_CODE, "lore_oauth_token"),
    ],
    ids=[
        "openai-project",
        "openai-classic",
        "anthropic",
        "aws-access",
        "aws-secret",
        "github-classic",
        "github-fine-grained",
        "slack",
        "jwt",
        "bearer",
        "rsa-pem",
        "url-password",
        "visa-spaces",
        "visa-dashes",
        "lore",
        "lore-access-token",
        "lore-refresh-token",
        "lore-auth-code",
    ],
)
def test_each_known_secret_is_replaced_by_its_kind_marker(text: str, secret: str, kind: str) -> None:
    result = _assert_redacted(text, secret, kind)
    assert result.kinds == (kind,)


@pytest.mark.parametrize(
    "text",
    [
        "We used sk-learn for the baseline and the task-force agreed on sk-learn-compatible estimators.",
        "Order number 4111111111111112 fails the Luhn check.",
        "Request id 550e8400-e29b-41d4-a716-446655440000 was retried.",
        "Deployed at 2024-01-15T10:30:00.123456+00:00 and again on 2024-01-16.",
        "Docs live at https://docs.example.com:8443/guide?x=1#top and ssh://git@github.com/o/r.",
        "He was the bearer of bad news, and Bearer tokens are explained later.",
        "Call +1 415-555-0132 or (415) 555-0132; epoch ms 1700000000000.",
        "Slack sign-off: xoxo-hugs-and-kisses-from-everyone",
        "",
    ],
    ids=[
        "prose",
        "luhn-fail",
        "uuid",
        "iso-timestamp",
        "url-no-password",
        "bearer-word",
        "phone",
        "xoxo",
        "empty",
    ],
)
def test_ordinary_text_is_returned_unchanged(text: str) -> None:
    assert redact(text) == Redacted(text=text, kinds=())


def test_lore_keys_are_classified_as_lore_keys_not_openai_keys() -> None:
    result = redact(f"key: {LORE_KEY}")
    assert result == Redacted(text="key: [REDACTED:lore_api_key]", kinds=("lore_api_key",))


@pytest.mark.parametrize("prefix", [ACCESS_PREFIX, REFRESH_PREFIX, CODE_PREFIX])
def test_oauth_credentials_as_the_server_mints_them_are_redacted_as_lore_oauth_tokens(prefix: str) -> None:
    # Minted by the same function the team server uses, so a change to their shape shows here;
    # in a header the token's own kind wins over the generic bearer one.
    token = new_secret(prefix)
    result = redact(f"token {token}\nAuthorization: Bearer {token}")
    assert result == Redacted(
        text="token [REDACTED:lore_oauth_token]\nAuthorization: Bearer [REDACTED:lore_oauth_token]",
        kinds=("lore_oauth_token",),
    )


def test_bearer_header_keeps_the_word_bearer() -> None:
    text = f"Authorization: Bearer {OPAQUE_BEARER}\nAccept: */*"
    assert redact(text).text == "Authorization: Bearer [REDACTED:bearer_token]\nAccept: */*"


def test_bare_bearer_followed_by_a_token_is_redacted() -> None:
    assert redact(f"use Bearer {OPAQUE_BEARER} for now").text == "use Bearer [REDACTED:bearer_token] for now"


def test_jwt_inside_a_bearer_header_is_removed() -> None:
    result = redact(f"Authorization: Bearer {JWT}")
    assert JWT not in result.text
    assert "eyJ" not in result.text
    assert result.text.startswith("Authorization: Bearer [REDACTED:")


def test_url_password_keeps_scheme_user_and_host() -> None:
    result = redact("connect to postgres://bob:hunter2@db:5432/x then migrate")
    assert result.text == "connect to postgres://bob:[REDACTED:url_password]@db:5432/x then migrate"


def test_url_password_containing_at_sign_is_fully_removed() -> None:
    result = redact("redis://:p@ss@cache:6379/0")
    assert result.text == "redis://:[REDACTED:url_password]@cache:6379/0"


@pytest.mark.parametrize("label", ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "])
def test_pem_private_key_blocks_are_removed_whole(label: str) -> None:
    block = f"-----BEGIN {label}PRIVATE KEY-----\n{RSA_BODY}-----END {label}PRIVATE KEY-----"
    result = redact(f"before\n{block}\nafter")
    assert result.text == "before\n[REDACTED:private_key]\nafter"


def test_truncated_pem_private_key_is_removed_through_its_base64_lines() -> None:
    text = "oops:\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\n" + RSA_BODY + "(cut off here)"
    result = redact(text)
    assert "MIIE" not in result.text
    assert "Proc-Type" not in result.text
    assert result.text.startswith("oops:\n[REDACTED:private_key]")
    assert "(cut off here)" in result.text


def test_many_unterminated_pem_headers_are_all_redacted() -> None:
    text = "-----BEGIN PRIVATE KEY-----\nQUJD\n" * 30_000
    result = redact(text)
    assert "BEGIN" not in result.text
    assert result.kinds == ("private_key",)


def test_card_followed_by_a_cvv_still_has_the_card_removed() -> None:
    result = redact("card 4111 1111 1111 1111 123")
    assert result.text == "card [REDACTED:credit_card] 123"


def test_amex_grouping_is_recognised() -> None:
    assert redact("amex 3782 822463 10005").text == "amex [REDACTED:credit_card]"


def test_multiple_secrets_report_sorted_kinds() -> None:
    text = f"{SLACK_BOT_TOKEN} and {AWS_ACCESS_KEY} and postgresql://user:s3cr3t@host/db and {LORE_KEY}"
    result = redact(text)
    assert result.kinds == ("aws_access_key", "lore_api_key", "slack_token", "url_password")
    for secret in (SLACK_BOT_TOKEN, AWS_ACCESS_KEY, "s3cr3t", LORE_KEY):
        assert secret not in result.text


def test_same_kind_twice_is_reported_once() -> None:
    result = redact(f"{LORE_KEY} {LORE_KEY}")
    assert result.text == "[REDACTED:lore_api_key] [REDACTED:lore_api_key]"
    assert result.kinds == ("lore_api_key",)


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact(f"Authorization: Bearer {JWT} postgres://bob:{OPENAI_CLASSIC_KEY}@db/x")
    assert redact(once.text).text == once.text


def test_redact_many_keeps_none_and_unions_kinds() -> None:
    texts, kinds = redact_many([f"title {LORE_KEY}", None, "plain", f"AWS {AWS_ACCESS_KEY}"])
    assert texts == ["title [REDACTED:lore_api_key]", None, "plain", "AWS [REDACTED:aws_access_key]"]
    assert kinds == ("aws_access_key", "lore_api_key")


def test_redact_many_of_nothing_is_empty() -> None:
    assert redact_many([]) == ([], ())


def test_redacted_result_is_immutable() -> None:
    result = redact("plain")
    with pytest.raises(AttributeError):
        result.text = "changed"  # type: ignore[misc]


def test_one_megabyte_of_prose_is_returned_unchanged() -> None:
    paragraph = (
        "On 2024-03-01 the team met to review the deploy. Bob said the bearer of the pager "
        "should own sk-learn upgrades; call 555-0132 with questions about ticket 12345. "
    )
    text = paragraph * (1_000_000 // len(paragraph) + 1)
    assert len(text) >= 1_000_000
    assert redact(text) == Redacted(text=text, kinds=())


def test_secret_at_the_end_of_a_megabyte_is_still_found() -> None:
    text = "lorem ipsum dolor sit amet " * 40_000 + LORE_KEY
    result = redact(text)
    assert result.text.endswith("[REDACTED:lore_api_key]")
    assert result.kinds == ("lore_api_key",)
