"""When a new lesson may merge into a stored one: only when it adds nothing.

Merging keeps the stored lesson's text, so a merge that is wrong deletes knowledge:
"Redis client of billing-api times out during failover in staging" and the same
sentence about search-service in production have nearly the same vector but are
two lessons. Vectors therefore only *find* the candidates; the decision is made on
the text, the same way for every backend, every save path and every import:

- the same problem and resolution after normalising case, whitespace and
  punctuation (and a context that restates something stored); or
- each field of the new lesson restates the same field of the stored one and says
  less: its content tokens (words, numbers, identifiers, names, paths, versions —
  everything but a few function words) occur in the stored field in the same order,
  a number keeps the unit written right after it ("5 GB" does not cover "5 nodes"),
  and no negation is dropped. A new context restates any one stored field.

Word position matters because a token set does not: "leaks errors in development"
is not covered by a sibling whose resolution says "mask errors outside
development", nor "moved from staging to production" by "from production to
staging". Anything else is stored as a new lesson, and its near neighbours are
reported instead, so the agent can choose to update or delete.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import TypeVar

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
# Tokens that turn a statement around; a restatement may not drop one. "t" is what is
# left of "n't" ("doesn't" -> "doesn", "t").
_NEGATIONS = frozenset("not no never without cannot nor neither none nothing nobody t".split())

# A token is a run of letters and digits, optionally joined by the punctuation that
# builds identifiers, versions, paths, hosts and addresses ("billing-api",
# "v1.2.3", "/var/log", "user@example.com", "KEY_NAME").
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/:@+#][^\W_]+)*|_+[^\W_]+")
_PUNCT_OR_SPACE = re.compile(r"[\W_]+")
# A quantity ("5", "1.5"), as opposed to a version or an identifier ("6.20.8", "v2").
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")


def normalised(text: str | None) -> str:
    """Text compared for sameness: NFKC, case-folded, punctuation and spacing removed."""
    if not text:
        return ""
    return _PUNCT_OR_SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _raw_tokens(text: str | None) -> list[re.Match[str]]:
    if not text:
        return []
    return list(_TOKEN.finditer(unicodedata.normalize("NFKC", text).casefold()))


def content_sequence(text: str | None) -> list[str]:
    """The tokens of ``text`` that carry information, in order, each compound kept whole.

    Compounds are not split into parts: a stored "6.20.8" must not cover a new "20",
    nor a stored "billing-api" a new "billing". A difference in punctuation alone is
    caught by ``normalised`` instead.
    """
    return [m.group() for m in _raw_tokens(text) if m.group() not in _FUNCTION_WORDS]


def content_tokens(*texts: str | None) -> set[str]:
    """The distinct content tokens of ``texts`` (see ``content_sequence``)."""
    return {token for text in texts for token in content_sequence(text)}


def _blocks(text: str | None) -> list[tuple[str, ...]]:
    """``text``'s content tokens in order, a number joined with its unit.

    The unit is the word written right after the number, separated only by spaces, and
    not a function word: "5 GB" -> ("5", "gb"), but "to 5 in /etc" -> ("5",) and
    "30, then" -> ("30",). A block must occur contiguously in the stored field.
    """
    tokens = _raw_tokens(text)
    string = unicodedata.normalize("NFKC", text or "").casefold()
    blocks: list[tuple[str, ...]] = []
    skip = False
    for i, match in enumerate(tokens):
        token = match.group()
        if skip or token in _FUNCTION_WORDS:
            skip = False
            continue
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if (
            following is not None
            and _NUMBER.fullmatch(token)
            and following.group() not in _FUNCTION_WORDS
            and _SPACES.fullmatch(string[match.end() : following.start()])
        ):
            blocks.append((token, following.group()))
            skip = True
        else:
            blocks.append((token,))
    return blocks


def restates(new: str | None, stored: str | None) -> bool:
    """Whether the field ``new`` says nothing that the field ``stored`` does not: its
    content tokens (numbers with their units) occur in ``stored`` in the same order,
    and ``stored`` holds no negation that ``new`` dropped."""
    sequence = content_sequence(stored)
    position = 0
    for block in _blocks(new):
        width = len(block)
        while position + width <= len(sequence) and tuple(sequence[position : position + width]) != block:
            position += 1
        if position + width > len(sequence):
            return False
        position += width
    negations = [t for t in sequence if t in _NEGATIONS]
    return len(negations) == sum(1 for t in content_sequence(new) if t in _NEGATIONS)


def adds_nothing(new: tuple[str, str, str | None], stored: tuple[str, str, str | None]) -> bool:
    """Whether a new lesson (problem, resolution, context) carries no information
    that the stored one lacks, so merging it loses nothing."""
    same_text = normalised(new[0]) == normalised(stored[0]) and normalised(new[1]) == normalised(stored[1])
    if not same_text and not (restates(new[0], stored[0]) and restates(new[1], stored[1])):
        return False
    return not content_sequence(new[2]) or any(restates(new[2], field) for field in stored)


# What the caller names a candidate by (an id, or a backend row key).
Key = TypeVar("Key")


def merge_target(
    new: tuple[str, str, str | None], candidates: Iterable[tuple[Key, float, tuple[str, str, str | None]]]
) -> Key | None:
    """The first candidate (key, similarity, stored text), most similar first, that the
    new lesson adds nothing to; None when every candidate would lose something."""
    for key, _similarity, stored in sorted(candidates, key=lambda c: -c[1]):
        if adds_nothing(new, stored):
            return key
    return None
