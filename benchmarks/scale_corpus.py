"""A large corpus, fast: N lessons across many projects of skewed sizes, as an export file
that carries its vectors (``lore-memory export --with-vectors``), so it loads through Lore's
own import path without the model.

Why derived vectors: the model embeds about 100-300 texts a second on 2 cores, so a million
would take hours. The model embeds a sample (``sample`` lessons, drawn like the rest); every
other lesson's vector is a random convex mix of three sample vectors of its own topic plus
Gaussian noise, normalised. Such vectors sit where the model puts that topic's lessons, spread
as widely (``noise`` is set so that a derived vector's similarity to its topic's centre matches
the sample's), and no two are near-duplicates. ``check`` compares the two: how often a query's
nearest lesson is of the query's topic, among model-made vectors alone and among all.

Projects: one of 1 % of the rows (``p-1pct``), one of 0.01 % (at least 5 rows, ``p-tiny``),
and the rest over ``projects`` others whose sizes fall off as 1/rank (Zipf), the largest first.

    .venv/bin/python benchmarks/scale_corpus.py 100000 /tmp/corpus-100k.jsonl
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from synthetic import Generator

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.embedding.identity import running_model
from lore_mcp.services.lessons import embedding_text
from stores.ids import new_id

TINY, ONE_PERCENT = "p-tiny", "p-1pct"


def project_sizes(n: int, projects: int = 200) -> dict[str, int]:
    """Rows per project: 1 %, 0.01 % (at least 5), and Zipf over the others."""
    tiny, one = max(5, n // 10_000), max(1, n // 100)
    rest = n - tiny - one
    weights = 1 / np.arange(1, projects + 1)
    sizes = np.floor(weights / weights.sum() * rest).astype(int)
    sizes[0] += rest - sizes.sum()
    return {TINY: tiny, ONE_PERCENT: one, **{f"p-{i:03d}": int(s) for i, s in enumerate(sizes) if s}}


class Corpus:
    """Lessons with topics, the model-made sample's vectors by topic, and derived vectors."""

    def __init__(self, embedder: Embedder, *, seed: int = 7, sample: int = 2000, noise: float = 0.035):
        self.embedder = embedder
        self.rng = np.random.default_rng(seed)
        self.generator = Generator(seed)
        self.noise = noise
        started = time.perf_counter()
        drawn = [self.generator.topic_lesson() for _ in range(sample)]
        vectors = embedder.encode_documents([embedding_text(x.problem, x.resolution) for _, x in drawn])
        self.sample = [(topic, lesson, vec) for (topic, lesson), vec in zip(drawn, vectors, strict=True)]
        self.by_topic: dict[str, np.ndarray] = {}
        for topic in {t for t, _ in drawn}:
            self.by_topic[topic] = np.stack([v for t, _, v in self.sample if t == topic])
        self.embed_s = time.perf_counter() - started

    def derived(self, topic: str) -> np.ndarray:
        pool = self.by_topic[topic]
        mix = self.rng.dirichlet(np.ones(3))
        vec = mix @ pool[self.rng.integers(0, len(pool), 3)]
        vec = vec + self.rng.normal(0, self.noise, vec.shape[0])
        return (vec / np.linalg.norm(vec)).astype(np.float32)

    def lessons(self, n: int) -> Iterator[tuple[str, Any, np.ndarray]]:
        """``n`` (topic, lesson, vector): the sample first, then derived ones."""
        yield from self.sample[:n]
        for _ in range(n - len(self.sample)):
            topic, lesson = self.generator.topic_lesson()
            yield topic, lesson, self.derived(topic)


def write(path: Path, n: int, corpus: Corpus) -> dict[str, int]:
    """The export file: a model line, then every lesson with its project and vector (projects
    interleaved, as a team's memory grows)."""
    sizes = project_sizes(n)
    order = np.repeat(np.arange(len(sizes)), list(sizes.values()))
    corpus.rng.shuffle(order)
    names = list(sizes)
    model = running_model(corpus.embedder)
    with path.open("w") as f:
        f.write(json.dumps({"type": "model", **json.loads(model.to_json())}) + "\n")
        for slot, (_, lesson, vec) in zip(order, corpus.lessons(n), strict=True):
            line = {
                "type": "lesson",
                "id": new_id(),
                "project": names[slot],
                **lesson.arguments(),
                "vector": base64.b64encode(vec.astype("<f4").tobytes()).decode(),
            }
            f.write(json.dumps(line) + "\n")
    return sizes


def check(corpus: Corpus, queries: int = 200, derived: int = 20_000) -> dict[str, float]:
    """Topic precision@1 of model-embedded queries: among the model-made sample alone, and
    among the sample plus ``derived`` derived vectors. Close numbers: the derived vectors
    neither crowd out nor drift from the real ones."""
    from synthetic import QUERY_TEMPLATES

    sample_topics = [t for t, _, _ in corpus.sample]
    sample = np.stack([v for _, _, v in corpus.sample])
    extra_topics = [corpus.generator.topic_lesson()[0] for _ in range(derived)]
    extra = np.stack([corpus.derived(t) for t in extra_topics])
    asked: list[tuple[str, str]] = []
    while len(asked) < queries:
        topic, slots = corpus.generator._slots()
        asked.append((topic, corpus.generator.rng.choice(QUERY_TEMPLATES).format(**slots)))
    qs = np.stack([corpus.embedder.encode_query(text) for _, text in asked])
    alone = [sample_topics[i] for i in np.argmax(qs @ sample.T, axis=1)]
    both_topics = sample_topics + extra_topics
    mixed = [both_topics[i] for i in np.argmax(qs @ np.vstack([sample, extra]).T, axis=1)]
    centre = {t: v.mean(axis=0) for t, v in corpus.by_topic.items()}
    return {
        "topic_precision_at_1_sample_only": float(
            np.mean([a == t for a, (t, _) in zip(alone, asked, strict=True)])
        ),
        "topic_precision_at_1_with_derived": float(
            np.mean([m == t for m, (t, _) in zip(mixed, asked, strict=True)])
        ),
        "similarity_to_topic_centre_sample": float(np.mean([v @ centre[t] for t, _, v in corpus.sample])),
        "similarity_to_topic_centre_derived": float(
            np.mean([v @ centre[t] for t, v in zip(extra_topics, extra, strict=True)])
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="print the quality check as JSON")
    args = parser.parse_args()
    corpus = Corpus(Embedder(), sample=args.sample)
    started = time.perf_counter()
    write(args.out, args.n, corpus)
    print(
        f"{args.n} lessons in {time.perf_counter() - started:.1f} s (+{corpus.embed_s:.1f} s embedding the sample)",
        file=sys.stderr,
    )
    if args.check:
        print(json.dumps(check(corpus), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
