"""The most that holding recall's data in memory could buy: a copy of Lore whose server keeps every
lesson's words and every stored vector in memory, to pair against the code it was copied from.

Why: a SQLite recall at 10k finds the words of the nearest lessons (about 30 us a text not seen
lately) and reads their vectors and the anchor sample's from the file on every call. Storing the
words or caching the vectors would each cost a migration or memory; this measures the ceiling of
both before either is built (docs/performance.md, twenty-fifth session). Nothing of it is shipped.

Run as a script it writes the copy: ``lore_mcp`` and ``stores`` from ``--source`` (the checkout,
or a ``model_variants.py --tree``) and this file as the copy's ``sitecustomize.py``, which Python
imports at start-up in every process with the copy on ``PYTHONPATH`` (``paired.py``'s servers).
Imported so, it makes the word caches unbounded, keeps every vector read, and on the first recall
(one of ``paired.py``'s untimed warm-up calls) reads every lesson's row and vector once. Lessons
saved later are held from their first use, as a cache would hold them. ``--hold words`` or
``--hold vectors`` holds only those (the choice is kept beside it in ``held_in_memory.txt``).

    python benchmarks/held_in_memory.py --tree /tmp/lore-held
    chrt -f 10 python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-held --corpus corpus.db --calls 150 --floor
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHOICE = "held_in_memory.txt"  # beside the tree's sitecustomize.py: what it holds
HOLDS = ("both", "words", "vectors")


def hold(what: str) -> None:
    """Patch the copy's stores, in the server's process, before it serves."""
    from stores.engine import ranking, terms
    from stores.engine.lesson_rules import lexical_text
    from stores.sqlite import lessons, vectors

    if what != "vectors":
        words = functools.lru_cache(maxsize=None)(terms.vocabulary.__wrapped__)
        for module in (terms, ranking):  # ranking imported the name itself
            module.vocabulary = words  # type: ignore[attr-defined]
        terms._keys = functools.lru_cache(maxsize=None)(terms._keys.__wrapped__)

    held: dict[int, Any] = {}
    read = vectors.LocalVectors.vectors

    def held_vectors(conn: Any, keys: Collection[int]) -> dict[int, Any]:
        if missing := [key for key in keys if key not in held]:
            held.update(read(conn, missing))
        return {key: held[key] for key in keys if key in held}

    if what != "words":
        vectors.LocalVectors.vectors = staticmethod(held_vectors)  # type: ignore[method-assign]
    candidates: Callable[..., Any] = lessons.LocalLessons.candidates
    warmed: list[bool] = []

    def warm_then_candidates(self: Any, scope: Any, query: Any, found: Any, vector: Any, k: int) -> Any:
        if not warmed:
            warmed.append(True)
            with self.conns.reading() as conn:
                keys = [pk for (pk,) in conn.execute("SELECT pk FROM lessons")]
                if what != "words":
                    held_vectors(conn, keys)
                if what != "vectors":  # rows decoded only for their words
                    rows = lessons._candidate_rows(conn, scope, (), keys, found.now)
                    terms.prepare([lexical_text(row) for row in rows], self.ranking)
        return candidates(self, scope, query, found, vector, k)

    lessons.LocalLessons.candidates = warm_then_candidates  # type: ignore[method-assign,assignment]


def write_tree(source: Path, tree: Path, what: str) -> None:
    """``lore_mcp`` and ``stores`` from ``source``, and this file as the tree's ``sitecustomize``."""
    import tree_copy  # beside this script; not in the tree, which imports this file as sitecustomize

    tree_copy.write_tree(source, tree, Path(__file__), CHOICE, what)
    print(f"{tree}: Lore from {source}, holding in memory: {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="where to write the copy (must not exist)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the Lore to copy (default: this checkout)")
    parser.add_argument(
        "--hold", choices=HOLDS, default="both", help="every lesson's words, vectors, or both"
    )
    args = parser.parse_args()
    write_tree(args.source, args.tree, args.hold)


if __name__ == "__main__":
    main()
elif __name__ == "sitecustomize":
    hold(Path(__file__).with_name(CHOICE).read_text().strip())
