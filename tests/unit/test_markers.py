"""Tests are marked by what they use (tests/support/markers.py), so the lanes select the right ones.

The sample "tests" below are never run: they are classified through a stand-in for a pytest
item, and reached only through ``SAMPLES`` (a dict, which the classifier does not follow),
so the tests here stay in the fast lane themselves.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.markers import TESTS, kinds_of, timeout_for
from tests.support.node import npx
from tests.support.processes import stdio_params

LANE_MARKERS = ("postgres", "model", "process", "network")


def _runs_python() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _calls_a_helper_that_runs_python() -> None:
    _runs_python()


def _starts_a_stdio_server(tmp_path: Any) -> None:
    stdio_params(tmp_path / "lore.db")


def _runs_npx() -> None:
    npx("some-package")


def _only_computes() -> int:
    return sum(range(10))


def _mentions_a_process_in_a_string() -> str:
    return "subprocess"


SAMPLES = {
    "runs_python": _runs_python,
    "helper": _calls_a_helper_that_runs_python,
    "stdio": _starts_a_stdio_server,
    "npx": _runs_npx,
    "computes": _only_computes,
    "string": _mentions_a_process_in_a_string,
}


def item(
    sample: str,
    *,
    fixtures: tuple[str, ...] = (),
    params: dict[str, Any] | None = None,
    path: Path | None = None,
) -> Any:
    """A stand-in for a collected test: its function, its fixtures, its parameters, its file."""
    callspec = SimpleNamespace(params=params) if params is not None else None
    return SimpleNamespace(
        function=SAMPLES[sample], fixturenames=list(fixtures), callspec=callspec, path=path
    )


def lane_markers(request: pytest.FixtureRequest) -> set[str]:
    return {m for m in LANE_MARKERS if request.node.get_closest_marker(m) is not None}


def test_a_test_that_runs_a_process_through_helpers_is_marked_process() -> None:
    assert kinds_of(item("runs_python")) == {"process"}
    assert kinds_of(item("helper")) == {"process"}
    assert kinds_of(item("stdio")) == {"process"}


def test_a_test_that_runs_npx_needs_the_network_and_a_process() -> None:
    assert kinds_of(item("npx")) == {"network", "process"}


def test_a_test_that_only_computes_gets_no_lane_marker() -> None:
    assert kinds_of(item("computes")) == set()
    assert kinds_of(item("string")) == set(), "a word in a string is not a call"


def test_the_backend_parameter_decides_postgres() -> None:
    assert kinds_of(item("computes", params={"backend": "postgres"})) == {"postgres"}
    assert kinds_of(item("computes", params={"backend": "local"})) == set()
    assert kinds_of(item("computes", fixtures=("postgres_url",))) == {"postgres"}


def test_the_process_folder_means_a_process_and_the_other_folders_say_nothing() -> None:
    assert kinds_of(item("computes", path=TESTS / "process" / "test_x.py")) == {"process"}
    for lane in ("unit", "stores", "mcp"):
        assert kinds_of(item("computes", path=TESTS / lane / "test_x.py")) == set()
    assert kinds_of(item("runs_python", path=TESTS / "mcp" / "test_x.py")) == {"process"}


def test_the_embedder_fixture_means_the_model() -> None:
    assert kinds_of(item("computes", fixtures=("embedder", "store"))) == {"model"}


def test_the_collection_hook_marks_real_tests(backend: str, request: pytest.FixtureRequest) -> None:
    expected = {"postgres"} if backend == "postgres" else set()
    assert lane_markers(request) == expected


def test_the_collection_hook_marks_tests_that_use_the_model(
    embedder: Any, request: pytest.FixtureRequest
) -> None:
    assert lane_markers(request) == {"model"}


def test_each_test_gets_the_timeout_of_its_slowest_kind(request: pytest.FixtureRequest) -> None:
    assert timeout_for(set()) < timeout_for({"model"}) < timeout_for({"process"}) < timeout_for({"network"})
    assert timeout_for({"model", "process"}) == timeout_for({"process"})
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (timeout_for(set()),)
