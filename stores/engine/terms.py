"""A query's terms and which of them a text has: the lexical half of the ranking.

Terms: words but stopwords and words about lessons ("root cause", "fix"); numbers, versions,
identifiers and paths ("6.28.8", "billing-api") whole and by parts. Words match through a light
suffix stripper. Entities: terms with a digit, identifiers, paths and names."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable

from stores.engine.ranking_params import DEFAULT, RankingParams

STEM = 5  # keys sharing their first STEM letters match: a crude stemmer that behaves alike everywhere
# Longer runs of letters, digits and separators are not kept as one term (hashes, blobs).
MAX_COMPOUND_CHARS = 64


def lexical_terms(text: str, max_terms: int | None = None, params: RankingParams = DEFAULT) -> list[str]:
    """Lower-cased, de-duplicated, stopword-free terms in order, at most ``max_terms``: letters and
    digits joined by ``. _ / -``, safe in FTS5 quotes and a tsquery."""
    cap = params.max_terms if max_terms is None else max_terms
    stopwords = _STOPWORDS | _META_STOPWORDS if params.meta_stopwords else _STOPWORDS
    if not params.entity_terms:
        terms = dict.fromkeys(w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in stopwords)
        return list(terms)[:cap]
    found: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        parts = _WORD.findall(token)
        if len(parts) > 1 and len(token) <= MAX_COMPOUND_CHARS:
            found[token] = None
        for word in _parts(parts, params.compound_digits):
            if (len(word) > 1 or word.isdigit()) and word not in stopwords:
                found[word] = None
    return list(found)[:cap]


class Matcher:
    """Which query terms a text has: the same word or key (``_word_key``); with ``entity_terms``
    identifiers match whole and numbers and identifiers only exactly, else words only."""

    def __init__(self, terms: list[str], params: RankingParams) -> None:
        self.legacy = not params.entity_terms
        self.stemming, self.compound_digits = params.stemming, params.compound_digits
        self.termset = frozenset(terms)
        self.keys: dict[str, list[str]] = {}
        for t in terms:
            key = _word_key(t, self.legacy, self.stemming)
            if key is not None:
                self.keys.setdefault(key, []).append(t)
        self.keyset = frozenset(self.keys)

    def found(self, text: str) -> set[str]:
        """The terms ``text`` has."""
        words = vocabulary(text, self.legacy, self.compound_digits)
        found = set(words & self.termset)
        if self.keys:
            for key in _keys(words, self.legacy, self.stemming) & self.keyset:
                found.update(self.keys[key])
        return found


def prepare(texts: Iterable[str], params: RankingParams) -> None:
    """Cache the texts' words for ``Matcher.found`` (recall's word matches, while its query embeds)."""
    matcher = Matcher([], params)  # reads each text's words as any matcher of ``params`` will
    for text in texts:
        matcher.found(text)


@functools.lru_cache(maxsize=4096)
def vocabulary(text: str, legacy: bool, compound_digits: bool) -> frozenset[str]:
    """A text's lower-cased words (and identifiers); cached, as lessons recur across queries."""
    lowered = text.lower()
    if legacy:
        return frozenset(_WORD.findall(lowered))
    words: set[str] = set()
    for token in _TOKEN.findall(lowered):
        if not token.isalnum():  # letters and digits joined by . _ / -
            words.update(_parts(_WORD.findall(token), compound_digits))
            words.add(token)
            words.add(token.lstrip("/"))  # "/etc/x.conf" is "etc/x.conf" too
        else:
            words.add(token)
    return frozenset(words)


@functools.lru_cache(maxsize=4096)
def _keys(words: frozenset[str], legacy: bool, stemming: bool) -> frozenset[str]:
    """A text's word keys; stopwords have none unless legacy ("Ines" would otherwise be "in")."""
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


def _parts(parts: list[str], compound_digits: bool) -> list[str]:
    """An identifier's parts; "3" in "3.8.1" is not 3 unless ``compound_digits``."""
    return parts if len(parts) < 2 or compound_digits else [p for p in parts if not p.isdigit()]


@functools.lru_cache(maxsize=65536)
def _key(word: str) -> str:
    """Suffixes stripped ("queries" -> "queri", "runs" -> "run"), then at most STEM letters;
    short keys can equal a stopword ("Ines" -> "in"), so stopwords are not matched."""
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
    """Lower-cased capitalised words not starting a sentence ("Did Bruno join?" -> bruno)."""
    if not params.names:
        return frozenset()
    words = (m.group(2) for m in _NAME.finditer(text) if m.group(1) is None)
    return frozenset(w.lower() for w in words if w[:1].isupper() and w.lower() not in _STOPWORDS)


def is_entity(term: str, names: Collection[str] = ()) -> bool:
    """Whether a term is an entity: it has a digit, is an identifier or path, or is a name."""
    return any(c.isdigit() for c in term) or bool(_SEPARATOR.search(term)) or term in names


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
# Words about lessons, not subjects: every question asks for "the root cause" or "the fix".
_META_STOPWORDS = frozenset(
    """cause caused causes root fix fixed fixes fixing resolve resolved resolves resolution solve
    solved solution remind happened change changed problem issue""".split()
)
