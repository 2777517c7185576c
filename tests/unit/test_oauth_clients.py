"""Redirect URI rules and client ID metadata documents (``lore_mcp.transport.oauth.clients``), without a network."""

from __future__ import annotations

import socket

import pytest
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import InvalidRedirectUriError
from pydantic import AnyUrl

from lore_mcp.transport.oauth.clients import (
    DocumentRefused,
    LoreClient,
    MetadataDocuments,
    check_redirect_uris,
    client_from_document,
    is_metadata_url,
    redirect_matches,
)


@pytest.mark.parametrize(
    ("requested", "registered", "matches"),
    [
        ("https://claude.ai/api/mcp/auth_callback", "https://claude.ai/api/mcp/auth_callback", True),
        ("https://claude.ai/api/mcp/auth_callback/", "https://claude.ai/api/mcp/auth_callback", False),
        ("https://claude.ai:444/api/mcp/auth_callback", "https://claude.ai/api/mcp/auth_callback", False),
        ("http://127.0.0.1:5555/callback", "http://127.0.0.1/callback", True),
        ("http://127.0.0.1:5555/callback", "http://127.0.0.1:6666/callback", True),
        ("http://[::1]:5555/callback", "http://[::1]/callback", True),
        ("http://localhost:5555/callback", "http://localhost/callback", True),
        ("http://127.0.0.1:5555/other", "http://127.0.0.1/callback", False),
        ("http://localhost:5555/callback", "http://127.0.0.1/callback", False),
        ("https://127.0.0.1:5555/callback", "https://127.0.0.1/callback", False),
        ("http://127.0.0.1:5555/callback?x=1", "http://127.0.0.1/callback", False),
    ],
)
def test_a_redirect_uri_matches_exactly_but_for_a_loopback_port(
    requested: str, registered: str, matches: bool
) -> None:
    assert redirect_matches(requested, registered) is matches


def test_a_client_refuses_an_undeclared_redirect_uri_and_grants_no_scopes() -> None:
    client = LoreClient(
        client_id="c", redirect_uris=[AnyUrl("http://127.0.0.1/cb"), AnyUrl("https://a.example/cb")]
    )
    assert str(client.validate_redirect_uri(AnyUrl("http://127.0.0.1:4000/cb"))) == "http://127.0.0.1:4000/cb"
    with pytest.raises(InvalidRedirectUriError, match="not one this client declared"):
        client.validate_redirect_uri(AnyUrl("https://b.example/cb"))
    with pytest.raises(InvalidRedirectUriError, match="required"):
        client.validate_redirect_uri(None)
    assert client.validate_scope("offline_access mcp") == []


def test_registration_refuses_plain_http_to_another_host_and_fragments() -> None:
    check_redirect_uris(
        ["https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1/cb", "cursor://anysphere/cb"]
    )
    for bad in ("http://claude.ai/cb", "https://a.example/cb#frag"):
        with pytest.raises(RegistrationError):
            check_redirect_uris([bad])


def test_a_metadata_document_must_name_itself_and_its_redirects() -> None:
    url = "https://client.example/oauth/metadata.json"
    assert (
        is_metadata_url(url) and not is_metadata_url("https://client.example/") and not is_metadata_url("abc")
    )
    client = client_from_document(
        url, {"client_id": url, "client_name": "C", "redirect_uris": ["http://127.0.0.1/cb"]}
    )
    assert (
        client.client_id == url and client.token_endpoint_auth_method == "none" and client.client_name == "C"
    )
    for document in (
        {"client_id": "https://other.example/x.json", "redirect_uris": ["http://127.0.0.1/cb"]},
        {"client_id": url},
        {"client_id": url, "redirect_uris": ["http://attacker.example/cb"]},
        {
            "client_id": url,
            "redirect_uris": ["http://127.0.0.1/cb"],
            "token_endpoint_auth_method": "private_key_jwt",
        },
        ["not", "an", "object"],
    ):
        with pytest.raises(ValueError):
            client_from_document(url, document)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "017700000001",
        "0",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.1.2.3",
    ],
)
async def test_no_spelling_of_this_machine_or_its_network_is_fetched(host: str) -> None:
    """Every address the host resolves to is checked before anything connects: a listener on
    this machine's port is never reached, and the reason is one the client can be told."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        url = f"https://{host}:{listener.getsockname()[1]}/c.json"
        assert await MetadataDocuments().client(url) is None
        with pytest.raises(BlockingIOError):
            listener.accept()
        with pytest.raises(DocumentRefused, match=r"is not a public address \(this machine or a private"):
            await MetadataDocuments().fetch(url)
