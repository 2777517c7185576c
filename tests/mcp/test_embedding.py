"""The embedding layer: the packaged model loads offline, batches, and caches queries."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.errors import ModelUnavailable


def test_the_default_model_gives_unit_384_dimension_vectors_in_batches(embedder: Embedder) -> None:
    texts = [f"lesson number {i} about caching" for i in range(70)]
    vectors = embedder.encode_documents(texts)
    assert len(vectors) == 70
    assert embedder.dimension == 384
    for vec in vectors[:3]:
        assert vec.shape == (384,)
        assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)
    # Related sentences are closer than unrelated ones.
    a, b, c = embedder.encode_documents(
        ["the cat sat on the mat", "a kitten rested on a rug", "quarterly tax filing"]
    )
    assert float(a @ b) > float(a @ c) + 0.2


def test_small_requests_get_the_vectors_a_large_batch_gives(embedder: Embedder) -> None:
    assert embedder.wait_settled(120)
    # A query or a few texts go through as one padded batch; bulk work is sorted by length
    # and split across cores. Both must give the same vector for a text.
    texts = [
        "kafka consumer lag",
        "a much longer text about webhook signatures that fail after a proxy change",
        "",
    ]
    small = embedder.encode_documents(texts)
    bulk = embedder.encode_documents(texts + [f"filler lesson {i}" for i in range(20)])[:3]
    # An import's few texts (bulk=True) are split across every core, in batches of one or two.
    spread = embedder.encode_documents(texts, bulk=True)
    for one, other, third in zip(small, bulk, spread, strict=True):
        np.testing.assert_allclose(one, other, atol=1e-5)
        np.testing.assert_allclose(one, third, atol=1e-5)
    np.testing.assert_allclose(embedder.encode_query("kafka consumer lag"), small[0], atol=1e-5)


def test_the_default_model_runs_on_onnx_runtime(embedder: Embedder) -> None:
    assert embedder.wait_settled(120)
    assert embedder.runtime == "onnxruntime"


def test_a_repeated_query_is_not_embedded_again(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    real = embedder._encode

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return real(texts)

    monkeypatch.setattr(embedder, "_encode", counting)
    first = embedder.encode_query("why does the build cache miss every time (cache test)")
    second = embedder.encode_query("why does the build cache miss every time (cache test)")
    assert len(calls) == 1
    assert np.array_equal(first, second)


# A model name other than the built-in one goes to sentence-transformers, whose import of torch
# alone took over a minute on two cores beside two busy loops: the test's own bound, not the
# default 60 s, lest a busy machine end the worker (and, under --max-worker-restart=0, the run).
@pytest.mark.timeout(600)
def test_a_model_that_cannot_load_is_reported_as_unavailable(tmp_path) -> None:
    broken = Embedder(str(tmp_path / "missing-model"))
    broken.start()
    with pytest.raises(ModelUnavailable, match="missing-model"):
        broken.wait(timeout=540)
    assert broken.wait_settled(5) and broken.runtime == "torch"


def test_concurrent_requests_share_model_calls_and_get_their_own_vectors(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = [f"grouped query {i}: why is deploy {i} slow on the canary" for i in range(40)]
    alone = {q: embedder.encode_documents([q])[0] for q in queries}
    calls: list[int] = []
    real = embedder._run_model

    def counting(texts: list[str], *, bulk: bool) -> np.ndarray:
        calls.append(len(texts))
        time.sleep(0.02)  # hold the model long enough for others to queue behind it
        return real(texts, bulk=bulk)

    monkeypatch.setattr(embedder, "_run_model", counting)
    results: dict[str, np.ndarray] = {}

    def work(q: str) -> None:
        results[q] = embedder.encode_documents([q])[0]

    threads = [threading.Thread(target=work, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(results) == set(queries)
    assert sum(calls) == len(queries) and len(calls) < len(queries)
    for q in queries:  # each caller got its own text's vector, not a neighbour's
        assert float(results[q] @ alone[q]) > 0.9999


def test_a_failed_group_fails_every_request_in_it(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(texts: list[str], *, bulk: bool) -> np.ndarray:
        time.sleep(0.02)
        raise RuntimeError("model exploded")

    monkeypatch.setattr(embedder, "_run_model", broken)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            embedder.encode_documents([f"text {i}"])
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(errors) == 8
