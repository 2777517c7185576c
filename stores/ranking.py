"""How recall ranks lessons, shared by every backend so they agree.

A lesson's relevance blends two signals: cosine similarity of its vector to the
query vector, seen from the scope's anchor, and a lexical score, the rarity-weighted
share of the query's terms found in the lesson's text:
``relevance = 0.75 * similarity + 0.25 * lexical``. The full-text index (FTS5 on
SQLite, tsvector on Postgres) only finds lexical candidates; the score itself is
computed here, from the candidates' text and vectors, so it is the same on every
backend.

Terms (``lexical_terms``): the query's words without stopwords and without words
about lessons themselves ("root cause", "fix"); numbers (single digits too),
versions, identifiers and paths ("6.28.8", "billing-api", "/etc/app/x.conf") whole
and by their parts, where a number inside a version is not that number. Words match
through a light suffix stripper ("queries" is "query", "runs" is "running").

Rarity: a term weighs its BM25 inverse document frequency among the recall's
nearest vectors, the lessons the query is choosing between: a word every one of them
shares (the component, the speaker's name) weighs little, the one entity only the
right lesson has weighs most. Entities (terms with a digit, identifiers, paths, and
names: capitalised words inside a sentence) weigh triple. The lexical score is the
weight of the terms a lesson has over the weight of the terms the nearest lessons
have plus the query's entities; a word no nearest lesson has counts, where a lesson
has it, in both that lesson's part and its total, so it raises the score without
saturating it at 1 and a lesson that also has the asked-for environment still
outranks one that lacks it. Counting
among the nearest vectors only, not the full-text matches, keeps both backends'
scores equal: their full-text indexes split and stem words differently, so they find
different full-text candidates.

Redundancy (``redundancy_penalty``): going down the ranking, a candidate with the same
query terms as a better nearest-vector candidate already kept, whose words overlap that
one's by half or more (Jaccard), is a sibling that differs only in what the question
does not ask about (another service, environment, speaker's aside); its score is
multiplied by 0.8, so one answer said six ways does not fill the list and push out the
lesson that is actually asked for. Only nearest candidates demote, so a candidate's
score still depends only on itself and the nearest vectors.

Anchor (``anchor``, ``centred_similarities``): similarity is measured from the mean
of the scope's newest lessons rather than from the origin. Every lesson of a project
shares a direction (the speakers' names and dates of a dialog, a team's templates);
a short lesson is mostly that direction and so looked like every question.

The final score multiplies relevance by three bounded factors, so a strongly
relevant lesson is never buried by weak signals, while ties and near-ties are
decided by freshness, confidence and the crowd:

- decay: ``0.5 + 0.5 * 2 ** (-age_days / half_life_days)`` (1.0 new, 0.75 at one
  half-life, never below 0.5);
- confidence: ``0.5 + 0.5 * confidence``;
- votes: ``1 + 0.2 * tanh((upvotes - downvotes) / 3)`` (between 0.8 and 1.2).

Every part was measured with ``benchmarks/eval_retrieval.py``
(``benchmarks/eval-ablation.json``); each is a switch in ``RankingParams`` so that
evaluation can turn it off, and ``LEGACY`` is the ranking before them.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

# Words whose keys share their first STEM letters match ("rebalance", "rebalancing"):
# a crude stemmer that behaves identically everywhere.
STEM = 5
# At most about this many full-text matches are ranked per recall (see rare_terms).
POSTINGS_BUDGET = 2000
# Longer runs of letters, digits and separators are not kept as one term (hashes, blobs).
MAX_COMPOUND_CHARS = 64
# A scope's anchor is the mean of (at most) this many of its newest live lessons.
ANCHOR_SAMPLE = 128


@dataclass(frozen=True)
class RankingParams:
    """Knobs for the final score; ``half_life_days`` comes from LORE_DECAY_HALF_LIFE_DAYS.

    The other fields are the ranking's parts, one switch each, so the retrieval
    evaluation can measure each on and off; the defaults are the ranking Lore ships.
    """

    half_life_days: float = 30.0
    # Numbers (single digits too), versions, identifiers and paths are query terms.
    entity_terms: bool = True
    # At most this many query terms count (long questions name the telling entity late).
    max_terms: int = 48
    # Words about lessons themselves ("root cause", "fix") are not terms: every lesson
    # has a problem and its resolution, so they tell none apart.
    meta_stopwords: bool = True
    # A number inside a version or path ("3" in "3.8.1") also counts as that number.
    compound_digits: bool = False
    # Words match after a light suffix stripping ("queries" is "query"), not only by prefix.
    stemming: bool = True
    # Terms weigh by their rarity among the candidates (else every term weighs the same).
    rarity: bool = True
    # Rarity is counted among the nearest vectors only (else among all candidates).
    nearest_pool: bool = True
    # Capitalised words inside a sentence are names, and weigh as entities.
    names: bool = True
    # Extra weight of entities: terms with a digit, identifiers, paths, names (1.0: none).
    entity_weight: float = 3.0
    # Vector similarity is measured from the scope's anchor (``anchor``), not the origin.
    centring: bool = True
    vector_weight: float = 0.75
    lexical_weight: float = 0.25
    # Each signal contributes at least this many candidates.
    min_candidates: int = 50
    # Full-text candidates (the lessons with a rare term, ``rare_terms``) are ordered by
    # the query's entities they have too (``candidate_terms``), not by the rare terms
    # alone: among a thousand lessons naming one person, the one that also has the
    # question's number comes first.
    lexical_entities: bool = True
    # Entities that fit the budget find full-text candidates before rarer words do
    # (``rare_terms`` says why).
    entities_first: bool = True
    # Matching lessons (counted or estimated) the full-text candidates' terms may have in
    # all (``rare_terms``).
    postings_budget: int = POSTINGS_BUDGET
    # A word no pooled lesson has adds its weight to the total of the lesson that has it
    # too, so such words raise a score without saturating it at 1.
    open_total: bool = True
    # A candidate that says what a better-ranked one says, differing only in words the
    # query does not ask about (a sibling that names another service or environment), has
    # its score multiplied by this (1.0: no demotion), so one answer does not fill the list.
    redundancy_penalty: float = 0.8
    # Two candidates are that alike when their words overlap at least this much (Jaccard).
    redundancy_overlap: float = 0.5


# The ranking before issue 13: every word the same, no digits or identifiers, 16 terms.
LEGACY = RankingParams(
    centring=False,
    names=False,
    entity_weight=1.0,
    entity_terms=False,
    max_terms=16,
    meta_stopwords=False,
    compound_digits=True,
    stemming=False,
    rarity=False,
    open_total=False,
    redundancy_penalty=1.0,
    lexical_entities=False,
    entities_first=False,
)
DEFAULT = RankingParams()


def candidate_count(limit: int, params: RankingParams = DEFAULT) -> int:
    """How many candidates each signal contributes before the final ordering."""
    return max(params.min_candidates, limit * 5)


def query_entities(terms: list[str], names: Collection[str], params: RankingParams) -> set[str]:
    """The terms ``rare_terms`` takes first (none unless ``entities_first``)."""
    return {t for t in terms if is_entity(t, names)} if params.entities_first else set()


def candidate_terms(
    chosen: list[str], terms: list[str], names: Collection[str], params: RankingParams
) -> list[str]:
    """The terms that order the full-text candidates: the ``chosen`` rare terms, and with
    ``lexical_entities`` every entity of the query (``is_entity``) besides.

    Only the chosen terms decide which lessons are candidates (they bound the work);
    the entities decide which of them come first. Common words are left out of the
    ordering: the full-text index would read all their postings to weigh them.
    """
    if not params.lexical_entities:
        return chosen
    return chosen + [t for t in terms if t not in chosen and is_entity(t, names)]


def rare_terms(
    terms: list[str],
    postings: dict[str, float],
    budget: int = POSTINGS_BUDGET,
    entities: Collection[str] = (),
) -> list[str]:
    """The query terms that find lexical candidates: the rarest first, while their
    postings (matching lessons, counted or estimated) fit ``budget``.

    Common words match a large share of all lessons, and ranking every match costs
    more than the whole rest of recall, so candidates come from the rare terms;
    every term still counts in the score. The first term is always chosen,
    whatever its postings. Terms with no postings (zero or None) are left out.
    ``entities`` that fit the budget come before words however rare the words: a
    question paraphrases a lesson's words but repeats its numbers, identifiers and
    names, so a rare word of the question is often one the lesson does not have.
    """
    present = sorted((t for t in terms if postings.get(t)), key=postings.__getitem__)
    first = [t for t in present if t in entities and postings[t] <= budget]
    chosen: list[str] = []
    total = 0.0
    for term in first + [t for t in present if t not in first]:
        if chosen and total + postings[term] > budget:
            break
        chosen.append(term)
        total += postings[term]
    return chosen


def anchor(sample: np.ndarray) -> np.ndarray:
    """The point a scope's similarities are measured from: the sum of the ``sample``
    vectors (its newest lessons, one row each) over their number plus one.

    The plus one shrinks the anchor towards the origin in small scopes, so a scope of one
    lesson is not centred onto that lesson. Postgres computes the same in SQL (the mean
    of the sample and one zero vector).
    """
    rows = np.asarray(sample, dtype=np.float64)
    return (rows.sum(axis=0) / (rows.shape[0] + 1)).astype(np.float32)


def centred_similarities(query: np.ndarray, vectors: np.ndarray, origin: np.ndarray) -> list[float | None]:
    """Cosine similarity of each row of ``vectors`` to ``query``, both seen from ``origin``
    (None where either is at the origin itself).

    Lessons of one scope share a direction (the same people's names, dates, templates);
    short lessons are mostly that direction, so from the origin they look like every
    query. Seen from the scope's anchor, what a lesson shares with all the others no
    longer counts, only what it says.
    """
    q = np.asarray(query, dtype=np.float32) - origin
    m = np.asarray(vectors, dtype=np.float32) - origin
    norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
    dots = m @ q
    return [float(d / n) if n > 0 else None for d, n in zip(dots, norms, strict=True)]


def relevance(similarity: float | None, lexical: float, params: RankingParams = DEFAULT) -> float:
    """Blend cosine similarity (None when the vector is unknown) and the lexical score (0..1)."""
    vec = max(0.0, min(1.0, similarity)) if similarity is not None and similarity == similarity else 0.0
    return params.vector_weight * vec + params.lexical_weight * lexical


def coverage(terms: list[str], text: str) -> float:
    """Share of the query ``terms`` that occur in ``text``, every term weighing the same."""
    if not terms:
        return 0.0
    found = _Matcher(terms, LEGACY).found(text)
    return sum(1 for t in terms if t in found) / len(terms)


def lexical_scores(
    texts: Sequence[str],
    terms: list[str],
    params: RankingParams = DEFAULT,
    pool: Sequence[bool] | None = None,
    names: Collection[str] = (),
) -> list[float]:
    """Each text's lexical score (0..1) for the query ``terms`` (see the module docstring).

    With ``params.rarity`` a term's weight is ``log(1 + (n - df + 0.5) / (df + 0.5))``
    where ``df`` of the ``n`` texts of the pool hold it (``pool`` marks them; all texts
    when None or when it marks none), times ``params.entity_weight`` for entities
    (terms with a digit, identifiers, paths, and the query's ``names``). A score is
    the weight of the terms a text has over the weight of the terms the pool has and
    of the query's entities. A plain word no pooled text has counts only where it is
    found, so pooled texts score the same whatever else is a candidate: with
    ``params.open_total`` it is added to that text's total as well (its score rises
    towards 1 but keeps telling which pool terms the text lacks), else the score is
    capped at 1. Without rarity every term weighs the same and a score is the share of
    terms found.
    """
    return _lexical(texts, terms, params, pool, names)[0]


def _lexical(
    texts: Sequence[str],
    terms: list[str],
    params: RankingParams,
    pool: Sequence[bool] | None,
    names: Collection[str],
) -> tuple[list[float], list[set[str]]]:
    """``lexical_scores`` and the query terms each text has."""
    if not terms or not texts:
        return [0.0] * len(texts), [set() for _ in texts]
    matcher = _Matcher(terms, params)
    found = [matcher.found(text) for text in texts]
    counted = [f for f, inside in zip(found, pool, strict=True) if inside] if pool is not None else []
    counted = counted or found
    n = len(counted)
    df = Counter(t for f in counted for t in f)
    weights: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        w = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5)) if params.rarity else 1.0
        weights[term] = w * params.entity_weight if is_entity(term, names) else w
    if params.rarity:
        # The query's entities count even where the pool lacks them: a version or a
        # path no near lesson has still tells the lesson that has it from the rest.
        counted_terms = {t for t in weights if df[t] or is_entity(t, names)}
        total = sum(weights[t] for t in counted_terms) or max(weights.values())
        if params.open_total:
            return [
                sum(weights[t] for t in f) / (total + sum(weights[t] for t in f if t not in counted_terms))
                for f in found
            ], found
    else:
        total = sum(weights.values())
    return [min(1.0, sum(weights[t] for t in f) / total) for f in found], found


def best(
    candidates: Sequence[tuple[str, float | None, float, str]],
    terms: list[str],
    limit: int,
    params: RankingParams = DEFAULT,
    nearest: Collection[str] | None = None,
    names: Collection[str] = (),
) -> list[tuple[str, float]]:
    """The ``limit`` best of ``candidates``, each (id, similarity, weight, text), as
    (id, score) best first; scores are rounded to 6 places and ties go to the smaller id.

    Terms' rarity is counted among the ``nearest`` candidates (the ids the vector search
    found; all candidates when None): the full-text candidates differ between backends,
    whose indexes split and stem words differently, the nearest vectors do not.
    """
    pool = [c[0] in nearest for c in candidates] if nearest is not None and params.nearest_pool else None
    lexical, found = _lexical([c[3] for c in candidates], terms, params, pool, names)
    scores = [
        relevance(sim, lex, params) * factor
        for (_, sim, factor, _), lex in zip(candidates, lexical, strict=True)
    ]
    if params.redundancy_penalty < 1.0:
        scores = _demote_redundant(candidates, scores, found, pool, limit, params)
    scored = sorted((-round(score, 6), c[0]) for c, score in zip(candidates, scores, strict=True))
    return [(lesson_id, -negated) for negated, lesson_id in scored[:limit]]


def _demote_redundant(
    candidates: Sequence[tuple[str, float | None, float, str]],
    scores: list[float],
    found: list[set[str]],
    pool: Sequence[bool] | None,
    limit: int,
    params: RankingParams,
) -> list[float]:
    """Scores with redundant candidates demoted (see the module docstring).

    Going down the ranking, a candidate that has the same query terms as a better one
    kept above it, and whose words overlap that one's by at least
    ``params.redundancy_overlap``, is multiplied by ``params.redundancy_penalty``;
    otherwise it is kept, if it is in the ``pool`` (all are when None). Only pooled
    candidates are kept because the others differ between backends: a score must not
    depend on which full-text candidates a backend happened to find.

    The walk stops once ``limit`` candidates are not demoted: every later one scores
    below them whether demoted or not, so no result and no returned score changes.
    """
    order = sorted(range(len(candidates)), key=lambda i: (-round(scores[i], 6), candidates[i][0]))
    kept: dict[frozenset[str], list[frozenset[str]]] = {}  # query terms -> words of kept candidates
    out = list(scores)
    undemoted = 0
    for i in order:
        if undemoted == limit:
            break
        terms = frozenset(found[i])
        words = _vocabulary(candidates[i][3], False, False)
        if any(_overlap(words, other) >= params.redundancy_overlap for other in kept.get(terms, ())):
            out[i] = scores[i] * params.redundancy_penalty
            continue
        undemoted += 1
        if pool is None or pool[i]:
            kept.setdefault(terms, []).append(words)
    return out


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two word sets."""
    shared = len(a & b)
    union = len(a) + len(b) - shared
    return shared / union if union else 1.0


