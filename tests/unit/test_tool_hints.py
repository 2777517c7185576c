"""Every tool says what it is for people and directories: a title and all four hints, set deliberately."""

from __future__ import annotations

from lore_mcp.tools.registry import TOOLS


def test_every_tool_has_a_title_and_every_hint() -> None:
    titles = [spec.title for spec in TOOLS]
    assert all(titles) and len(set(titles)) == len(titles)
    for spec in TOOLS:
        hints = spec.annotations
        assert hints.title == spec.title, spec.name
        for hint in (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ):
            assert isinstance(hint, bool), spec.name
        # A read-only tool destroys nothing; no tool reaches beyond Lore's own store.
        assert not (hints.read_only_hint and hints.destructive_hint), spec.name
        assert hints.open_world_hint is False, spec.name


def test_the_hints_say_what_each_kind_of_call_does() -> None:
    hints = {spec.name: spec.annotations for spec in TOOLS}
    assert hints["recall_lessons"].read_only_hint and hints["recall_lessons"].idempotent_hint
    assert hints["save_lesson"].read_only_hint is False and hints["save_lesson"].destructive_hint is False
    assert hints["delete_lesson"].destructive_hint and hints["delete_lesson"].idempotent_hint
    assert hints["apply"].destructive_hint and hints["apply"].idempotent_hint is False
    assert hints["import_lessons"].idempotent_hint and hints["import_lessons"].destructive_hint is False
