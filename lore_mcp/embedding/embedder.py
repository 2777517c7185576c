"""Text to vectors off the request path: ONNX all-MiniLM-L6-v2 (default: no torch, ~0.3 s load),
sentence-transformers, or an endpoint. ``Embedder`` loads on a thread (``initialize`` never
waits), caches queries, and groups requests arriving while busy into one call ("group commit")."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from lore_mcp.embedding.onnx import DIMENSION, WEIGHTS_SHA256, OnnxEncoder
from lore_mcp.errors import LoreError, ModelUnavailable
from lore_mcp.settings import DEFAULT_MODEL

if TYPE_CHECKING:
    import numpy as np

    from lore_mcp.settings import Settings

logger = logging.getLogger("lore_mcp.embedding.embedder")

QUERY_CACHE_SIZE = 1024
CLOSE_WAIT_S = 60.0  # how long closing waits for a model still loading (the default loads in about 0.3 s)
BATCH_SIZE = 64
# Batches at least this large are bulk work (imports, reembed, benchmarks) and may use every core.
BULK_TEXTS = 16
EXTRA = "sentence-transformers"


class Engine(Protocol):
    """Texts to float32 unit vectors. ``fingerprint`` names the source, so a store tells another
    model's vectors from its own; ``bulk`` work may use every core."""

    runtime: str  # "onnxruntime", "torch" or "endpoint": what doctor reports

    def load(self) -> None: ...
    @property
    def dimension(self) -> int: ...
    @property
    def fingerprint(self) -> str: ...
    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray: ...


class OnnxEngine:
    """The shipped all-MiniLM-L6-v2 graph on ONNX Runtime (the default)."""

    runtime = "onnxruntime"
    dimension = DIMENSION
    fingerprint = f"sha256:{WEIGHTS_SHA256}"
    _encoder: OnnxEncoder

    def load(self) -> None:
        self._encoder = OnnxEncoder(onnx_threads())

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        return self._encoder.encode_bulk(texts) if bulk and len(texts) > 1 else self._encoder.encode(texts)