def weight(
    *,
    updated_at: datetime,
    now: datetime,
    confidence: float,
    upvotes: int,
    downvotes: int,
    params: RankingParams,
) -> float:
    """The multiplier applied to relevance: decay x confidence x votes."""
    age_days = max(0.0, (now - updated_at).total_seconds() / 86_400)
    decay = 0.5 + 0.5 * 2 ** (-age_days / params.half_life_days)
    conf = 0.5 + 0.5 * confidence
    votes = 1 + 0.2 * math.tanh((upvotes - downvotes) / 3)
    return decay * conf * votes


def lexical_terms(text: str, max_terms: int | None = None, params: RankingParams = DEFAULT) -> list[str]:
    """Terms of a query worth matching lexically: lower-cased, de-duplicated, no stopwords.

    With ``params.entity_terms``: also single digits, and each identifier, version or
    path as one term before its parts. At most ``max_terms`` (default
    ``params.max_terms``) are kept, in the order they appear. Every term is letters and
    digits, or those joined by ``. _ / -`` (safe inside FTS5 quotes and in a tsquery).
    """
    cap = params.max_terms if max_terms is None else max_terms
    stopwords = _STOPWORDS | _META_STOPWORDS if params.meta_stopwords else _STOPWORDS
    if not params.entity_terms:
        terms = dict.fromkeys(w for w in _words(text) if len(w) > 1 and w not in stopwords)
        return list(terms)[:cap]
    found: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        parts = _WORD.findall(token)
        if len(parts) > 1 and len(token) <= MAX_COMPOUND_CHARS:
            found[token] = None
        for word in _parts(parts, params):
            if (len(word) > 1 or word.isdigit()) and word not in stopwords:
                found[word] = None
    return list(found)[:cap]


