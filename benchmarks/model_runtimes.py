"""What another runtime would buy for the same model: the shipped graph on OpenVINO, in float32 and
in bfloat16, timed beside ONNX Runtime (Lore's encoder as it runs), with each one's cosine to
ONNX Runtime's vectors; ``--tree`` writes a copy of ``lore_mcp`` and ``stores`` serving one, to pair
with ``paired.py``.

Why: a served call finds the model's weights cold. Between calls (a 20 ms pause here, as between
an agent's calls) other work takes the caches, and the next encode reads its 42 MB of float32
weight products again from memory (the likely cause, not traced further); timed back to back, a
query looks 2-4.5 ms faster than it serves. ONNX Runtime has no faster float path on this CPU
(docs/performance.md, twenty-fourth session). OpenVINO keeps the vectors (float32: identical; bfloat16 on a CPU with AMX: cosine
0.99998, inside the 0.999 that lets stores keep theirs), so it tests whether a faster model alone
would meet issue 37's ratios (twenty-sixth session). Nothing of it is shipped: OpenVINO is not
a dependency (``pip install openvino``, about 180 MB installed, against ONNX Runtime's 78 MB).

Run as a script it times or writes the copy; imported as the copy's ``sitecustomize.py`` (Python
imports it at start-up in every process with the copy on ``PYTHONPATH``), it makes the copy's
``OnnxEncoder`` run OpenVINO with the precision kept beside it in ``model_runtime.txt``.

    python benchmarks/model_runtimes.py
    python benchmarks/model_runtimes.py --tree /tmp/lore-ov-bf16 --precision bf16
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-ov-bf16 --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHOICE = "model_runtime.txt"  # beside the tree's sitecustomize.py: the precision it serves
PRECISIONS = ("f32", "bf16")
PAUSE_S = 0.02  # between calls, as an agent's calls come: long enough for the caches to go cold


class OpenVinoSession:
    """The shipped graph compiled by OpenVINO, answering ``run`` as an ONNX Runtime session does."""

    def __init__(self, graph: Path, precision: str, threads: int) -> None:
        import openvino

        # Unpinned: with OpenVINO's default, its threads pinned to cores, a recall took 0.87-0.93x
        # of c1df61a's; unpinned, 0.82-0.86x (docs/performance.md, twenty-sixth session).
        config = {
            "INFERENCE_PRECISION_HINT": precision,
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",
            "ENABLE_CPU_PINNING": False,
        }
        self._compiled = openvino.Core().compile_model(str(graph), "CPU", config)
        self._requests = threading.local()  # a request serves one call at a time: one a thread

    def run(self, outputs: None, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self._compiled.create_infer_request()
        return [np.array(request.infer(feed)[self._compiled.output(0)])]


def serve_openvino(precision: str) -> None:
    """Patch the copy's encoder, in each process, before it loads: its session becomes OpenVINO's."""
    from lore_mcp.embedding import onnx

    load = onnx.OnnxEncoder._load

    def openvino_load(self: Any, threads: int) -> None:
        import onnxruntime

        # The tokenizer as shipped, but no ONNX Runtime session: one made and dropped left the
        # server 20-80 MB larger than an encoder without it (twenty-seventh session).
        session = onnxruntime.InferenceSession
        onnxruntime.InferenceSession = lambda *args, **kwargs: None
        try:
            load(self, threads)
        finally:
            onnxruntime.InferenceSession = session
        self._session = OpenVinoSession(onnx.MODEL_DIR / "model.onnx", precision, threads)

    onnx.OnnxEncoder._load = openvino_load  # type: ignore[method-assign]


def timed(encoder: Any, texts: list[str], pause: bool) -> tuple[float, np.ndarray]:
    """The p50 of encoding each text alone (ms), after ``PAUSE_S`` of spinning if ``pause``."""
    times, vectors = [], []
    for text in texts:
        if pause:  # busy, not asleep: the same cold caches, without the core's wake-up in the figure
            until = time.perf_counter() + PAUSE_S
            while time.perf_counter() < until:
                pass
        start = time.perf_counter()
        vectors.append(encoder.encode([text])[0])
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), np.array(vectors)


def compare(threads: int, rounds: int = 4) -> None:
    """Lessons and questions on each runtime, in alternating turns, back to back and after a pause."""
    from synthetic import Generator

    from lore_mcp.embedding.onnx import MODEL_DIR, OnnxEncoder

    generator = Generator(7)
    texts = {
        "lesson": [f"{x.problem}\n{x.resolution}\n{x.context or ''}" for x in generator.lessons(40)],
        "query": generator.queries(40),
    }
    encoder = OnnxEncoder(threads)
    sessions = {"onnxruntime": encoder._session} | {
        f"openvino {p}": OpenVinoSession(MODEL_DIR / "model.onnx", p, threads) for p in PRECISIONS
    }
    ms: dict[tuple[str, str, bool], list[float]] = {}
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in sessions}
    for turn in range(rounds):
        for name in list(sessions)[:: 1 if turn % 2 == 0 else -1]:
            encoder._session = sessions[name]
            made = []
            for kind, some in texts.items():
                for pause in (False, True):
                    p50, made_now = timed(encoder, some, pause)
                    ms.setdefault((name, kind, pause), []).append(p50)
                made.append(made_now)
            vectors[name] = made
    print(
        f"{threads} thread(s) | a lesson: back to back, after {PAUSE_S * 1000:.0f} ms | a query: the same | cosine min / mean"
    )
    reference = np.vstack(vectors["onnxruntime"])
    for name in sessions:
        cells = [
            f"{statistics.median(ms[(name, kind, pause)]):.2f}" for kind in texts for pause in (False, True)
        ]
        cosines = np.einsum("ij,ij->i", reference, np.vstack(vectors[name]))
        print(
            f"{name} | {cells[0]}, {cells[1]} ms | {cells[2]}, {cells[3]} ms | {cosines.min():.6f} / {cosines.mean():.6f}"
        )


def write_tree(tree: Path, precision: str) -> None:
    """``lore_mcp`` and ``stores`` as checked out, and this file as the tree's ``sitecustomize``."""
    import tree_copy  # beside this script; not in the tree, which imports this file as sitecustomize

    tree_copy.write_tree(ROOT, tree, Path(__file__), CHOICE, precision)
    print(f"{tree}: Lore with its model on OpenVINO, {precision}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads a text (Lore's: 2 on 2 cores)")
    parser.add_argument(
        "--tree", type=Path, help="write a copy of Lore serving OpenVINO here (must not exist)"
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16", help="with --tree")
    args = parser.parse_args()
    if args.tree:
        write_tree(args.tree, args.precision)
    else:
        compare(args.threads)


if __name__ == "__main__":
    main()
elif __name__ == "sitecustomize":
    serve_openvino(Path(__file__).with_name(CHOICE).read_text().strip())
