"""The README and the documents under docs/ hold together: the README stays a front door and
links every document, every relative link of every document leads to a file and, where it
names a #fragment, to a heading of that file (as GitHub spells its anchors), every management
command a document runs exists, and no document cites a numbered rule from outside this
repository ("CONTRACT 11") instead of saying the rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

from tests.support.harness import BASE_DIR
from tests.support.helpers import management_commands

README = BASE_DIR / "README.md"
CONTRIBUTING = BASE_DIR / "CONTRIBUTING.md"
DOCS = sorted((BASE_DIR / "docs").glob("*.md"))
DOCUMENTS = [README, CONTRIBUTING, *DOCS]
README_MAX_LINES = 450

FENCE = re.compile(r"^ *```")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")


def name(path: Path) -> str:
    return str(path.relative_to(BASE_DIR))


def prose_lines(markdown: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text (a link's text, no code marks) in lower
    case, without punctuation but `-` and `_`, spaces turned into `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor; a repeated one gets `-1`, `-2`, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(markdown):
        heading = re.match(r"^#{1,6} +(.*?)[ #]*$", line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(markdown: str) -> list[str]:
    """The targets of the inline links of the prose (not of code blocks or code spans)."""
    prose = "\n".join(re.sub(r"`[^`\n]*`", "", line) for line in prose_lines(markdown))
    return LINK.findall(prose)


def resolve(document: Path, target: str) -> tuple[Path, str]:
    """The file and the fragment a relative link of `document` leads to."""
    path, _, fragment = target.partition("#")
    return (document.parent / path).resolve() if path else document, fragment


def test_the_readme_is_a_front_door():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the rest belongs in docs/"


def test_the_readme_links_every_document():
    linked = {
        resolve(README, target)[0]
        for target in links(README.read_text(encoding="utf-8"))
        if not target.startswith(EXTERNAL)
    }
    assert CONTRIBUTING.exists()
    assert DOCS, "docs/ holds no document"
    missing = [name(path) for path in [CONTRIBUTING, *DOCS] if path.resolve() not in linked]
    assert not missing, f"README.md links none of {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=name)
def test_every_relative_link_leads_to_a_file_and_a_heading(document):
    broken = []
    for target in links(document.read_text(encoding="utf-8")):
        if target.startswith(EXTERNAL):
            continue
        path, fragment = resolve(document, target)
        if not path.is_file():
            broken.append((target, "no such file"))
        elif fragment and fragment not in anchors(path.read_text(encoding="utf-8")):
            broken.append((target, "no such heading"))
    assert not broken, f"{name(document)}: {broken}"


def test_a_broken_link_or_fragment_would_be_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## 1. Step `one`: done\n## Twice\n## Twice\n")
    document = tmp_path / "doc.md"
    document.write_text(
        "# Doc\n\n[ok](other.md#1-step-one-done), [twice](other.md#twice-1), [here](#doc),\n"
        "[gone](missing.md), [nowhere](other.md#three), `[code](nowhere.md)`\n\n"
        "```sh\n# not a heading\necho [x](also-nowhere.md)\n```\n"
    )
    targets = links(document.read_text())
    assert targets == [
        "other.md#1-step-one-done",
        "other.md#twice-1",
        "#doc",
        "missing.md",
        "other.md#three",
    ]
    assert anchors((tmp_path / "other.md").read_text()) == {
        "other",
        "1-step-one-done",
        "twice",
        "twice-1",
    }
    assert anchors(document.read_text()) == {"doc"}
    assert not resolve(document, "missing.md")[0].is_file()


@pytest.mark.parametrize("document", DOCUMENTS, ids=name)
def test_no_document_cites_a_numbered_rule_from_outside(document):
    cited = re.findall(r"CONTRACT\W{0,3}\d+", document.read_text(encoding="utf-8"))
    assert not cited, f"{name(document)} cites {cited}: say the rule itself"


@pytest.mark.parametrize("document", DOCUMENTS, ids=name)
def test_every_management_command_a_document_runs_exists(document):
    found = management_commands(document.read_text(encoding="utf-8"))
    known = get_commands()
    unknown = [(command, line) for command, line in found if command not in known]
    assert not unknown, f"{name(document)} runs commands that do not exist: {unknown}"