class _Matcher:
    """Which of a query's terms a text has.

    The same word, or a word with the same key (``_word_key``): with ``params.stemming``
    an alphabetic word's ``_key`` (suffixes stripped, then the first STEM letters), else
    its first STEM letters. With ``params.entity_terms`` identifiers match whole, and
    numbers and identifiers only exactly; without, words only (the ranking before)."""

    def __init__(self, terms: list[str], params: RankingParams) -> None:
        self.legacy = not params.entity_terms
        self.stemming = params.stemming
        self.compound_digits = params.compound_digits
        self.termset = frozenset(terms)
        self.keys: dict[str, list[str]] = {}
        for t in terms:
            key = _word_key(t, self.legacy, self.stemming)
            if key is not None:
                self.keys.setdefault(key, []).append(t)
        self.keyset = frozenset(self.keys)

    def found(self, text: str) -> set[str]:
        """The terms ``text`` has."""
        words = _vocabulary(text, self.legacy, self.compound_digits)
        found = set(words & self.termset)
        if self.keys:
            for key in _keys(words, self.legacy, self.stemming) & self.keyset:
                found.update(self.keys[key])
        return found


@functools.lru_cache(maxsize=4096)
def _vocabulary(text: str, legacy: bool, compound_digits: bool) -> frozenset[str]:
    """A text's words (and, unless legacy, its identifiers whole), lower-cased. Cached:
    the same lessons come back as candidates of one query after another."""
    lowered = text.lower()
    if legacy:
        return frozenset(_WORD.findall(lowered))
    words: set[str] = set()
    for token in _TOKEN.findall(lowered):
        if not token.isalnum():  # letters and digits joined by . _ / -
            parts = _WORD.findall(token)
            words.update(
                parts if compound_digits or len(parts) < 2 else (p for p in parts if not p.isdigit())
            )
            words.add(token)
            words.add(token.lstrip("/"))  # "/etc/x.conf" is "etc/x.conf" too
        else:
            words.add(token)
    return frozenset(words)


