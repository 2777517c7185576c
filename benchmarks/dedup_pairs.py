"""Which distinct lessons of a synthetic set the dedup rule would merge, without vectors.

Why: a save merges only into a near neighbour (cosine >= 0.9) that it adds nothing
to (``stores.engine.dedup``), so the pairs of *distinct* lessons for which
``adds_nothing`` holds bound the lessons any save order can lose, whatever the
vectors. Counting them needs no embedding, so it runs at 100k in seconds, where
the full harness (``eval_retrieval.py``) first embeds every lesson.
An inverted index finds, for each lesson, the others that hold every one of its
content tokens (a condition the rule needs); only those are checked.

Also counts how many true duplicates (``near_duplicates.restatements``) the rule
accepts against the lesson they restate: the rule's side of "still merges"; whether
the store finds them as candidates is the vectors' side, which the harness measures.

    .venv/bin/python benchmarks/dedup_pairs.py 1000 10000 100000
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import near_duplicates  # noqa: E402

from stores.engine.dedup import adds_nothing, content_sequence  # noqa: E402


def merging_pairs(lessons: list[near_duplicates.FamilyLesson]) -> list[tuple[str, str]]:
    """(new, stored) keys of distinct lessons where the new one would merge into the stored."""
    texts = [(x.problem, x.resolution, None) for x in lessons]
    tokens = [{*content_sequence(x.problem), *content_sequence(x.resolution)} for x in lessons]
    postings: dict[str, set[int]] = {}
    for i, held in enumerate(tokens):
        for token in held:
            postings.setdefault(token, set()).add(i)
    pairs = []
    for i, held in enumerate(tokens):
        lists = sorted((postings[t] for t in held), key=len)
        others = set(lists[0]) if lists else set()
        for posting in lists[1:]:
            if len(others) <= 1:
                break
            others &= posting
        for j in others - {i}:
            if adds_nothing(texts[i], texts[j]):
                pairs.append((lessons[i].key, lessons[j].key))
    return pairs


def main(sizes: list[int], seed: int = 20261123, restatements: int = 400) -> None:
    for size in sizes:
        built = near_duplicates.build(size, 0, seed)
        pairs = merging_pairs(built.lessons)
        by_key = {x.key: x for x in built.lessons}
        accepted: Counter[str] = Counter()
        duplicates = near_duplicates.restatements(built.lessons, restatements, seed)
        for r in duplicates:
            original = by_key[r.of]
            accepted[r.kind] += adds_nothing(
                (r.problem, r.resolution, None), (original.problem, original.resolution, None)
            )
        print(
            f"synthetic-{size}: {len(built.lessons)} distinct lessons; pairs the rule would merge: {len(pairs)}"
            f" (lessons at risk: {len({new for new, _ in pairs})}); true duplicates it accepts: "
            f"{sum(accepted.values())} of {len(duplicates)} {dict(accepted)}"
        )
        for new, stored in pairs[:10]:
            print(f"  {new} -> {stored}: {by_key[new].problem} | {by_key[new].resolution}")


if __name__ == "__main__":
    main([int(size) for size in sys.argv[1:] or ["1000", "10000"]])
