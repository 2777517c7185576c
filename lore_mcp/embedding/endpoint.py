"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (``LORE_EMBEDDING_URL``).

Beyond a bare POST: a probe at load (a wrong URL, key or model shows at start, and the dimension is
known before any vector is stored); batches (servers cap inputs); rows put in ``index`` order and
normalised (neither is promised); one time budget per request, retrying no connection, 429 and 5xx,
other 4xx reported at once as config mistakes, never showing the key. Texts arrive redacted."""

from __future__ import annotations

import base64
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import numpy as np

from lore_mcp.errors import ModelUnavailable
from lore_mcp.redaction import redact
from lore_mcp.settings import DEFAULT_MODEL, embeddings_url

if TYPE_CHECKING:
    from lore_mcp.settings import Settings

logger = logging.getLogger("lore_mcp.embedding.endpoint")

# Below LORE_REQUEST_TIMEOUT_S (30 s), so a hung endpoint is reported as such, not as a timeout.
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_BATCH_SIZE = 64
MAX_ATTEMPTS = 4
BACKOFF_S = 0.5  # the first wait before a retry; it doubles on each further one
RETRY_AFTER_CAP_S = 10.0  # a 429 asking for a longer wait is reported instead of waited out
EXCERPT_CHARS = 200
PROBE_TEXT = "Lore checks that this embeddings endpoint answers."


class EndpointUnreachable(ModelUnavailable):
    """An outage that may pass (no answer, 5xx, 429): a later call reloads (``retry_load``)."""

    retry_load = True


def public_url(url: str) -> str:
    """``url`` without user, password or query string (either may hold a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}:{parts.port}" if parts.port else host, parts.path, "", ""))