@functools.lru_cache(maxsize=4096)
def _keys(words: frozenset[str], legacy: bool, stemming: bool) -> frozenset[str]:
    """The keys of a text's words (``_vocabulary``). A stopword has none, unless legacy: it
    matches no term, not even by its key ("Ines" would otherwise be "in")."""
    return frozenset(
        key
        for w in words
        if (legacy or w not in _STOPWORDS) and (key := _word_key(w, legacy, stemming)) is not None
    )


def _word_key(word: str, legacy: bool, stemming: bool) -> str | None:
    """What a word matches by besides itself (None: only itself)."""
    if not legacy and not word.isalpha():
        return None  # numbers and identifiers match whole
    if stemming and word.isalpha():
        return _key(word)
    return word[:STEM] if len(word) >= STEM else None


def _parts(parts: list[str], params: RankingParams) -> list[str]:
    """The words of an identifier that count on their own: a number inside a version
    or a path ("3" in "3.8.1") is not that number, unless ``params.compound_digits``."""
    if len(parts) < 2 or params.compound_digits:
        return parts
    return [p for p in parts if not p.isdigit()]


@functools.lru_cache(maxsize=65536)
def _key(word: str) -> str:
    """An alphabetic word's matching key: a light suffix stripper ("queries", "query" ->
    "queri"; "used", "use" -> "us"; "running", "runs" -> "run"), then at most STEM
    letters. Short keys can equal a stopword ("Ines" -> "in"): stopwords are not matched."""
    w = word
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            w = w[: -len(suffix)]
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # "running" -> "run"
            break
    if len(w) >= 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) >= 3 and w.endswith("y"):
        w = w[:-1] + "i"
    return w[:STEM]


