"""Property-based tests: every tool, called with arguments drawn from its own published input
schema and salted with hostile values, on both backends at once, through a real MCP client.

For each call the properties are:

- the answer is a result with structured content, or a tool error ``CODE: sentence`` whose
  code is one of ``lore_mcp.errors.CODES`` and is not ``INTERNAL_ERROR`` (client input must
  never reach the "unexpected" path), and it comes within ``CALL_SECONDS``;
- an error leaves the store exactly as it was (a fingerprint of every lesson, vote, table,
  row, commit and key, and raw row counts, is the same before and after);
- SQLite and Postgres agree: the same call on the same state gives the same outcome (ok or
  the same code), and the same result once ids, times and scores are set aside;
- no secret survives: every text field is sometimes given a generated secret of one of the
  kinds Lore redacts (``tests.support.secrets``: amid prose, split by an invisible character
  or in fullwidth letters), and that secret is then in neither the store nor the answer.

Each example starts from the same seeded state on both backends: lessons in two projects
(one upvoted), two tables with rows of every column type, a commit history, an org with
keys. The embedding model is replaced by hash-based unit vectors (``HashEngine``):
retrieval quality is not the point here, and the real model would cost minutes.

Three kinds of call are made: each tool alone with generated arguments; generated sequences
that create a table and then insert, update, delete, query and revert on it (so plans and
filters meet data of every column type, past the argument checks); mixed sequences of any
tools. ``KNOWN_HOSTILE`` adds the inputs that broke a property before, every run.

Bounded for CI: ``LORE_FUZZ_EXAMPLES`` examples per tool (default 25) with a fixed seed and
no shrinking (about 90 s on two otherwise idle cores). ``benchmarks/fuzz.py`` runs the same tests
longer, with random seeds, shrinking and a failure database.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from tests.support.fuzz_arguments import arguments_for
from tests.support.fuzz_pair import Pair
from tests.support.fuzz_settings import TOOLS, fuzz_settings
from tests.support.fuzz_values import structured_scenario
from tests.support.schema_strategies import (
    SchemaStrategies,
)

# --- the tests -----------------------------------------------------------------------------------


def test_every_listed_tool_is_fuzzed(pair: Pair) -> None:
    """A tool added later is covered without anyone writing a strategy for it."""
    assert sorted(pair.schemas) == TOOLS
    for name, schema in pair.schemas.items():
        # Every keyword of every listed schema is understood (the translator raises otherwise),
        # and strict arguments carry every required property.
        once = settings(database=None, phases=[Phase.generate], max_examples=1)
        drawn = find(SchemaStrategies(schema).arguments(), lambda args: True, settings=once)
        assert set(schema.get("required", ())) <= set(drawn), name


@pytest.mark.parametrize("tool", TOOLS)
@fuzz_settings()
@given(data=st.data())
def test_any_arguments_get_a_result_or_a_coded_error_that_changes_nothing_on_both_backends(
    pair: Pair, tool: str, data: st.DataObject
) -> None:
    arguments = data.draw(arguments_for(tool, pair.schemas[tool]), label=f"{tool} arguments")
    pair.run([(tool, arguments)])


@fuzz_settings()
@given(data=st.data())
def test_tables_made_and_worked_on_by_generated_plans_keep_both_backends_in_step(
    pair: Pair, data: st.DataObject
) -> None:
    pair.run(data.draw(structured_scenario(), label="calls"))


@fuzz_settings()
@given(data=st.data())
def test_mixed_call_sequences_keep_both_backends_in_step(pair: Pair, data: st.DataObject) -> None:
    any_call = st.sampled_from(TOOLS).flatmap(
        lambda tool: arguments_for(tool, pair.schemas[tool]).map(lambda args: (tool, args))
    )
    pair.run(data.draw(st.lists(any_call, min_size=2, max_size=6), label="calls"))
