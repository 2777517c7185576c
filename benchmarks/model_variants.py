"""What a faster embedding model would buy: the shipped graph with some of its weight products in
int8 (ONNX Runtime's dynamic quantisation: int8 weights per output, activations quantised per call),
timed alone beside the shipped graph, with each variant's cosine to the shipped vectors; ``--tree``
writes a copy of ``lore_mcp`` and ``stores`` serving one variant, to pair with ``paired.py``.

Why: the model is the floor under a save and a recall (``model_floor.py``), and its float32
products already run near the CPU's peak, so only lower precision makes it faster. That moves the
vectors past the 0.999 cosine that lets stores keep theirs (docs/embeddings.md): a store would
need re-embedding and the ranking judging again. This measures whether it would be worth that
(docs/performance.md, twenty-fourth session); nothing here is shipped. Needs the ``dev`` extra.

    python benchmarks/model_variants.py
    python benchmarks/model_variants.py --tree /tmp/lore-int8 --variant all
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-int8 --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
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


def variant_graphs(encoder: OnnxEncoder, work: Path, names: list[str]) -> dict[str, Path]:
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
    products = [n.name for n in graph.graph.node if n.op_type == "MatMul" and weights & set(n.input)]
    out = {}
    for name in names:
        picked = [p for p in products if VARIANTS[name](p)]
        out[name] = work / f"{name}.onnx"
        quantize_dynamic(
            work / "folded.onnx",
            out[name],
            nodes_to_quantize=picked,
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
        print(f"{name}: {len(picked)} of {len(products)} products in int8")
    return out


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
    print("| products in int8 | a lesson | a query | cosine min / mean |\n| --- | ---: | ---: | --- |")
    for name in sessions:
        cosines = np.einsum("ij,ij->i", vectors["shipped"], vectors[name])
        print(
            f"| {name} | {statistics.median(lesson_ms[name]):.2f} ms | {statistics.median(question_ms[name]):.2f} ms "
            f"| {cosines.min():.4f} / {cosines.mean():.4f} |"
        )


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
    args = parser.parse_args()
    names = args.variant or list(VARIANTS)
    if args.tree and len(names) != 1:
        parser.error("--tree needs exactly one --variant")
    encoder = OnnxEncoder(threads=2)
    with tempfile.TemporaryDirectory() as work:
        graphs = variant_graphs(encoder, Path(work), names)
        if args.tree:
            write_tree(graphs[names[0]], args.tree)
        else:
            compare(encoder, graphs)


if __name__ == "__main__":
    main()