def names(text: str, params: RankingParams = DEFAULT) -> frozenset[str]:
    """The query's names, lower-cased: capitalised words that do not start a sentence
    ("Which team did Bruno join?" -> bruno; "QA" too). Empty unless ``params.names``."""
    if not params.names:
        return frozenset()
    found = set()
    for match in _NAME.finditer(text):
        word = match.group(2)
        if match.group(1) is None and word[:1].isupper() and word.lower() not in _STOPWORDS:
            found.add(word.lower())
    return frozenset(found)


def is_entity(term: str, names: Collection[str] = ()) -> bool:
    """Whether a term is an entity: it has a digit, is an identifier or path, or is a name."""
    return any(c.isdigit() for c in term) or bool(_SEPARATOR.search(term)) or term in names


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_WORD = re.compile(r"[^\W_]+")
# A word, or words joined by . _ / - (an identifier, version or path; a path may start with /).
_TOKEN = re.compile(r"/?[^\W_]+(?:[._/-][^\W_]+)*")
_SEPARATOR = re.compile(r"[._/-]")
# A word, and whether it starts the text or a sentence (group 1 is then not None).
_NAME = re.compile(r"(^\s*|[.!?]\s+)?([^\W_]+)")

# Common English words that match nearly every lesson and only slow lexical search down.
_STOPWORDS = frozenset(
    """a an and are as at be but by can do does for from had has have how i if in into is it its me my no not of on or our so that the their them then there
    these they this to was we were what when where which while who why will with you your
    about after again all also any before been being did does doing just more most only other
    out over same some such than too up very get gets got one""".split()
)
# Words about a lesson rather than its subject: questions ask for "the root cause" or "the
# fix" of every kind of problem, and lessons are written as a problem and a resolution.
_META_STOPWORDS = frozenset(
    """cause caused causes root fix fixed fixes fixing resolve resolved resolves resolution solve
    solved solution remind happened change changed problem issue""".split()
)
