"""Query-sized encodes on ONNX Runtime: the model's own vectors in under half the time.

A recall waits for its query vector, and for a short text torch spends most of its
~15 ms on the overhead of running one operator at a time; ONNX Runtime runs the same
graph with fused operators in about 6.5 ms on one thread (2 cores, all-MiniLM-L6-v2).
The graph is exported from the already loaded model when the model loads (about a
second, on the loading thread, through a temporary file that is removed at once), so
nothing is downloaded or kept on disk and the two can never disagree about the weights. Tokenising stays with
sentence-transformers, so the inputs are exactly the model's.

Only a pipeline this module can reproduce takes the fast path: a transformer, mean
pooling, and optionally normalisation, as the default model is. Any other model, and
any failure to export, stays on torch (``Embedder`` falls back and logs why).
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy arrives with torch on the loading thread, not on the start-up path
    import numpy as np

OPSET = 17


class OnnxEncoder:
    """A sentence-transformers model's transformer on ONNX Runtime, with mean pooling."""

    def __init__(self, model: Any, session: Any, input_names: list[str]) -> None:
        self._model = model
        self._session = session
        self._input_names = input_names

    @classmethod
    def build(cls, model: Any, threads: int) -> OnnxEncoder | None:
        """Export ``model`` (a loaded ``SentenceTransformer``); None when its pipeline is
        not one this module reproduces."""
        if not supported(model):
            return None
        import onnxruntime
        import torch

        features = _prepare(model, ["export this example"])
        names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in features]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle worker threads must not spin: the machine has other work (Postgres, clients).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Through a temporary file, which ONNX Runtime reads itself: held in memory, the
        # graph's ~90 MB would be copied twice more on the way in.
        with tempfile.TemporaryDirectory(prefix="lore-onnx-") as folder:
            path = Path(folder) / "model.onnx"
            with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                # The exporter warns about tracing details that do not apply to a fixed graph.
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    _last_hidden_state(model[0].auto_model, names).eval(),
                    tuple(features[name] for name in names),
                    str(path),
                    input_names=names,
                    output_names=["last_hidden_state"],
                    dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
                    opset_version=OPSET,
                    dynamo=False,
                )
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return cls(model, session, names)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for ``texts``, one padded batch."""
        import numpy as np

        features = _prepare(self._model, texts)
        inputs = {name: features[name].numpy() for name in self._input_names}
        hidden = self._session.run(None, inputs)[0]
        mask = inputs["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def supported(model: Any) -> bool:
    """True for a plain transformer + mean pooling (+ normalisation) pipeline."""
    from sentence_transformers.models import Normalize, Pooling, Transformer

    modules = list(model)
    if not 2 <= len(modules) <= 3 or not isinstance(modules[0], Transformer):
        return False
    if not isinstance(modules[1], Pooling):
        return False
    pooling = modules[1].get_config_dict()
    if pooling.get("pooling_mode") != "mean" or not pooling.get("include_prompt", True):
        return False
    return len(modules) == 2 or isinstance(modules[2], Normalize)


def _prepare(model: Any, texts: list[str]) -> dict[str, Any]:
    prepare = getattr(model, "preprocess", None) or model.tokenize
    return prepare(texts)


def _last_hidden_state(transformer: Any, names: list[str]) -> Any:
    """The transformer as a module of positional inputs (what the exporter traces)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: Any) -> Any:
            return self.transformer(**dict(zip(names, inputs, strict=True))).last_hidden_state

    return LastHiddenState()
