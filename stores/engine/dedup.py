"""When a new lesson may merge into a stored one: only when it adds nothing.

A wrong merge deletes knowledge: the same Redis timeout in billing-api/staging and search/production
has nearly the same vector but is two lessons. So vectors only *find* candidates; the text decides:
the same problem and resolution once normalised, or each new field restating its stored one in order
(a number keeps its unit, no negation is dropped: "staging to production" does not cover "production
to staging"). Anything else is a new lesson, its near neighbours reported."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import TypeVar

# Cosine similarity from which a stored lesson is a merge candidate / reported as similar.
CANDIDATE_SIMILARITY = 0.9
MAX_SIMILAR = 3  # how many near neighbours a save reports (and checks for a merge)

# Contentless words; negations and quantities are absent: "does not retry" adds to "does retry".
_FUNCTION_WORDS = frozenset(
    """a an the and or but of to in on at by for from with as is are was were be been being
    it its this that these those there here then than so such which who whom whose what
    when where while do does did has have had having will would can could should may might
    must shall i we you he she they them us our your their my me him her""".split()
)
# Tokens a restatement may not drop; "t" is what is left of "n't" ("doesn't" -> "doesn", "t").
_NEGATIONS = frozenset("not no never without cannot nor neither none nothing nobody t".split())

# Letters and digits joined by identifier punctuation ("billing-api", "v1.2.3", "/var/log", "a@b.io", "KEY_NAME").
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/:@+#][^\W_]+)*|_+[^\W_]+")
_PUNCT_OR_SPACE = re.compile(r"[\W_]+")
# A quantity ("5", "1.5"), as opposed to a version or an identifier ("6.20.8", "v2").
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")


def normalised(text: str | None) -> str:
    """Text compared for sameness: NFKC, case-folded, punctuation and spacing removed."""
    return _PUNCT_OR_SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip() if text else ""


def _raw_tokens(text: str | None) -> list[re.Match[str]]:
    return [] if not text else list(_TOKEN.finditer(unicodedata.normalize("NFKC", text).casefold()))


def content_sequence(text: str | None) -> list[str]:
    """``text``'s content tokens in order, compounds whole: "6.20.8" must not cover "20", nor
    "billing-api" "billing" (punctuation-only differences are ``normalised``'s)."""
    return [m.group() for m in _raw_tokens(text) if m.group() not in _FUNCTION_WORDS]


def _blocks(text: str | None) -> list[tuple[str, ...]]:
    """Content tokens, a number joined with the non-function word right after it by spaces only:
    "5 GB" -> ("5", "gb"), "to 5 in /etc" -> ("5",), "30, then" -> ("30",); blocks are contiguous."""
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
    """Whether ``new``'s blocks occur in ``stored`` in order, dropping none of its negations."""
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
    """Whether a new lesson says nothing the stored one lacks, so merging it loses nothing."""
    same_text = normalised(new[0]) == normalised(stored[0]) and normalised(new[1]) == normalised(stored[1])
    if not same_text and not (restates(new[0], stored[0]) and restates(new[1], stored[1])):
        return False
    return not content_sequence(new[2]) or any(restates(new[2], field) for field in stored)


Key = TypeVar("Key")  # what the caller names a candidate by (an id, or a backend row key)


def merge_target(
    new: tuple[str, str, str | None], candidates: Iterable[tuple[Key, float, tuple[str, str, str | None]]]
) -> Key | None:
    """The most similar candidate the new lesson adds nothing to; None if every one would lose."""
    ranked = sorted(candidates, key=lambda c: -c[1])
    return next((key for key, _similarity, stored in ranked if adds_nothing(new, stored)), None)
