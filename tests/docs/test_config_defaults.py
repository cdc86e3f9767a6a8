"""docs/configuration.md shows each key's default as src/core/config_keys.def
declares it (the dflt column, which gs_config_load applies): in a table with a
Default column, that cell starts with the value in a code span; in a table
without one, the key's row says "default `value`". A key without a default
shows none as a value (its cell says "no limit", "none", "empty"...)."""
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KEY = re.compile(r'^GS_KEY\(\w+, "([^"]+)", .*, (NULL|"[^"]*"), "[^"]*"\)$', re.M)


def table_defaults():
    """{name: default or None} of the scalar keys in config_keys.def."""
    with open(os.path.join(ROOT, "src", "core", "config_keys.def"), encoding="utf-8") as f:
        text = f.read()
    return {name: None if d == "NULL" else d.strip('"') for name, d in KEY.findall(text)}


def split(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def doc_rows(text):
    """{name: (header cells, row cells)} of every table row naming a key."""
    rows, header = {}, None
    for line in text.split("\n"):
        if not line.startswith("|"):
            header = None
            continue
        cells = split(line)
        if header is None:
            header = cells
        elif cells[0].startswith("`") and cells[0].endswith("`"):
            rows[cells[0].strip("`")] = (header, cells)
    return rows


def problems(defaults, text):
    rows, found = doc_rows(text), []
    for name, dflt in sorted(defaults.items()):
        if name not in rows:
            found.append(f"{name}: no row")
            continue
        header, cells = rows[name]
        if "Default" in header:
            cell = cells[header.index("Default")]
            if dflt is not None and not cell.startswith(f"`{dflt}`"):
                found.append(f"{name}: Default cell {cell!r}, the table says `{dflt}`")
            if dflt is None and cell.startswith("`"):
                found.append(f"{name}: Default cell {cell!r}, the table has none")
        elif dflt is not None and f"default `{dflt}`" not in " | ".join(cells):
            found.append(f"{name}: row does not say default `{dflt}`")
    return found


def test_docs_show_the_tables_defaults():
    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        assert problems(table_defaults(), f.read()) == []


def test_the_defaults_check_is_real():
    defaults = table_defaults()
    assert defaults["GPUSLICE_SHARE_WEIGHT"] == "100" and defaults["GPUSLICE_REGION"] is None
    doc = ("| Variable | Values | Default |\n|---|---|---|\n| `GPUSLICE_SHARE_WEIGHT` | 1..10000 | `99` |\n"
           "| `GPUSLICE_REGION` | path | `/x` |\n")
    got = problems({"GPUSLICE_SHARE_WEIGHT": "100", "GPUSLICE_REGION": None, "GPUSLICE_MANAGED": "count"}, doc)
    assert len(got) == 3, got
