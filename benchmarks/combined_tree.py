"""A copy of Lore with the four changes that together met issue 37's 0.6x at 10k on SQLite while
the stored vectors stay the shipped model's, each one switchable, to pair with ``paired.py``
(docs/performance.md, twenty-seventh session). Nothing here is shipped:

- ``openvino``: lessons embedded by OpenVINO in bfloat16 (``model_runtimes.py``): cosine 0.99997
  to the shipped vectors, so stores keep theirs and saves merge as before; ``openvino16`` and
  ``openvino32``, the same with inputs padded to a multiple of 16 or 32 tokens (OpenVINO keeps
  state for each shape it runs: fewer shapes, less memory; twenty-eighth session);
- ``query-int8``: questions embedded by the all-int8 graph (``model_variants.py``), on a second
  ONNX Runtime session. Query vectors are never stored, so no store is re-embedded and no merge
  moves; the questions' vectors are at cosine 0.986 or more to the shipped ones;
- ``held``: recall's words and vectors held in memory, unbounded (``held_in_memory.py``);
- ``budget200``: a postings budget of 200 instead of 2,000 (a ranking change, docs/ranking.md).

Why: the twenty-fourth to twenty-sixth sessions measured the int8 graph, OpenVINO, held data and the
budget in other combinations, and none alone met the target; which subset does decides what the
team would have to accept. Needs the ``dev`` extra (the int8 graph is built from the shipped one)
and ``pip install openvino`` for ``openvino``.

Run as a script it writes the copy; imported as the copy's ``sitecustomize.py`` it applies the parts
named in ``combined_parts.txt`` beside it, in every process with the copy on ``PYTHONPATH``.

    python benchmarks/combined_tree.py --tree /tmp/lore-combined
    python benchmarks/combined_tree.py --tree /tmp/lore-no-budget --parts openvino,query-int8,held
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-combined --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import copy
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHOICE = "combined_parts.txt"  # beside the tree's sitecustomize.py: the parts it applies
RUNTIMES = {"openvino": 1, "openvino16": 16, "openvino32": 32}  # each with the tokens it pads to
PARTS = (*RUNTIMES, "query-int8", "held", "budget200")
QUERY_GRAPH = "model_query_int8.onnx"  # in the tree's lore_mcp/model, beside the shipped graph
HELPERS = ("held_in_memory.py", "model_runtimes.py")  # copied into the tree: the patches it imports


def query_int8() -> None:
    """Questions go to a copy of the engine's encoder on the int8 graph (the same tokenizer and
    ``encode``); lessons stay on the engine's own."""
    import onnxruntime

    from lore_mcp.embedding import embedder, onnx

    load = embedder.OnnxEngine.load

    def load_both(self: Any) -> None:
        load(self)
        options = onnxruntime.SessionOptions()  # as the shipped encoder's, less the qdq folding
        options.intra_op_num_threads = embedder.onnx_threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        self.query_encoder = copy.copy(self._encoder)
        self.query_encoder._session = onnxruntime.InferenceSession(
            str(onnx.MODEL_DIR / QUERY_GRAPH), options, providers=["CPUExecutionProvider"]
        )

    init = embedder.Embedder.__init__

    def init_with_queries(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)

        def query(text: str) -> Any:
            self.wait()
            return self.engine.query_encoder.encode([text])[0]

        self._query = functools.lru_cache(embedder.QUERY_CACHE_SIZE)(query)  # as the shipped cache

    embedder.OnnxEngine.load = load_both  # type: ignore[method-assign]
    embedder.Embedder.__init__ = init_with_queries  # type: ignore[method-assign]


def serve(parts: list[str]) -> None:
    """Patch the copy, in each process, before it loads (the budget is already in its source)."""
    import held_in_memory  # the tree's own copies, beside this file
    import model_runtimes

    for part in set(parts) & set(RUNTIMES):
        model_runtimes.serve_openvino("bf16", RUNTIMES[part])
    if "query-int8" in parts:
        query_int8()
    if "held" in parts:
        held_in_memory.hold("both")


def write_tree(source: Path, tree: Path, parts: list[str]) -> None:
    """``source``'s packages in ``tree`` with ``parts``: the int8 graph built, the budget edited."""
    import tree_copy  # beside this script; not in the tree, which imports this file as sitecustomize

    tree_copy.write_tree(source, tree, Path(__file__), CHOICE, " ".join(parts))
    for helper in HELPERS:
        shutil.copyfile(Path(__file__).with_name(helper), tree / helper)
    if "query-int8" in parts:
        import model_variants

        from lore_mcp.embedding.onnx import OnnxEncoder

        with tempfile.TemporaryDirectory() as work:
            graphs = model_variants.variant_graphs(OnnxEncoder(threads=2), Path(work), ["all"])
            shutil.copyfile(graphs["all"], tree / "lore_mcp" / "model" / QUERY_GRAPH)
    if "budget200" in parts:
        params = tree / "stores" / "engine" / "ranking_params.py"
        text = params.read_text()
        if "\nPOSTINGS_BUDGET = 2000\n" not in text:
            raise SystemExit(f"{params}: no POSTINGS_BUDGET = 2000 line to change")
        params.write_text(text.replace("\nPOSTINGS_BUDGET = 2000\n", "\nPOSTINGS_BUDGET = 200\n"))
    print(f"{tree}: Lore from {source} with {', '.join(parts)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="where to write the copy (must not exist)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the Lore to copy (default: this checkout)")
    parser.add_argument(
        "--parts",
        default="openvino,query-int8,held,budget200",
        help=f"comma-separated, of {', '.join(PARTS)}",
    )
    args = parser.parse_args()
    parts = [part for part in args.parts.split(",") if part]
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"unknown parts: {', '.join(unknown)}")
    if len(set(parts) & set(RUNTIMES)) > 1:
        parser.error(f"{', '.join(RUNTIMES)} are three ways of one part: name one")
    write_tree(args.source, args.tree, parts)


if __name__ == "__main__":
    main()
elif __name__ == "sitecustomize":
    serve(Path(__file__).with_name(CHOICE).read_text().split())
