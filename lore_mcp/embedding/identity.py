"""Server model vs store model: mixing vectors answers plausible nonsense, so calls needing a
vector are refused ``UNAVAILABLE`` (not ``VALIDATION_ERROR``: no argument helps, a reembed does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lore_mcp.errors import UNAVAILABLE, LoreError
from stores import EmbeddingModel

if TYPE_CHECKING:
    from lore_mcp.embedding.embedder import Embedder


class ModelMismatch(LoreError):
    """The server's embedding model is not the one that made the store's vectors."""

    code = UNAVAILABLE


def running_model(embedder: Embedder) -> EmbeddingModel:
    """The embedder's model as a store records it (blocks until the model is loaded)."""
    return EmbeddingModel(
        name=embedder.model_name, dimension=embedder.dimension, fingerprint=embedder.fingerprint
    )


def describe_model(model: EmbeddingModel, other: EmbeddingModel | None = None) -> str:
    """A model in words, told apart from ``other`` when both carry the same name."""
    if not model.recorded:
        return f"a model Lore did not record ({model.dimension} dimensions)"
    if other is not None and model.name == other.name and not model.makes_same_vectors(other):
        source = "another endpoint" if model.fingerprint.startswith("endpoint:") else "other weights"
        return f"{model.name} from {source} ({model.dimension} dimensions)"
    return f"{model.name} ({model.dimension} dimensions)"


def mismatch_message(recorded: EmbeddingModel, running: EmbeddingModel) -> str:
    """The refusal: the store's model, the server's, and the two fixes."""
    return (
        f"This store's vectors come from {describe_model(recorded, running)}; this server runs "
        f"{describe_model(running, recorded)}, and vectors of two models cannot be compared, so nothing "
        f"was saved or searched. Run `lore-memory reembed` to re-embed the store with {running.name}, "
        f"or {configure_fix(recorded)} and restart the server."
    )


def configure_fix(recorded: EmbeddingModel) -> str:
    """The setting that brings back the store's own model."""
    if not recorded.recorded:
        return "go back to the model that made them"
    if recorded.fingerprint.startswith("endpoint:"):
        return f"set LORE_EMBEDDING_URL to the endpoint that made them, with LORE_EMBEDDING_MODEL={recorded.name}"
    return f"set LORE_EMBEDDING_MODEL={recorded.name}"
