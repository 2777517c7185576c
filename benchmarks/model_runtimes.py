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

``--bucket N`` pads each input to a multiple of N tokens, and ``--shapes`` prints what one process's
memory does over 82 input lengths with that padding (twenty-eighth session).

    python benchmarks/model_runtimes.py
    python benchmarks/model_runtimes.py --bucket 32
    python benchmarks/model_runtimes.py --shapes --bucket 32
    python benchmarks/model_runtimes.py --tree /tmp/lore-ov-bf16 --precision bf16 --bucket 32
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-ov-bf16 --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHOICE = "model_runtime.txt"  # beside the tree's sitecustomize.py: the precision it serves
PRECISIONS = ("f32", "bf16")
PAUSE_S = 0.02  # between calls, as an agent's calls come: long enough for the caches to go cold


class OpenVinoSession:
    """The shipped graph compiled by OpenVINO, answering ``run`` as an ONNX Runtime session does."""

    def __init__(self, graph: Path, precision: str, threads: int, bucket: int = 1) -> None:
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
        self._bucket = bucket

    def run(self, outputs: None, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        # OpenVINO keeps state for each input shape it has run: 82 lengths took a process from 139
        # to 288 MB (``--shapes``). Padding to a multiple of ``bucket`` tokens (masked, so the
        # vectors stay) leaves a few shapes: 179 MB at 16, 165 MB at 32 (twenty-eighth session).
        extra = -feed["input_ids"].shape[1] % self._bucket
        if extra:
            feed = {name: np.pad(value, ((0, 0), (0, extra))) for name, value in feed.items()}
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self._compiled.create_infer_request()
        return [np.array(request.infer(feed)[self._compiled.output(0)])]


class _Options:
    """Takes the settings the shipped encoder gives ONNX Runtime's session options, and keeps them."""

    def add_session_config_entry(self, key: str, value: str) -> None:
        setattr(self, key, value)


def serve_openvino(precision: str, bucket: int = 1) -> None:
    """Patch the copy's encoder, in each process, before it loads: its session becomes OpenVINO's."""
    from lore_mcp.embedding import onnx

    load = onnx.OnnxEncoder._load

    def openvino_load(self: Any, threads: int) -> None:
        # The tokenizer as shipped, with a stand-in for ONNX Runtime while it loads: a session made
        # and dropped left the server 20-80 MB larger, and the library itself about 18 MB
        # (twenty-seventh session). A process that imported the real one gets it back after.
        real = sys.modules.get("onnxruntime")
        sys.modules["onnxruntime"] = stand_in = types.ModuleType("onnxruntime")
        stand_in.SessionOptions = _Options  # type: ignore[attr-defined]
        stand_in.GraphOptimizationLevel = types.SimpleNamespace(ORT_ENABLE_BASIC=None)  # type: ignore[attr-defined]
        stand_in.InferenceSession = lambda *args, **kwargs: None  # type: ignore[attr-defined]
        try:
            load(self, threads)
        finally:
            if real is None:
                del sys.modules["onnxruntime"]
            else:
                sys.modules["onnxruntime"] = real
        self._session = OpenVinoSession(onnx.MODEL_DIR / "model.onnx", precision, threads, bucket)

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


def compare(threads: int, bucket: int, rounds: int = 4) -> None:
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
    if bucket > 1:
        sessions |= {
            f"openvino {p}, {bucket}-token shapes": OpenVinoSession(
                MODEL_DIR / "model.onnx", p, threads, bucket
            )
            for p in PRECISIONS
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


def shape_memory(bucket: int) -> None:
    """This process's resident memory after compiling the graph in bfloat16, and after one text of
    each of 82 lengths (5 to 248 tokens) padded to ``bucket``: OpenVINO keeps state for each shape."""
    from lore_mcp.embedding.onnx import MODEL_DIR

    def resident() -> str:
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        return f"{int(status['VmRSS'].split()[0]) // 1024} MB"

    session = OpenVinoSession(MODEL_DIR / "model.onnx", "bf16", threads=2, bucket=bucket)
    print(f"compiled: {resident()}")
    for length in range(5, 250, 3):
        ids = np.array([[101, *range(2000, 2000 + length), 102]])
        session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    print(f"after 82 lengths padded to {bucket}: {resident()}")


def write_tree(tree: Path, precision: str, bucket: int) -> None:
    """``lore_mcp`` and ``stores`` as checked out, and this file as the tree's ``sitecustomize``."""
    import tree_copy  # beside this script; not in the tree, which imports this file as sitecustomize

    tree_copy.write_tree(ROOT, tree, Path(__file__), CHOICE, f"{precision} {bucket}")
    print(f"{tree}: Lore with its model on OpenVINO, {precision}, inputs padded to {bucket} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads a text (Lore's: 2 on 2 cores)")
    parser.add_argument(
        "--tree", type=Path, help="write a copy of Lore serving OpenVINO here (must not exist)"
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16", help="with --tree")
    parser.add_argument("--bucket", type=int, default=1, help="pad inputs to a multiple of this many tokens")
    parser.add_argument("--shapes", action="store_true", help="memory over many input lengths, then exit")
    args = parser.parse_args()
    if args.shapes:
        shape_memory(args.bucket)
    elif args.tree:
        write_tree(args.tree, args.precision, args.bucket)
    else:
        compare(args.threads, args.bucket)


if __name__ == "__main__":
    main()
elif __name__ == "sitecustomize":
    precision, _, bucket = Path(__file__).with_name(CHOICE).read_text().strip().partition(" ")
    serve_openvino(precision, int(bucket or 1))
