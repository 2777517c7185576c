"""When a new lesson may merge into a stored one: only when it adds nothing.

Merging keeps the stored lesson's text, so a merge that is wrong deletes knowledge:
"Redis client of billing-api times out during failover in staging" and the same
sentence about search-service in production have nearly the same vector but are
two lessons. Vectors therefore only *find* the candidates; the decision is made on
the text, the same way for every backend, every save path and every import:

- the same problem and resolution after normalising case, whitespace and
  punctuation; or
- every content token of the new lesson (words, numbers, identifiers, names, paths,
  versions — everything but a few function words; negations count) already occurs
  in the stored lesson.

Anything else is stored as a new lesson, and its near neighbours are reported
instead, so the agent can choose to update or delete.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# Cosine similarity from which a stored lesson is a merge candidate / reported as similar.
CANDIDATE_SIMILARITY = 0.9
# How many near neighbours a save reports (and checks for a merge).
MAX_SIMILAR = 3

# Words that carry no information of their own. Negations and quantities ("not",
# "never", "all", "no") are deliberately absent: "does not retry" adds to "does retry".
_FUNCTION_WORDS = frozenset(
    """a an the and or but of to in on at by for from with as is are was were be been being
    it its this that these those there here then than so such which who whom whose what
    when where while do does did has have had having will would can could should may might
    must shall i we you he she they them us our your their my me him her""".split()
)

# A token is a run of letters and digits, optionally joined by the punctuation that
# builds identifiers, versions, paths, hosts and addresses ("billing-api",
# "v1.2.3", "/var/log", "user@example.com", "KEY_NAME").
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/:@+#][^\W_]+)*|_+[^\W_]+")
_PUNCT_OR_SPACE = re.compile(r"[\W_]+")


def normalised(text: str | None) -> str:
    """Text compared for sameness: NFKC, case-folded, punctuation and spacing removed."""
    if not text:
        return ""
    return _PUNCT_OR_SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_tokens(*texts: str | None) -> set[str]:
    """The tokens of ``texts`` that carry information, each compound kept whole.

    Compounds are not split into parts: a stored "6.20.8" must not cover a new "20",
    nor a stored "billing-api" a new "billing". A difference in punctuation alone is
    caught by ``normalised`` instead.
    """
    tokens: set[str] = set()
    for text in texts:
        if text:
            tokens.update(m.group() for m in _TOKEN.finditer(unicodedata.normalize("NFKC", text).casefold()))
    return tokens - _FUNCTION_WORDS


def adds_nothing(
    new: tuple[str, str, str | None],
    stored: tuple[str, str, str | None],
) -> bool:
    """Whether a new lesson (problem, resolution, context) carries no information
    that the stored one lacks, so merging it loses nothing."""
    if normalised(new[0]) == normalised(stored[0]) and normalised(new[1]) == normalised(stored[1]):
        return not content_tokens(new[2]) - content_tokens(*stored)
    return not content_tokens(*new) - content_tokens(*stored)


def merge_target(
    new: tuple[str, str, str | None],
    candidates: Iterable[tuple[str, float, tuple[str, str, str | None]]],
) -> str | None:
    """The first candidate (key, similarity, stored text), most similar first, that the
    new lesson adds nothing to; None when every candidate would lose something."""
    for key, _similarity, stored in sorted(candidates, key=lambda c: -c[1]):
        if adds_nothing(new, stored):
            return key
    return None