class SentenceTransformersEngine:
    """Any other model by name or path, on sentence-transformers (the extra)."""

    runtime = "torch"
    fingerprint = ""  # the weights' digest, once loaded
    dimension = 0
    _model: Any = None
    _threads = 0

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name

    def load(self) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # the extra is not installed (or is broken)
            raise ModelUnavailable(missing_extra_message(self.model_name)) from exc

        torch.set_num_threads(inference_threads())
        self._threads = inference_threads()
        model: Any = SentenceTransformer(self.model_name, device="cpu")
        self._model = model
        # sentence-transformers renamed the accessor in v5; support both.
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dimension = int(getter())
        digest = hashlib.sha256()
        for name, tensor in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        self.fingerprint = f"sha256:{digest.hexdigest()}"

    def encode(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        import torch

        threads = (os.cpu_count() or 1) if bulk else inference_threads()
        if threads != self._threads:
            torch.set_num_threads(threads)
            self._threads = threads
        vectors: np.ndarray = self._model.encode(  # a numpy array unless told otherwise
            texts, batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False
        )
        return vectors


def missing_extra_message(model_name: str) -> str:
    """What to do when a model other than the default is named without the extra."""
    return (
        f"LORE_EMBEDDING_MODEL={model_name} runs on sentence-transformers, which is not installed. "
        f"Install the extra: pip install 'lore-memory-mcp[{EXTRA}]' (with uvx: "
        f"uvx --from 'lore-memory-mcp[{EXTRA}]' lore-memory-mcp mcp), or unset LORE_EMBEDDING_MODEL to use "
        f"the built-in {DEFAULT_MODEL}."
    )


def engine_for(model_name: str) -> Engine:
    """The engine for a model name: the shipped graph for the default, else sentence-transformers."""
    return OnnxEngine() if model_name == DEFAULT_MODEL else SentenceTransformersEngine(model_name)


def embedder_for(settings: Settings) -> Embedder:
    """The embedder the settings ask for: an endpoint, the default model, or another one."""
    if getattr(settings, "embedding_url", None):
        from lore_mcp.embedding.endpoint import EndpointEngine

        return Embedder(settings.embedding_model, engine=EndpointEngine.from_settings(settings))
    return Embedder(settings.embedding_model)


# Texts waiting for a grouped encode, and what becomes of them.
_Request = tuple[list[str], "Future[np.ndarray]"]


class Embedder:
    """An engine loaded in the background, with a query cache and grouped encodes; thread-safe."""

    def __init__(self, model_name: str = DEFAULT_MODEL, *, engine: Engine | None = None) -> None:
        self.model_name = model_name
        self.engine: Engine = engine if engine is not None else engine_for(model_name)
        self.runtime = self.engine.runtime
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._start_lock = threading.Lock()
        self.started = False
        self._encode_lock = threading.RLock()  # reentrant: a group's leader holds it while it encodes
        self._waiting_lock = threading.Lock()
        self._waiting: list[_Request] = []
        # Looks ``_encode`` up at each miss (tests count its calls); thread-safe, errors never cached.
        self._query = functools.lru_cache(QUERY_CACHE_SIZE)(lambda text: self._encode([text])[0])

    def start(self) -> None:
        """Begin loading on a daemon thread; calling again does nothing."""
        with self._start_lock:
            if self.started:
                return
            self.started = True
        threading.Thread(target=self._load, name="lore-model-load", daemon=True).start()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the model is loaded; raise ``ModelUnavailable`` if it cannot be."""
        self.start()
        if not self._loaded.wait(timeout):
            raise ModelUnavailable(
                f"The embedding model {self.model_name} is still loading; try again shortly."
            )
        error = self._error
        if getattr(error, "retry_load", False):  # an outage (an endpoint not up yet): next call loads again
            with self._start_lock:
                if self._error is error:
                    self.started, self._error = False, None
                    self._loaded.clear()
        if isinstance(error, LoreError):
            raise error
        if error is not None:
            raise ModelUnavailable(
                f"The embedding model {self.model_name} could not be loaded ({type(error).__name__}: "
                f"{error}). Run `lore-memory doctor` or see README, Troubleshooting."
            )

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Block until loading has finished or failed; False on timeout (benchmarks, tests)."""
        self.start()
        return self._loaded.wait(timeout)

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Wait for a load in progress: exiting while ONNX Runtime builds its session aborts (SIGABRT)."""
        if self.started:
            self._loaded.wait(timeout)

    @property
    def dimension(self) -> int:
        self.wait()
        return self.engine.dimension

    @property
    def fingerprint(self) -> str:
        self.wait()
        return self.engine.fingerprint

    def encode_documents(self, texts: Sequence[str], *, bulk: bool = False) -> list[np.ndarray]:
        """Embed lesson texts in batches (blocking); ``bulk`` work (imports) uses every core, however few."""
        return list(self._encode(list(texts), bulk=bulk)) if texts else []

    def encode_query(self, text: str) -> np.ndarray:
        """Embed a query (blocking), from the cache when it was seen recently."""
        vector: np.ndarray = self._query(text)
        return vector

    # On a worker thread, so the event loop keeps serving.
    async def aencode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        return await anyio.to_thread.run_sync(self.encode_documents, texts)

    def _encode(self, texts: list[str], *, bulk: bool = False) -> np.ndarray:
        self.wait()
        if bulk or len(texts) >= BULK_TEXTS:
            return self._run_model(texts, bulk=True)
        request: Future[np.ndarray] = Future()
        with self._waiting_lock:
            self._waiting.append((texts, request))
        # Whoever gets the engine encodes everything waiting, so requests queued behind a busy
        # engine share one call; those whose texts went in another's call find them done.
        with self._encode_lock:
            if not request.done():
                with self._waiting_lock:
                    batch, self._waiting = self._waiting, []
                self._encode_group(batch)
        return request.result()

    def _encode_group(self, batch: list[_Request]) -> None:
        try:
            vectors = self._run_model([t for texts, _ in batch for t in texts], bulk=False)
        except BaseException as exc:  # every request of the group gets the failure
            for _, request in batch:
                request.set_exception(exc)
            return
        start = 0
        for texts, request in batch:
            request.set_result(vectors[start : start + len(texts)])
            start += len(texts)

    def _run_model(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        with self._encode_lock:
            vectors = self.engine.encode(texts, bulk=bulk)
        return vectors.astype("float32", copy=False)

    def _load(self) -> None:
        try:
            self.engine.load()
            self.engine.encode(["warm up"], bulk=False)  # first call pays one-off setup
            logger.info("embedding model %s loaded on %s", self.model_name, self.engine.runtime)
        except BaseException as exc:  # reported to every caller by wait()
            logger.error("embedding model %s failed to load: %s", self.model_name, exc)
            self._error = exc
        finally:
            self._loaded.set()


def inference_threads() -> int:
    """Half the cores: torch's all-cores OpenMP spins against others (2 cores: a query 0.4 s, not 20 ms)."""
    return max(1, (os.cpu_count() or 2) // 2)


def onnx_threads() -> int:
    """Half the cores but at least two: ONNX Runtime's idle threads sleep, so on 2 cores one text
    takes both (a lesson 14 -> 10 ms, a query 6.0 -> 4.2 ms; imports as fast, 2026-11-29)."""
    return max(inference_threads(), min(2, os.cpu_count() or 1))
