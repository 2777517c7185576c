"""Bring your own embeddings: ``LORE_EMBEDDING_URL`` against a real HTTP server on 127.0.0.1.

The server below speaks the OpenAI ``/v1/embeddings`` protocol (as Ollama, LM Studio,
vLLM and OpenAI do) over a real socket, answers with a hashed bag of words (so texts
sharing words are near), and can be told to fail in the ways real endpoints fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder, embedder_for
from lore_mcp.embedding.endpoint import EndpointEngine, EndpointUnreachable, embeddings_url
from lore_mcp.errors import UNAVAILABLE, ModelUnavailable
from lore_mcp.services.lessons import LessonService
from lore_mcp.settings import Settings
from stores import Store
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call

DIM = 96
MODEL = "bag-of-words-test"
KEY = "sk-endpoint-test-0123456789abcdef"


def bag_of_words(text: str, dim: int = DIM) -> np.ndarray:
    """The test server's embedding: signed hashed word counts, deliberately not unit length."""
    vec = np.zeros(dim)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vec[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    vec[dim - 1] += 0.25  # never the zero vector
    return 3.0 * vec


def unit(vec: np.ndarray) -> np.ndarray:
    return vec / np.linalg.norm(vec)


@dataclass
class Reply:
    """A canned answer served instead of a normal one: a status, a raw body, a hang or a drop."""

    status: int = 200
    body: Any = None  # JSON-able, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # wait (until the server stops) without answering
    drop: bool = False  # close the connection without answering


@dataclass
class Seen:
    """One request the server received."""

    path: str
    authorization: str | None
    model: str | None
    inputs: list[str]


class FakeEndpoint:
    """An OpenAI-compatible embeddings server on 127.0.0.1, run in a thread by the test."""

    def __init__(self, *, api_key: str | None = None, model: str = MODEL) -> None:
        self.api_key = api_key
        self.model = model
        self.dimension = DIM
        self.requests: list[Seen] = []
        self.script: list[Reply] = []  # served first, in order, one per request
        self.port = 0
        self._release = threading.Event()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/v1"

    def start(self) -> None:
        """Listen (again, on the same port once one was chosen) and serve in a thread."""
        self._release.clear()
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening: new connections are refused, as with an endpoint that is down."""
        self._release.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._thread is not None:
            self._thread.join(timeout=10)

    def answer(self, seen: Seen) -> Reply:
        """What a healthy OpenAI-compatible server would say to ``seen``."""
        if seen.path != "/v1/embeddings":
            return Reply(404, {"error": {"message": "404 page not found"}})
        if self.api_key is not None and seen.authorization != f"Bearer {self.api_key}":
            presented = (seen.authorization or "").removeprefix("Bearer ")
            # Some servers echo the key they were given; Lore must not pass it on.
            return Reply(401, {"error": {"message": f"Incorrect API key provided: {presented}"}})
        if seen.model != self.model:
            return Reply(404, {"error": {"message": f'model "{seen.model}" not found, try pulling it first'}})
        rows = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(text, self.dimension).tolist()}
            for i, text in enumerate(seen.inputs)
        ]
        rows.reverse()  # the spec does not promise order: the client must sort by index
        return Reply(200, {"object": "list", "model": self.model, "data": rows})

    def wait_for_release(self) -> None:
        self._release.wait(timeout=60)


def _handler_for(endpoint: FakeEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's naming
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            inputs = body.get("input")
            seen = Seen(
                path=self.path,
                authorization=self.headers.get("Authorization"),
                model=body.get("model"),
                inputs=[inputs] if isinstance(inputs, str) else list(inputs or []),
            )
            endpoint.requests.append(seen)
            reply = endpoint.script.pop(0) if endpoint.script else endpoint.answer(seen)
            if reply.hang:
                endpoint.wait_for_release()
                return
            if reply.drop:
                self.close_connection = True
                return
            payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def engines() -> Iterator[Callable[..., EndpointEngine]]:
    """Make engines with short backoffs (the retries are real, the waits small); closed afterwards."""
    made: list[EndpointEngine] = []

    def make(url: str, model: str = MODEL, **options: Any) -> EndpointEngine:
        options.setdefault("backoff_s", 0.01)
        options.setdefault("timeout_s", 10.0)
        engine = EndpointEngine(url, model, **options)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refusal(action: Callable[[], Any]) -> ModelUnavailable:
    """Run ``action``, which must fail with ``ModelUnavailable``; return the failure."""
    with pytest.raises(ModelUnavailable) as caught:
        action()
    assert caught.value.code == UNAVAILABLE
    return caught.value


# -- the protocol ------------------------------------------------------------------


def test_the_probe_learns_the_dimension_and_vectors_come_back_unit_length_in_input_order(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url)
    engine.load()
    assert engine.dimension == DIM and engine.runtime == "endpoint"
    texts = ["stripe webhook signature", "postgres deadlock on insert", "webhook retries", "x"]
    vectors = engine.encode(texts, bulk=False)
    assert vectors.dtype == np.float32 and vectors.shape == (4, DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, np.stack([unit(bag_of_words(t)) for t in texts]), atol=1e-6)
    assert [r.model for r in endpoint.requests] == [MODEL, MODEL]


def test_many_texts_go_in_batches_of_the_batch_size_and_keep_their_order(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url, batch_size=4)
    engine.load()
    texts = [f"lesson number {i} about topic {i * 7}" for i in range(10)]
    vectors = engine.encode(texts, bulk=True)
    assert [len(r.inputs) for r in endpoint.requests[1:]] == [4, 4, 2]
    assert [t for r in endpoint.requests[1:] for t in r.inputs] == texts
    np.testing.assert_allclose(vectors, np.stack([unit(bag_of_words(t)) for t in texts]), atol=1e-6)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/embeddings"])
def test_a_base_url_a_bare_host_or_the_full_embeddings_url_all_reach_v1_embeddings(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine], suffix: str
) -> None:
    engines(endpoint.base + suffix).load()
    assert [r.path for r in endpoint.requests] == ["/v1/embeddings"]


def test_urls_are_normalised_and_anything_but_http_is_refused_at_configuration() -> None:
    assert embeddings_url("http://localhost:11434/v1") == "http://localhost:11434/v1/embeddings"
    assert embeddings_url("https://api.openai.com/v1/embeddings") == "https://api.openai.com/v1/embeddings"
    assert embeddings_url("http://gpu-box:8000") == "http://gpu-box:8000/v1/embeddings"
    assert (
        embeddings_url("http://proxy/openai/v1?api-version=2")
        == "http://proxy/openai/v1/embeddings?api-version=2"
    )
    for bad in ("localhost:11434/v1", "ftp://host/v1", "http:///v1"):
        with pytest.raises(ValidationError, match="LORE_EMBEDDING_URL must be an http"):
            Settings(embedding_url=bad)


def test_the_fingerprint_names_endpoint_and_model_but_no_credential(
    engines: Callable[..., EndpointEngine],
) -> None:
    engine = engines("http://someone:pa55word@127.0.0.1:9/v1?api-key=q-secret", "nomic-embed-text")
    assert engine.fingerprint == "endpoint:http://127.0.0.1:9/v1/embeddings#nomic-embed-text"
    other = engines("http://127.0.0.1:9/v1", "mxbai-embed-large")
    assert other.fingerprint != engine.fingerprint


# -- credentials -------------------------------------------------------------------


def test_the_api_key_is_sent_as_a_bearer_token(engines: Callable[..., EndpointEngine]) -> None:
    guarded = FakeEndpoint(api_key=KEY)
    guarded.start()
    try:
        engine = engines(guarded.url, api_key=KEY)
        engine.load()
        engine.encode(["one text"], bulk=False)
        assert [r.authorization for r in guarded.requests] == [f"Bearer {KEY}"] * 2
    finally:
        guarded.stop()


def test_a_refused_key_fails_at_load_at_once_and_the_sentence_never_shows_the_key(
    engines: Callable[..., EndpointEngine],
) -> None:
    guarded = FakeEndpoint(api_key=KEY)
    guarded.start()
    try:
        wrong = "proxy-token-fedcba9876543210"  # not a shape redaction knows
        failure = refusal(engines(guarded.url, api_key=wrong).load)
        assert f"127.0.0.1:{guarded.port}" in failure.message
        assert "HTTP 401" in failure.message and "Incorrect API key provided" in failure.message
        assert "Set LORE_EMBEDDING_API_KEY to a key it accepts" in failure.message
        assert wrong not in failure.message and "fedcba9876543210" not in failure.message
        assert len(guarded.requests) == 1  # a wrong key is not retried
        assert not isinstance(failure, EndpointUnreachable)  # retrying the load cannot fix it

        missing = refusal(engines(guarded.url).load)
        assert "It needs an API key: set LORE_EMBEDDING_API_KEY" in missing.message
    finally:
        guarded.stop()


def test_an_unknown_model_is_named_with_the_fix_and_not_retried(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    failure = refusal(engines(endpoint.url, "no-such-model").load)
    assert "HTTP 404" in failure.message and "not found, try pulling it first" in failure.message
    assert "'no-such-model'" in failure.message and "ollama pull no-such-model" in failure.message
    assert len(endpoint.requests) == 1


def test_the_default_model_name_sent_to_an_endpoint_says_to_set_lore_embedding_model(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    failure = refusal(engines(endpoint.url, "all-MiniLM-L6-v2").load)
    assert "LORE_EMBEDDING_MODEL is unset" in failure.message


def test_a_client_error_is_reported_with_the_servers_words_and_not_retried(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url)
    engine.load()
    endpoint.script = [Reply(400, {"error": {"message": "input exceeds the context length of 512"}})]
    failure = refusal(lambda: engine.encode(["a very long text"], bulk=False))
    assert "HTTP 400" in failure.message and "input exceeds the context length of 512" in failure.message
    assert len(endpoint.requests) == 2  # the probe and the one refused request


# -- retries, outages and timeouts -------------------------------------------------


def test_server_errors_and_dropped_connections_are_retried_until_the_endpoint_answers(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url, max_attempts=4)
    engine.load()
    endpoint.script = [Reply(503, {"error": "loading model"}), Reply(drop=True), Reply(502, b"bad gateway")]
    vectors = engine.encode(["retried text"], bulk=False)
    np.testing.assert_allclose(vectors[0], unit(bag_of_words("retried text")), atol=1e-6)
    assert len(endpoint.requests) == 1 + 4


def test_server_errors_that_persist_end_after_the_last_attempt_with_the_status(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url, max_attempts=3)
    engine.load()
    endpoint.script = [Reply(503, {"error": "overloaded, come back later"})] * 10
    failure = refusal(lambda: engine.encode(["text"], bulk=False))
    assert "HTTP 503" in failure.message and "overloaded, come back later" in failure.message
    assert "3 attempts" in failure.message
    assert len(endpoint.requests) == 1 + 3


def test_a_429_is_retried_after_the_wait_it_asks_for_unless_that_is_too_long(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url, retry_after_cap_s=5.0)
    engine.load()
    endpoint.script = [Reply(429, {"error": "slow down"}, headers={"Retry-After": "0"})]
    engine.encode(["after a short wait"], bulk=False)
    assert len(endpoint.requests) == 1 + 2

    endpoint.script = [Reply(429, {"error": "quota exhausted"}, headers={"Retry-After": "3600"})]
    failure = refusal(lambda: engine.encode(["after an hour"], bulk=False))
    assert "rate-limiting" in failure.message and "3600" in failure.message
    assert len(endpoint.requests) == 3 + 1  # not waited out, not retried


def test_an_endpoint_that_is_down_is_unavailable_with_its_address_and_what_to_do(
    engines: Callable[..., EndpointEngine],
) -> None:
    port = closed_port()
    failure = refusal(engines(f"http://127.0.0.1:{port}/v1", max_attempts=3).load)
    assert f"127.0.0.1:{port} could not be reached" in failure.message
    assert "3 attempts" in failure.message and "LORE_EMBEDDING_URL" in failure.message
    assert isinstance(failure, EndpointUnreachable)  # an outage may pass: loading may be retried


def test_an_endpoint_that_never_answers_is_unavailable_once_the_timeout_has_passed(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    endpoint.script = [Reply(hang=True)]
    started = time.monotonic()
    failure = refusal(engines(endpoint.url, timeout_s=0.5).load)
    assert time.monotonic() - started < 10  # the timeout, not the server, ended the wait
    assert "did not answer within 0.5 s" in failure.message and "LORE_EMBEDDING_TIMEOUT_S" in failure.message


# -- dimensions and malformed answers ------------------------------------------------


def test_a_configured_dimension_is_checked_at_load(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engines(endpoint.url, dimension=DIM).load()
    failure = refusal(engines(endpoint.url, dimension=384).load)
    assert f"returns {DIM}-dimension vectors" in failure.message
    assert "LORE_EMBEDDING_DIMENSION is 384" in failure.message


def test_a_model_that_changes_dimension_after_start_is_refused(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    engine = engines(endpoint.url)
    engine.load()
    endpoint.dimension = DIM * 2
    failure = refusal(lambda: engine.encode(["text"], bulk=False))
    assert f"returned {DIM * 2}-dimension vectors" in failure.message and "changed" in failure.message


def _rows(*embeddings: Any) -> dict[str, Any]:
    return {"data": [{"index": i, "embedding": e} for i, e in enumerate(embeddings)]}


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b"<html>it works</html>", "not JSON"),
        ({"embeddings": [[1.0, 2.0]]}, 'no "data" list'),
        (_rows([1.0, 2.0], [3.0, 4.0]), "2 vectors came back"),
        ({"data": [{"index": 1, "embedding": [1.0]}]}, '"index" values'),
        (_rows([0.0, 0.0]), "zero"),
        (_rows(["one", "two"]), "not a list of numbers"),
        (_rows([[1.0], [2.0]]), "not a list of numbers"),
    ],
)
def test_an_answer_that_is_not_embeddings_is_refused_clearly(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine], body: Any, what: str
) -> None:
    endpoint.script = [Reply(200, body)]
    failure = refusal(engines(endpoint.url, max_attempts=1).load)
    assert "not an OpenAI embeddings response" in failure.message and what in failure.message


def test_base64_embeddings_are_decoded(
    endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> None:
    raw = np.array([3.0, 4.0], dtype="<f4")
    endpoint.script = [Reply(200, _rows(base64.b64encode(raw.tobytes()).decode()))]
    engine = engines(endpoint.url)
    engine.load()
    assert engine.dimension == 2


# -- through settings and the Embedder ------------------------------------------------


def test_settings_from_the_environment_choose_the_endpoint_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guarded = FakeEndpoint(api_key=KEY)
    guarded.start()
    for name, value in {
        "URL": guarded.url,
        "API_KEY": KEY,
        "MODEL": MODEL,
        "DIMENSION": str(DIM),
        "TIMEOUT_S": "5",
        "BATCH_SIZE": "8",
    }.items():
        monkeypatch.setenv(f"LORE_EMBEDDING_{name}", value)
    settings = Settings()
    assert KEY not in repr(settings)
    embedder = embedder_for(settings)
    engine = embedder.engine
    try:
        assert isinstance(engine, EndpointEngine)
        assert (engine.batch_size, engine.timeout_s, embedder.runtime) == (8, 5.0, "endpoint")
        vector = embedder.encode_query("webhook signature")
        np.testing.assert_allclose(vector, unit(bag_of_words("webhook signature")), atol=1e-6)
        assert embedder.dimension == DIM
        assert embedder.fingerprint == f"endpoint:http://127.0.0.1:{guarded.port}/v1/embeddings#{MODEL}"
        assert {r.authorization for r in guarded.requests} == {f"Bearer {KEY}"}
    finally:
        engine.close()  # type: ignore[attr-defined]
        guarded.stop()


# -- through a real MCP client, both backends ------------------------------------------


@pytest.fixture
def endpoint_service(
    pristine_store: Store, endpoint: FakeEndpoint, engines: Callable[..., EndpointEngine]
) -> LessonService:
    """A LessonService whose embedder is the test endpoint, already loaded, on a store that
    never held vectors of another dimension (the suite's shared Postgres keeps its column)."""
    embedder = Embedder(MODEL, engine=engines(endpoint.url))
    embedder.start()
    embedder.wait()
    return LessonService(pristine_store, embedder, default_project="default")


STRIPE = {
    "problem": "Stripe webhook signature verification fails in production",
    "resolution": "Verify the signature against the raw request body, not re-serialised JSON.",
}
DEADLOCK = {
    "problem": "Postgres deadlock when two workers insert invoices",
    "resolution": "Take the advisory lock per customer before inserting.",
}


async def test_save_and_recall_through_mcp_embed_on_the_endpoint(
    endpoint_service: LessonService, endpoint: FakeEndpoint
) -> None:
    async with connected(build_server(endpoint_service)) as client:
        stripe = await call(client, "save_lesson", **STRIPE)
        await call(client, "save_lesson", **DEADLOCK)
        got = await call(client, "recall_lessons", query="webhook signature verification fails")
    assert got["lessons"] and got["lessons"][0]["id"] == stripe["id"]
    sent = [text for r in endpoint.requests for text in r.inputs]
    assert any(STRIPE["problem"] in text for text in sent)
    assert "webhook signature verification fails" in sent


async def test_while_the_endpoint_is_down_saves_and_recalls_are_unavailable_and_nothing_is_stored(
    endpoint_service: LessonService, endpoint: FakeEndpoint
) -> None:
    async with connected(build_server(endpoint_service)) as client:
        await call(client, "save_lesson", **STRIPE)
        before = await call(client, "list_lessons", verbose=True)
        endpoint.stop()
        with pytest.raises(ToolFailed) as saving:
            await call(client, "save_lesson", **DEADLOCK)
        assert saving.value.code == UNAVAILABLE
        assert f"127.0.0.1:{endpoint.port} could not be reached" in saving.value.message
        with pytest.raises(ToolFailed) as recalling:
            await call(client, "recall_lessons", query="advisory lock deadlock")
        assert recalling.value.code == UNAVAILABLE
        assert await call(client, "list_lessons", verbose=True) == before

        endpoint.start()  # back on the same port: Lore recovers without a restart
        saved = await call(client, "save_lesson", **DEADLOCK)
        after = await call(client, "list_lessons")
    assert saved["merged"] is False
    assert len(after["lessons"]) == len(before["lessons"]) + 1


async def test_an_endpoint_down_at_start_makes_save_lesson_unavailable_with_the_reason(
    store: Store, engines: Callable[..., EndpointEngine]
) -> None:
    port = closed_port()
    embedder = Embedder(MODEL, engine=engines(f"http://127.0.0.1:{port}/v1", max_attempts=2))
    service = LessonService(store, embedder, default_project="default")
    async with connected(build_server(service)) as client:
        with pytest.raises(ToolFailed) as saving:
            await call(client, "save_lesson", **STRIPE)
        listed = await call(client, "list_lessons")
    assert saving.value.code == UNAVAILABLE
    assert f"127.0.0.1:{port} could not be reached" in saving.value.message
    assert listed["lessons"] == []


def test_an_endpoint_that_comes_up_after_lore_is_used_without_a_restart(
    engines: Callable[..., EndpointEngine],
) -> None:
    late = FakeEndpoint()
    late.start()
    late.stop()  # a port known to be free, that the endpoint will come up on later
    embedder = Embedder(MODEL, engine=engines(late.url, max_attempts=1))
    with pytest.raises(EndpointUnreachable):
        embedder.encode_query("before the endpoint is up")
    late.start()
    try:
        vector = embedder.encode_query("after the endpoint is up")
        np.testing.assert_allclose(vector, unit(bag_of_words("after the endpoint is up")), atol=1e-6)
    finally:
        late.stop()
