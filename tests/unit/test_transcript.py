"""What the stop hook reads in a transcript (issue 33): when something was learned, and when not.

Transcripts here are written as Claude Code writes them (JSON Lines, ``tool_use`` in the
assistant's content, ``tool_result`` with ``is_error`` in the user's); the evaluation set of
whole sessions is ``benchmarks/sets/agent_sessions.py``, judged by ``benchmarks/agent_loop.py``.
"""

from __future__ import annotations

import json
from typing import Any

from lore_mcp.services.transcript import examine, examine_prompt, read_lines


class Transcript:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def _add(self, kind: str, content: Any) -> Transcript:
        self.lines.append(json.dumps({"type": kind, "message": {"role": kind, "content": content}}))
        return self

    def prompt(self, text: str) -> Transcript:
        return self._add("user", text)

    def run(self, command: str, *, failed: bool, tool: str = "Bash") -> Transcript:
        self.n += 1
        use = {"type": "tool_use", "id": f"t{self.n}", "name": tool, "input": {"command": command}}
        self._add("assistant", [use])
        output = "Exit code 1\nboom" if failed else "ok"
        return self._add(
            "user",
            [{"type": "tool_result", "tool_use_id": f"t{self.n}", "content": output, "is_error": failed}],
        )

    def edit(self, *, failed: bool = False) -> Transcript:
        self.n += 1
        use = {"type": "tool_use", "id": f"t{self.n}", "name": "Edit", "input": {"file_path": "a.py"}}
        self._add("assistant", [use])
        result = {
            "type": "tool_result",
            "tool_use_id": f"t{self.n}",
            "content": "String not found",
            "is_error": failed,
        }
        return self._add("user", [result])

    def tool(self, name: str) -> Transcript:
        self.n += 1
        self._add("assistant", [{"type": "tool_use", "id": f"t{self.n}", "name": name, "input": {}}])
        return self._add("user", [{"type": "tool_result", "tool_use_id": f"t{self.n}", "content": "{}"}])


def test_a_command_that_failed_then_passed_is_a_signal() -> None:
    t = Transcript().prompt("fix the tests").run("pytest tests/a.py", failed=True).edit()
    found = examine(t.run("python -m pytest tests/a.py", failed=False).run("pytest -x", failed=False).lines)
    assert found.should_ask and found.signal == "`pytest` failed 1 time(s), then passed"


def test_a_clean_run_a_question_and_an_edit_retry_are_not() -> None:
    assert not examine(Transcript().prompt("add a flag").edit().run("pytest", failed=False).lines).should_ask
    assert not examine(Transcript().prompt("what does this do?").lines).should_ask
    assert not examine(Transcript().prompt("rename x").edit(failed=True).edit().lines).should_ask


def test_searches_that_find_nothing_are_not_failures() -> None:
    t = (
        Transcript()
        .prompt("rename")
        .run("grep -rn old src", failed=True)
        .run("grep -rn new src", failed=False)
    )
    assert not examine(t.lines).should_ask


def test_a_saved_lesson_silences_the_ask() -> None:
    t = (
        Transcript()
        .run("npm test", failed=True)
        .run("npm test", failed=False)
        .tool("mcp__plugin_lore_lore__save_lesson")
    )
    found = examine(t.lines)
    assert found.signal is not None and found.saved and not found.should_ask


def test_a_correction_by_the_person_is_a_signal_but_no_problem_is_not() -> None:
    corrected = (
        Transcript().prompt("fix it").edit().prompt("No, that's the wrong file; use the handler instead")
    )
    assert examine(corrected.lines).signal == "the person corrected the agent"
    thanked = Transcript().prompt("fix it").edit().prompt("No problem, thanks!")
    assert not examine(thanked.lines).should_ask
    before_acting = Transcript().prompt("No tests yet; write them first")
    assert not examine(before_acting.lines).should_ask


def test_a_long_struggle_is_a_signal_even_without_a_fix() -> None:
    t = Transcript().prompt("make the build pass")
    for _ in range(4):
        t.run("make build", failed=True)
    assert examine(t.lines).signal == "a long struggle (4 failed steps)"


def test_skip_and_remember_are_the_persons_say() -> None:
    fixed = (
        Transcript().prompt("fix the flaky test #skip").run("pytest", failed=True).run("pytest", failed=False)
    )
    assert not examine(fixed.lines).should_ask
    clean = Transcript().prompt("#remember we deploy with make ship").run("make ship", failed=False)
    assert examine(clean.lines).should_ask
    assert examine_prompt("please #SKIP this") == (True, False)
    assert examine_prompt("tag#skip is no marker") == (False, False)


def test_lines_that_are_not_entries_are_skipped(tmp_path: Any) -> None:
    t = Transcript().run("cargo test", failed=True).run("cargo test", failed=False)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(["not json", "[1, 2]", '{"type": "summary"}', *t.lines]) + "\n")
    lines, total = read_lines(str(path), 0)
    assert total == 7 and examine(lines).signal is not None
    later, _ = read_lines(str(path), 5)
    assert examine(later).signal is None, "only what came after the last check counts"
    assert read_lines(str(tmp_path / "missing.jsonl"), 0) == ([], 0)


def test_a_failure_the_person_asked_for_is_the_plan() -> None:
    t = Transcript().prompt("Write a failing test for the parser first, then make it pass")
    t.run("pytest tests/test_parser.py", failed=True).edit().run("pytest tests/test_parser.py", failed=False)
    assert not examine(t.lines).should_ask
    for _ in range(4):
        t.run("pytest", failed=True)
    assert examine(t.lines).signal == "a long struggle (5 failed steps)", "a real struggle still counts"
