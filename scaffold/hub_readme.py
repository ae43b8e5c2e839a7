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


# -- inverses (`omnitts-scaffold remove`) ------------------------------------------------------------
def section_title_of(text: str, name: str) -> str | None:
    """Title of the model section that links `text_to_speech/<name>/` (what `new` / `--like` wrote)."""
    lines = text.split("\n")
    headings = [(i, _SECTION.match(line).group(1).strip()) for i, line in enumerate(lines) if _SECTION.match(line)]
    # Sections link the examples as `examples/.../text_to_speech/<name>/...` or, in the online hub,
    # relative to it as `<name>/...`.
    link = re.compile(rf"(?<![\w.-]){re.escape(name)}/")
    for k, (i, title) in enumerate(headings):
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines)
        if link.search("\n".join(lines[i:end])) and _rule_before(lines, i) is not None:
            return title
    return None


def remove_table_row(text: str, title: str | None, rel: str = "") -> str:
    """The inverse of `add_table_row`: drop the row whose first cell is `title`."""
    if title is None:
        return text
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING), None)
    if start is None:
        return text
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("|") and _sort_key(_cell(lines[i])) == _sort_key(title):
            return "\n".join(lines[:i] + lines[i + 1 :])
    return text


def remove_section(text: str, title: str | None, rel: str = "") -> str:
    """The inverse of `add_section`: drop the `---`-separated `## title` section it inserted or appended."""
    if title is None:
        return text
    lines = text.split("\n")
    heading = next(
        (i for i, line in enumerate(lines) if _SECTION.match(line) and _SECTION.match(line).group(1).strip() == title),
        None,
    )
    if heading is None:
        return text
    rule = _rule_before(lines, heading)
    if rule is None:
        return text
    later = [
        i for i in range(heading + 1, len(lines)) if _SECTION.match(lines[i]) and _rule_before(lines, i) is not None
    ]
    if later:
        next_rule = _rule_before(lines, later[0])
        return "\n".join(lines[:rule] + lines[next_rule:])
    # Appended at the end: `text.rstrip("\n") + "\n\n---\n\n" + section + "\n"`.
    head = lines[:rule]
    while head and head[-1] == "":
        head.pop()
    return "\n".join(head) + "\n"


def section_text(text: str, title: str) -> str | None:
    """The body of the model section `## title` (heading included, up to the next section), for `--like`."""
    lines = text.split("\n")
    heading = next(
        (i for i, line in enumerate(lines) if _SECTION.match(line) and _SECTION.match(line).group(1).strip() == title),
        None,
    )
    if heading is None:
        return None
    end = next((i for i in range(heading + 1, len(lines)) if _SECTION.match(lines[i])), len(lines))
    rule = _rule_before(lines, end) if end < len(lines) else None
    body = lines[heading : rule if rule is not None else end]
    while body and body[-1].strip() in ("", "---"):
        body.pop()
    return "\n".join(body) + "\n"


def row_text(text: str, title: str) -> str | None:
    """The `## Supported Models` table row whose first cell is `title`."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING), None)
    if start is None:
        return None
    return next((line for line in lines[start + 1 :] if line.startswith("|") and _cell(line) == title), None)