class EndpointEngine:
    """An ``Engine`` (see ``lore_mcp.embedding.embedder``) that asks an HTTP endpoint for vectors."""

    runtime = "endpoint"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        retry_after_cap_s: float = RETRY_AFTER_CAP_S,
    ) -> None:
        if batch_size < 1 or max_attempts < 1 or timeout_s <= 0:
            raise ValueError("batch_size and max_attempts must be at least 1 and timeout_s positive")
        self.url = embeddings_url(url)
        self.model, self.timeout_s, self.batch_size = model, timeout_s, batch_size
        self.max_attempts, self.backoff_s, self.retry_after_cap_s = max_attempts, backoff_s, retry_after_cap_s
        self._api_key = api_key or None
        self._expected_dimension = dimension
        self._dimension: int | None = None
        where = urlsplit(public_url(self.url))  # ``host:port``, the scheme's port when none is written
        self._where = where.netloc + ("" if where.port else f":{443 if where.scheme == 'https' else 80}")
        self._client: httpx2.Client | None = None
        self._client_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> EndpointEngine:
        """The engine ``LORE_EMBEDDING_URL`` and its companion settings describe."""
        if not settings.embedding_url:
            raise ValueError("LORE_EMBEDDING_URL is not set")
        key = settings.embedding_api_key
        return cls(
            settings.embedding_url,
            settings.embedding_model,
            api_key=key.get_secret_value() if key is not None else None,
            dimension=settings.embedding_dimension,
            timeout_s=settings.embedding_timeout_s,
            batch_size=settings.embedding_batch_size,
        )

    def load(self) -> None:
        """Send one probe: a wrong URL, key or model fails here, at start, with its reason."""
        width = self._post([PROBE_TEXT]).shape[1]
        expected = self._expected_dimension
        if expected is not None and width != expected:
            raise ModelUnavailable(
                f"The embeddings endpoint at {self._where} returns {width}-dimension vectors for model "
                f"{self.model!r}, but LORE_EMBEDDING_DIMENSION is {expected}. Name the intended model in "
                f"LORE_EMBEDDING_MODEL, or set LORE_EMBEDDING_DIMENSION={width} if this model is the one "
                "you want (a store keeps the dimension of its first vectors)."
            )
        self._dimension = width
        logger.info("embeddings endpoint %s serves %s with %d dimensions", self._where, self.model, width)

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            raise ModelUnavailable(f"The embeddings endpoint at {self._where} has not been reached yet.")
        return self._dimension

    @property
    def fingerprint(self) -> str:
        """Endpoint and model: vectors of another server or model are not comparable with these."""
        return f"endpoint:{public_url(self.url)}#{self.model}"

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        """Unit vectors in order, ``batch_size`` per request (``bulk`` is the endpoint's business)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [self._post(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        for part in parts:
            if self._dimension is not None and part.shape[1] != self._dimension:
                raise ModelUnavailable(
                    f"The embeddings endpoint at {self._where} returned {part.shape[1]}-dimension vectors "
                    f"for model {self.model!r}, but it returned {self._dimension} when Lore started: the "
                    "model behind it changed. Restore it, or restart Lore and run `lore-memory reembed`."
                )
        return np.vstack(parts)

    def close(self) -> None:
        """Close the kept-alive connections (the engine reopens them if used again)."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _http(self) -> httpx2.Client:
        with self._client_lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                self._client = httpx2.Client(headers=headers, follow_redirects=False)
            return self._client

    def _post(self, texts: list[str]) -> np.ndarray:
        """Embed one batch within ``timeout_s``, retrying what a retry can fix."""
        deadline = time.monotonic() + self.timeout_s
        payload = {"model": self.model, "input": texts}
        attempt = 0
        while True:
            attempt += 1
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                response = self._http().post(self.url, json=payload, timeout=remaining)
            except httpx2.TimeoutException:
                raise EndpointUnreachable(self._timed_out()) from None
            except httpx2.TransportError as exc:
                failure = self._unreachable(exc, attempt)
                wait: float | None = self._backoff(attempt)
            else:
                if response.is_success:
                    return self._vectors(response, len(texts))
                if response.status_code != 429 and response.status_code < 500:
                    raise ModelUnavailable(self._refused(response))
                failure = self._server_failed(response, attempt)
                wait = self._retry_wait(response, attempt)
            if wait is None or attempt >= self.max_attempts or time.monotonic() + wait >= deadline:
                raise EndpointUnreachable(failure)
            logger.info("embeddings endpoint %s: %s; retrying in %.2f s", self._where, failure, wait)
            time.sleep(wait)

    def _backoff(self, attempt: int) -> float:
        """Doubling waits with a little jitter, so replicas that failed together retry apart."""
        return self.backoff_s * 2.0 ** (attempt - 1) * random.uniform(0.8, 1.2)

    def _retry_wait(self, response: httpx2.Response, attempt: int) -> float | None:
        """The backoff or ``Retry-After`` within the cap; None if longer than a call should wait."""
        try:
            asked = float(response.headers.get("retry-after", ""))
        except ValueError:  # absent, or the HTTP-date form: our own backoff
            asked = -1.0
        if asked < 0:
            return self._backoff(attempt)
        return asked if asked <= self.retry_after_cap_s else None

    def _vectors(self, response: httpx2.Response, count: int) -> np.ndarray:
        """The response's vectors as unit float32 rows in input order, or a clear refusal."""
        try:
            body = response.json()
        except ValueError:
            raise ModelUnavailable(self._malformed("the body is not JSON")) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ModelUnavailable(self._malformed('it has no "data" list'))
        if len(data) != count:
            raise ModelUnavailable(
                self._malformed(f"{count} texts were sent but {len(data)} vectors came back")
            )
        indexes = [item.get("index", i) if isinstance(item, dict) else None for i, item in enumerate(data)]
        if any(type(index) is not int for index in indexes) or set(indexes) != set(range(count)):
            raise ModelUnavailable(self._malformed('its "index" values are not 0..n-1, once each'))
        by_index = dict(zip(indexes, data, strict=True))
        rows = [self._row(by_index[index].get("embedding")) for index in range(count)]
        if len({row.shape[0] for row in rows}) != 1:
            raise ModelUnavailable(self._malformed("its vectors have different lengths"))
        matrix = np.vstack(rows)
        norms = np.linalg.norm(matrix, axis=1)
        if not np.all(np.isfinite(matrix)) or not np.all(norms > 0):
            raise ModelUnavailable(self._malformed("a vector is zero or not a finite number"))
        unit: np.ndarray = (matrix / norms[:, None]).astype(np.float32)
        return unit

    def _row(self, embedding: Any) -> np.ndarray:
        """One embedding: a list of numbers, or base64 float32 (``encoding_format: base64``)."""
        try:
            if isinstance(embedding, str):
                embedding = np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
            row = np.asarray(embedding, dtype=np.float64)
        except (TypeError, ValueError):  # binascii.Error is a ValueError
            row = np.zeros(0)
        if row.ndim != 1 or row.shape[0] == 0:
            raise ModelUnavailable(self._malformed('an "embedding" is not a list of numbers'))
        return row

    def _excerpt(self, response: httpx2.Response) -> str:
        """The start of the server's answer, on one line, with any credential taken out."""
        text = " ".join(response.text.split())
        if self._api_key:
            text = text.replace(self._api_key, "[REDACTED]")
        text = redact(text).text
        return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")

    def _model_hint(self) -> str:
        if self.model == DEFAULT_MODEL:
            return (
                f" LORE_EMBEDDING_MODEL is unset, so Lore asked for {DEFAULT_MODEL}; set it to the name the "
                "endpoint knows (for Ollama, for example, nomic-embed-text)."
            )
        return ""

    def _refused(self, response: httpx2.Response) -> str:
        status = response.status_code
        said = f"HTTP {status}: {self._excerpt(response) or 'no details'}"
        if status in (401, 403):
            fix = (
                "Set LORE_EMBEDDING_API_KEY to a key it accepts."
                if self._api_key
                else "It needs an API key: set LORE_EMBEDDING_API_KEY."
            )
            return f"The embeddings endpoint at {self._where} refused Lore's credentials ({said}). {fix}"
        if status == 404:
            return (
                f"The embeddings endpoint at {self._where} answered {said} for {urlsplit(self.url).path}: "
                f"either it does not serve the model {self.model!r} (LORE_EMBEDDING_MODEL; for Ollama, run "
                f"`ollama pull {self.model}`) or LORE_EMBEDDING_URL is not an OpenAI-compatible base URL "
                "(it should end in /v1, e.g. http://localhost:11434/v1)." + self._model_hint()
            )
        if 300 <= status < 400:
            return (
                f"The embeddings endpoint at {self._where} redirected Lore ({said}, to "
                f"{public_url(response.headers.get('location', '?'))}): set LORE_EMBEDDING_URL to where it "
                "points."
            )
        return (
            f"The embeddings endpoint at {self._where} refused the request ({said}). Check that "
            f"LORE_EMBEDDING_MODEL={self.model!r} is an embedding model it serves." + self._model_hint()
        )

    def _server_failed(self, response: httpx2.Response, attempt: int) -> str:
        status = response.status_code
        what = "is rate-limiting Lore" if status == 429 else "failed"
        asked = response.headers.get("retry-after")
        after = f", asked to wait {asked} s" if asked and status == 429 else ""
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        return (
            f"The embeddings endpoint at {self._where} {what} (HTTP {status}: "
            f"{self._excerpt(response) or 'no details'}{after}; {tries}). "
            "Try again later, or check the endpoint's own logs."
        )

    def _unreachable(self, exc: httpx2.TransportError, attempt: int) -> str:
        reason = str(exc).strip() or type(exc).__name__
        return (
            f"The embeddings endpoint at {self._where} could not be reached ({reason}; {attempt} "
            f"attempt{'s' if attempt > 1 else ''}). Start it (for Ollama: `ollama serve`) or correct "
            "LORE_EMBEDDING_URL."
        )

    def _timed_out(self) -> str:
        return (
            f"The embeddings endpoint at {self._where} did not answer within {self.timeout_s:g} s "
            "(LORE_EMBEDDING_TIMEOUT_S). It may be overloaded or still loading the model; try again, "
            "or raise LORE_EMBEDDING_TIMEOUT_S."
        )

    def _malformed(self, what: str) -> str:
        return (
            f"The embeddings endpoint at {self._where} answered with something that is not an OpenAI "
            f"embeddings response ({what}). Check that LORE_EMBEDDING_URL is an OpenAI-compatible "
            "/v1 base URL."
        )
