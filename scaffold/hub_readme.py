"""The text-to-speech hub READMEs: one table row and one `## <Model>` section per model.

Markdown is not Python, so libcst does not apply; the edit works on the document's structure (the
`## Supported Models` table and the `---`-separated model sections), never on marker strings.
Rows and sections go in alphabetical order, as the hub keeps them.
"""

from __future__ import annotations

import re

from omnitts.scaffold.errors import ScaffoldError

TABLE_HEADING = "## Supported Models"


def _sort_key(title: str) -> str:
    return title.strip().lower()


def add_table_row(text: str, row: str, rel: str) -> str:
    lines = text.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING)
    except StopIteration:
        raise ScaffoldError(f"{rel}: no '{TABLE_HEADING}' heading") from None
    rows = [i for i in range(start + 1, len(lines)) if lines[i].startswith("|")]
    table = []
    for i in rows:  # the contiguous block of table lines after the heading
        if table and i != table[-1] + 1:
            break
        table.append(i)
    if len(table) < 2:
        raise ScaffoldError(f"{rel}: no table under '{TABLE_HEADING}'")
    title = _cell(row)
    body = table[2:]
    if any(_sort_key(_cell(lines[i])) == _sort_key(title) for i in body):
        return text
    position = next((i for i in body if _sort_key(_cell(lines[i])) > _sort_key(title)), table[-1] + 1)
    lines.insert(position, row.rstrip("\n"))
    return "\n".join(lines)


def _cell(row: str) -> str:
    parts = row.strip().strip("|").split("|")
    return parts[0].strip() if parts else ""


_SECTION = re.compile(r"^## (.+)$")


def add_section(text: str, title: str, section: str, rel: str) -> str:
    """Insert a `---`-separated `## title` section among the model sections (after the table)."""
    lines = text.split("\n")
    headings = [(i, _SECTION.match(line).group(1).strip()) for i, line in enumerate(lines) if _SECTION.match(line)]
    if any(_sort_key(h) == _sort_key(title) for _, h in headings):
        return text
    # Model sections are the `## ` headings preceded by a `---` rule (blank lines allowed between).
    model = [(i, h) for i, h in headings if _rule_before(lines, i) is not None]
    if not model:
        raise ScaffoldError(f"{rel}: no '---'-separated model sections found")
    after = next((i for i, h in model if _sort_key(h) > _sort_key(title)), None)
    if after is None:
        return text.rstrip("\n") + "\n\n---\n\n" + section.rstrip("\n") + "\n"
    rule = _rule_before(lines, after)
    lines[rule:rule] = ["---", "", *section.rstrip("\n").split("\n"), ""]
    return "\n".join(lines)


def _rule_before(lines: list[str], index: int) -> int | None:
    j = index - 1
    while j >= 0 and lines[j].strip() == "":
        j -= 1
    return j if j >= 0 and lines[j].strip() == "---" else None
