"""The documentation site holds together without MkDocs installed (issue 36).

The README stays short (what Lore is, the two commands, one client config, links), every page
under docs/ is in mkdocs.yml's navigation, and every relative link of the README and the pages
reaches a file, and its anchor a heading of that file. `.ci/run` also builds the site with
``mkdocs build --strict``; these checks fail fast, in the fast lane, and say which link broke.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
README_MAX_LINES = 250

CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are no links."""
    return CODE.sub("", text)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (MkDocs) gives a heading; GitHub's agrees for plain words."""
    text = re.sub(r"[`*]", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(prose(path.read_text(encoding="utf-8")))}


def broken_links(path: Path, root: Path = ROOT, docs: Path = DOCS) -> list[str]:
    """Relative links of one Markdown file that reach no file, or no heading of it; a page of
    ``docs`` may link only within it (the site holds nothing else)."""
    broken = []
    for target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:: not this repository's
        file, _, anchor = target.partition("#")
        reached = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(root)}: {target}"
        if not reached.is_file():
            broken.append(f"{where} (no such file)")
        elif path.is_relative_to(docs) and not reached.is_relative_to(docs):
            broken.append(f"{where} (outside docs/, which the site cannot reach)")
        elif anchor and reached.suffix == ".md" and anchor not in anchors(reached):
            broken.append(f"{where} (no heading with that anchor)")
    return broken


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names (``- Title: page.md`` or ``- page.md``), in order."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config[config.index("\nnav:") :]
    return re.findall(r"^\s+- (?:[^\n:]+: )?(\S+\.md)\s*$", nav, re.MULTILINE)


def test_the_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to a page under docs/"


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    listed = nav_pages()
    pages = [str(page.relative_to(DOCS)) for page in PAGES]
    assert "index.md" in pages and len(pages) >= 10
    assert sorted(listed) == sorted(set(listed)), "a page is listed twice in mkdocs.yml"
    assert set(pages) - set(listed) == set(), "pages missing from mkdocs.yml's nav"
    assert set(listed) - set(pages) == set(), "mkdocs.yml's nav names pages that do not exist"


def test_every_relative_link_reaches_a_file_and_its_anchor() -> None:
    broken = [problem for path in [README, *PAGES] for problem in broken_links(path)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_finds_what_it_should(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "ARCHITECTURE.md").write_text("# Architecture\n")
    (docs / "other.md").write_text("# Other\n\n## Key tools (team server, root keys only)\n")
    page = docs / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#key-tools-team-server-root-keys-only) [self](#page) "
        "[web](https://example.com) `[code](nowhere.md)`\n\n"
        "[gone](missing.md) [no anchor](other.md#nope) [no self](#nope) [up](../ARCHITECTURE.md)\n"
    )
    assert broken_links(page, root=tmp_path, docs=docs) == [
        "docs/page.md: missing.md (no such file)",
        "docs/page.md: other.md#nope (no heading with that anchor)",
        "docs/page.md: #nope (no heading with that anchor)",
        "docs/page.md: ../ARCHITECTURE.md (outside docs/, which the site cannot reach)",
    ]


def test_the_readme_and_every_client_page_say_lore_is_not_on_pypi_yet() -> None:
    # Until the first release `uvx lore-memory-mcp mcp` finds nothing: the docs say so plainly and
    # give the install from a clone (tests/process/test_client_configs.py starts each config).
    clients = [p for p in sorted(DOCS.glob("clients/*.md")) if p.name != "claude-ai.md"]  # a URL: no install
    for path in [README, DOCS / "index.md", DOCS / "getting-started.md", *clients]:
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert "not on pypi yet" in text.lower(), f"{path} does not say that Lore is not on PyPI yet"
        assert re.search(r"(/path/to/|\./)lore-memory-mcp\b", text), f"{path}: no install from a clone"
