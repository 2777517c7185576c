"""Whether a transcript stretch taught something (stop hook; never stored), by signals a person sees:
a fail-then-pass, a correction, a long struggle; a failure asked for (test first) is the plan. No
ask after ``save_lesson`` or ``#skip``; ``#remember`` always asks. Odd lines are skipped, never fatal."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# Failed steps in one stretch that make a long struggle even when nothing passed afterwards.
STRUGGLE_FAILURES = 4
# What a failed command's output says when the client did not mark it as an error.
_FAILED_OUTPUT = re.compile(r"^(Exit code [1-9]\d*|Error:|error:|Traceback \(most recent call last\))", re.M)
# A person correcting the agent: at the start of the prompt, or a plain "that's wrong".
_CORRECTION = re.compile(
    r"^\s*(no\b|nope\b|wrong\b|stop\b|don'?t\b|do not\b|not like that|that'?s not|that is not|"
    r"that didn'?t|that did not|you broke|it'?s still|still (fails|failing|broken|wrong)|instead\b|"
    r"actually,|revert\b|undo\b)"
    r"|\b(that'?s wrong|that is wrong|not what i (asked|meant|wanted)|you should have|i said)\b",
    re.I,
)
# "no problem", "no worries", "no thanks": a "no" that corrects nothing.
_NOT_CORRECTION = re.compile(r"^\s*no (problem|worries|thanks|need|rush)\b", re.I)
# Programs whose exit status 1 answers a question ("no match", "differs") rather than failing.
_ANSWERING = frozenset({"grep", "rg", "egrep", "fgrep", "test", "[", "diff", "cmp", "find", "git diff"})
# A failure first was asked for (test-driven): fail-then-pass is the plan, not a struggle.
_EXPECTED_FAILURE = re.compile(
    r"\b(failing tests?|tests? (first|that fails?)|test[- ]first|tdd|red[- ]green|should fail first)\b", re.I
)
_SKIP = re.compile(r"(?<!\S)#skip\b", re.I)
_REMEMBER = re.compile(r"(?<!\S)#remember\b", re.I)


@dataclass(frozen=True)
class Step:
    """A tool call's outcome; a later success of the same ``family`` fixes an earlier failure."""

    tool: str
    family: str
    failed: bool
    command: bool = False


@dataclass
class Finding:
    """What a stretch of transcript shows (``signal``: why to ask, in a few words, or None)."""

    signal: str | None = None
    saved: bool = False
    skip: bool = False
    remember: bool = False

    @property
    def should_ask(self) -> bool:
        """Ask unless the person said ``#skip`` or a lesson was saved; ``#remember`` asks even without a signal."""
        return not (self.skip or self.saved) and (self.remember or self.signal is not None)


def read_lines(path: str, start: int) -> tuple[list[str], int]:
    """The transcript's lines from line ``start`` on, and its line count (0 when unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return [], 0
    if start > len(lines):  # a new or rewritten transcript: read it whole
        start = 0
    return lines[start:], len(lines)


def entries(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def examine(lines: Iterable[str]) -> Finding:
    """The signals of one stretch of transcript (the lines since the last check)."""
    finding = Finding()
    calls: dict[str, tuple[str, str | None]] = {}  # tool_use id -> (tool, command family)
    steps: list[Step] = []
    acted = corrected = expected = False
    for entry in entries(lines):
        for kind, block in _blocks(entry):
            if kind == "prompt":
                text = str(block)
                finding.skip |= bool(_SKIP.search(text))
                finding.remember |= bool(_REMEMBER.search(text))
                expected |= bool(_EXPECTED_FAILURE.search(text))
                corrected |= acted and bool(_CORRECTION.search(text)) and not _NOT_CORRECTION.search(text)
            elif kind == "tool_use":
                name = str(block.get("name", ""))
                finding.saved |= name.endswith("save_lesson")
                calls[str(block.get("id", ""))] = (name, _family(block.get("input")))
                acted = True
            elif kind == "tool_result":
                tool, family = calls.get(str(block.get("tool_use_id", "")), ("", None))
                failed = _failed(block) and family not in _ANSWERING
                steps.append(Step(tool, family or tool, failed, command=family is not None))
    finding.signal = _signal(steps, corrected, expected)
    return finding


def _signal(steps: list[Step], corrected: bool, expected: bool = False) -> str | None:
    failed_families: dict[str, int] = {}
    fixed: list[str] = []
    # Only commands count: a file edit that missed its text and then matched taught nothing.
    for step in (s for s in steps if s.command):
        if step.failed:
            failed_families[step.family] = failed_families.get(step.family, 0) + 1
        elif step.family in failed_families and step.family not in fixed:
            fixed.append(step.family)
    failures = sum(failed_families.values())
    if fixed and not expected:
        return f"`{fixed[0]}` failed {failed_families[fixed[0]]} time(s), then passed"
    if corrected:
        return "the person corrected the agent"
    return f"a long struggle ({failures} failed steps)" if failures >= STRUGGLE_FAILURES else None


def _blocks(entry: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(kind, block) of an entry: the person's ``prompt`` text, ``tool_use`` and ``tool_result``."""
    message = entry.get("message")
    if entry.get("isMeta") or entry.get("isCompactSummary") or not isinstance(message, dict):
        return
    role = message.get("role") or entry.get("type")
    content = message.get("content")
    if isinstance(content, str):  # a prompt as plain text: one text block
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return
    blocks = [block for block in content if isinstance(block, dict)]
    yield from ((b["type"], b) for b in blocks if b.get("type") in ("tool_use", "tool_result"))
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    if role == "user" and texts and not any(b.get("type") == "tool_result" for b in blocks):
        text = "\n".join(texts)
        if not text.lstrip().startswith("<"):  # slash commands and hook output come tagged
            yield "prompt", text


def _failed(block: dict[str, Any]) -> bool:
    if block.get("is_error"):
        return True
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return isinstance(content, str) and bool(_FAILED_OUTPUT.search(content[:2000]))


def _family(arguments: object) -> str | None:
    """A command's program and, for runners, first non-flag argument (``npm test``); None."""
    command = arguments.get("command") if isinstance(arguments, dict) else None
    if not isinstance(command, str) or not command.strip():
        return None
    try:
        words = shlex.split(command.split("&&")[-1].split("|")[0])
    except ValueError:
        words = command.split()
    words = [w for w in words if "=" not in w.split("/")[0] or w.startswith("-")]  # no VAR=value
    plain = [w for w in words if not w.startswith("-")]
    if not plain:
        return None
    program = plain[0].rsplit("/", 1)[-1]
    return f"{program} {plain[1]}" if len(plain) > 1 and program in _RUNNERS else program


# Programs whose first argument says what ran (``npm test`` and ``npm run build`` differ).
_RUNNERS = frozenset("npm npx yarn pnpm python python3 uv cargo go make git docker poetry".split())


def examine_prompt(prompt: str) -> tuple[bool, bool]:
    """Whether one prompt says ``#skip`` and whether it says ``#remember``."""
    return bool(_SKIP.search(prompt)), bool(_REMEMBER.search(prompt))
