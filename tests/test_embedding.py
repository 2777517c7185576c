"""The embedding layer: the packaged model loads offline, batches, and caches queries."""

from __future__ import annotations

import numpy as np
import pytest

from lore_mcp.embedding import Embedder
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


def test_a_model_that_cannot_load_is_reported_as_unavailable(tmp_path) -> None:
    broken = Embedder(str(tmp_path / "missing-model"))
    broken.start()
    with pytest.raises(ModelUnavailable, match="missing-model"):
        broken.wait(timeout=120)
