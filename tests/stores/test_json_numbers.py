"""JSON written for Postgres ``jsonb`` reads back as it was written, numbers' types included.

``jsonb`` stores numbers as ``numeric`` and prints a float written as ``1e+16`` back as
``10000000000000000``, an integer to any JSON reader; ``stores.engine.json_numbers.jsonb_text``
writes such floats out in full. These round-trip values through a real Postgres and
compare them with their types, as the tools' results are compared between backends.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stores.engine.json_numbers import jsonb_text, without_negative_zero


@pytest.fixture(scope="module")
def connection(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def through_jsonb(conn: psycopg.Connection[Any], value: Any) -> Any:
    """``value`` written as ``jsonb_text`` into a jsonb value and read back by psycopg."""
    row = conn.execute("SELECT CAST(%s AS jsonb)", (jsonb_text(value),)).fetchone()
    assert row is not None
    return row[0]


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``1.0`` is not ``1``), and zeros' signs."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


FLOATS_WITH_EXPONENTS = [1e16, -1e16, 1.5e300, 1e308, -1.7976931348623157e308, 123456789012345680.0]


@pytest.mark.parametrize("value", FLOATS_WITH_EXPONENTS)
def test_a_float_json_dumps_writes_with_an_exponent_comes_back_a_float(
    connection: psycopg.Connection[Any], value: float
) -> None:
    assert "e+" in json.dumps(value)  # the case jsonb would turn into an integer
    assert same(through_jsonb(connection, {"v": [value]}), {"v": [value]})


def test_text_that_looks_like_an_exponent_and_integers_are_left_alone(
    connection: psycopg.Connection[Any],
) -> None:
    value = {"1e+16": "2e+5 and 1e+16", "n": 10**16, "f": 1e16, "t": True, "z": None, "s": [1, 2.5]}
    assert same(through_jsonb(connection, value), value)


def test_keys_that_are_not_text_are_written_as_json_dumps_writes_them() -> None:
    value = {7: 1e16, False: "x", None: 2.0, 2.5: [3]}
    written = json.loads(jsonb_text(value))
    assert same(written, {"7": 1e16, "false": "x", "null": 2.0, "2.5": [3]})
    assert same(written, json.loads(json.dumps(value)))


def test_without_negative_zero_changes_only_negative_zeros() -> None:
    value = {"a": -0.0, "b": [0.0, -0.0, {"c": -0.0}], "d": -1.5, "e": 0}
    assert same(without_negative_zero(value), {"a": 0.0, "b": [0.0, 0.0, {"c": 0.0}], "d": -1.5, "e": 0})
    untouched = {"a": [1.0, -2.0]}
    assert without_negative_zero(untouched) is untouched


# Text Lore stores: no NUL, no lone surrogates (both are refused before anything is written).
STORABLE_TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | STORABLE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(STORABLE_TEXT, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(value=JSON)
def test_any_json_value_reads_back_from_jsonb_as_written_but_for_the_sign_of_zero(
    connection: psycopg.Connection[Any], value: Any
) -> None:
    assert same(through_jsonb(connection, without_negative_zero(value)), without_negative_zero(value))


def test_an_exponent_after_a_commits_base64_vectors_is_still_written_in_full(
    connection: psycopg.Connection[Any],
) -> None:
    """A bulk import's commit: many images whose base64 vectors hold "e+" (not numbers), then one
    float that ``json.dumps`` writes with an exponent, which alone must be written out in full."""
    vectors = [
        base64.b64encode(np.random.default_rng(i).random(384).astype("<f4").tobytes()).decode()
        for i in range(64)
    ]
    images: list[Any] = [{"embedding": {"vector": vector, "generation": None}} for vector in vectors]
    assert sum(vector.count("e+") for vector in vectors) > 0
    assert jsonb_text(images) == json.dumps(images)
    value = [*images, {"meta": {"size": 1e16}}]
    assert "10000000000000000.0" in jsonb_text(value)
    assert same(through_jsonb(connection, value), value)
