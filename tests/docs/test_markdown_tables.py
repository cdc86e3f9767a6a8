"""Every table in the project's Markdown renders whole, as GitHub's (GFM) tables
do: a table is a header row, a delimiter row and the rows up to the first blank
line, its cells split at every unescaped `|` (inside code spans too). So a
blank line inside a table, or a row with a stray or missing pipe, fails here
where a renderer would silently drop cells or print the rest as text."""
import glob
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PAGES = sorted([os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md")) +
               glob.glob(os.path.join(ROOT, "bench", "results", "*.md")))
DELIMITER = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


def cells(row):
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(re.split(r"(?<!\\)\|", row))


def table_problems(text):
    """[(line number, problem)] of the tables in `text`."""
    problems, fenced, table = [], False, None  # table: its header's cell count
    lines = text.split("\n")
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```"):
            fenced, table = not fenced, None
            continue
        if fenced or not s:
            table = None
            continue
        if table is not None and "|" in s:
            if cells(s) != table:
                problems.append((i + 1, f"{cells(s)} cells in a table of {table}"))
            continue
        table = None
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if "|" in s and DELIMITER.match(nxt):
            table = cells(s)  # the delimiter row is then checked as a row
        elif s.startswith("|"):
            problems.append((i + 1, "a row outside any table (a blank line above it ends its table)"))
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_tables_render_whole(page):
    with open(page) as f:
        assert table_problems(f.read()) == []


def test_the_check_catches_broken_tables():
    ok = "| a | b |\n|---|---|\n| `x|y` is two cells \\| here | 2 |\n"
    assert table_problems(ok) == [(3, "3 cells in a table of 2")]
    assert table_problems("| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n") == [
        (5, "a row outside any table (a blank line above it ends its table)")]
    assert table_problems("| a | b |\n|---|---|\n| 1 \\| 2 |\n") == [(3, "1 cells in a table of 2")]
    assert table_problems("| a | b |\n|---|---|---|\n") == [(2, "3 cells in a table of 2")]
    assert table_problems("| a | b |\n|---|---|\n| 1 | 2 |\n\n```\n| not a table\n```\n") == []
