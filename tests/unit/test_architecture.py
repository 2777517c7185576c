"""Hold the package layering that ARCHITECTURE.md draws, through the import-linter contracts of
``pyproject.toml`` ``[tool.importlinter]`` (``.ci/run`` runs ``lint-imports`` on them after mypy).

import-linter reads every import with the module's source, at module level and inside functions
alike (a function-local import that closes a loop is still a loop, only a later one), and those
under ``if TYPE_CHECKING:`` too. These tests run the same contracts inside the suite, say that
they cover what the hand-written cycle finder covered, and that a new circle really breaks them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from importlinter import configuration
from importlinter.application import use_cases
from importlinter.application.use_cases import create_report, read_user_options
from importlinter.application.user_options import UserOptions

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
PACKAGES = ("lore_mcp", "stores")
# What stores must never import: it knows nothing of the MCP layer or of MCP itself.
FORBIDDEN_IN_STORES = ("lore_mcp", "mcp", "mcp_types")

# What the `lint-imports` command sets up before it reads any option or contract.
configuration.configure()
use_cases._register_built_in_contract_types()


def contracts() -> dict[str, dict[str, Any]]:
    """The contracts of pyproject.toml by id."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def broken(options: UserOptions) -> list[str]:
    """The names of the contracts ``options`` break (a contract that cannot run counts)."""
    report = create_report(options, cache_dir=None)
    assert not report.could_not_run, "the import contracts could not run (a module not found?)"
    return [contract.name for contract, check in report.get_contracts_and_checks() if not check.kept]


def test_the_import_contracts_of_pyproject_hold() -> None:
    assert broken(read_user_options(str(PYPROJECT))) == []


def test_the_contracts_forbid_circles_anywhere_and_the_stores_seam() -> None:
    found = contracts()
    assert set(PACKAGES) <= set(found["no-import-circles"]["ancestors"])
    assert found["no-import-circles"]["type"] == "acyclic_siblings"
    assert found["stores-seam"]["source_modules"] == ["stores"]
    assert set(FORBIDDEN_IN_STORES) <= set(found["stores-seam"]["forbidden_modules"])
    assert found["dialects-independent"]["modules"] == ["stores.sqlite", "stores.postgres"]
    assert found["no-import-circles"].get("ignore_imports", []) == [], "no circle is let through"


def test_every_module_and_subpackage_has_a_layer() -> None:
    """A new module or subpackage is placed in its package's layers the day it lands."""
    for package, contract in (("lore_mcp", "lore-layers"), ("stores", "stores-layers")):
        layered = {
            name.strip() for line in contracts()[contract]["layers"] for name in re.split("[:|]", line)
        }
        children = {
            f"{package}.{path.stem if path.suffix else path.name}"
            for path in (ROOT / package).iterdir()
            if (path.suffix == ".py" and not path.stem.startswith("__")) or (path / "__init__.py").exists()
        }
        assert children - layered == set(), f"{package}: modules outside its layers"


def test_architecture_md_draws_every_folder_of_both_packages() -> None:
    """The picture a newcomer reads first names every subpackage, so it cannot fall behind the tree."""
    drawn = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    folders = [
        f"{path.name}/"
        for package in PACKAGES
        for path in sorted((ROOT / package).iterdir())
        if (path / "__init__.py").exists()
    ]
    assert folders and [folder for folder in folders if folder not in drawn] == []


def test_a_circle_closed_inside_a_function_breaks_the_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = "lore_arch_sample"  # a name of its own: lore_mcp and stores are already imported
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "a.py").write_text(f"from {package}.b import thing\n")
    (tmp_path / package / "b.py").write_text(f"def later():\n    from {package} import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    circles = {"id": "circles", "name": "no circles", "type": "acyclic_siblings", "ancestors": [package]}
    options = UserOptions(session_options={"root_packages": [package]}, contracts_options=[circles])
    assert broken(options) == ["no circles"]
    (tmp_path / package / "b.py").write_text("def later():\n    pass\n")
    assert broken(options) == []


def test_lore_mcp_sees_only_the_stores_facade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract names every subpackage of stores but the facade's own deadline, and a module
    of the MCP side that reaches past the facade breaks it while one that uses the facade does not."""
    found = contracts()["stores-facade"]
    inner = {
        f"stores.{path.stem if path.suffix else path.name}"
        for path in (ROOT / "stores").iterdir()
        if (path.suffix == ".py" and not path.stem.startswith("__")) or (path / "__init__.py").exists()
    }
    assert found["source_modules"] == ["lore_mcp"]
    assert inner - set(found["forbidden_modules"]) == {"stores.deadline"}
    top, low = "lore_facade_top", "lore_facade_low"  # names of their own, as above
    for package, files in ((top, {"a.py": f"from {low} import Thing\n"}), (low, {"inner.py": "Thing = 1\n"})):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(
            f"from {low}.inner import Thing\n" if package == low else ""
        )
        for name, text in files.items():
            (tmp_path / package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    facade = dict(
        found, source_modules=[top], forbidden_modules=[f"{low}.inner"], allow_indirect_imports="true"
    )
    options = UserOptions(session_options={"root_packages": [top, low]}, contracts_options=[facade])
    assert broken(options) == []
    (tmp_path / top / "a.py").write_text(f"from {low}.inner import Thing\n")
    assert broken(options) == [found["name"]]
