"""The indexes cannot rot: docs/README.md links every page of docs/ and
bench/results/README.md names every file of bench/results/, each index's links
and names point at files that exist, and docs/architecture.md names every
command `gpuslice --help` lists."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = os.path.join(ROOT, "docs")
RESULTS = os.path.join(ROOT, "bench", "results")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)")
CODE = re.compile(r"`([^`\s]+)`")


def read(path):
    with open(path) as f:
        return f.read()


def anchors(markdown):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", markdown, re.M)}


def missing_from_index(index_text, files):
    return sorted(f for f in files if f"({f})" not in index_text and f"`{f}`" not in index_text)


def test_docs_index_links_every_page():
    pages = {f for f in os.listdir(DOCS) if f.endswith(".md") and f != "README.md"}
    missing = missing_from_index(read(os.path.join(DOCS, "README.md")), pages)
    assert not missing, f"docs/README.md: add a line for {missing}"


def test_docs_index_links_resolve():
    text = read(os.path.join(DOCS, "README.md"))
    links = LINK.findall(text)
    assert len(links) > 10
    for target, anchor in links:
        path = os.path.normpath(os.path.join(DOCS, target))
        assert os.path.isfile(path), f"docs/README.md links {target}, which does not exist"
        if anchor:
            assert anchor in anchors(read(path)), f"docs/README.md links {target}#{anchor}: no such heading"


def test_results_index_names_every_file():
    files = {f for f in os.listdir(RESULTS) if f != "README.md"}
    missing = missing_from_index(read(os.path.join(RESULTS, "README.md")), files)
    assert not missing, f"bench/results/README.md: add {missing} (what it measured, device, commit)"


def test_results_index_names_only_files_that_exist():
    named = {n for n in CODE.findall(read(os.path.join(RESULTS, "README.md")))
             if re.search(r"\.(md|jsonl|txt|csv|png)$", n) and "/" not in n}
    assert len(named) > 40
    assert {n for n in named if not os.path.isfile(os.path.join(RESULTS, n))} == set()


def test_the_index_check_is_real():
    assert missing_from_index("[memory.md](memory.md)\n`a.jsonl`", {"memory.md", "a.jsonl", "b.png"}) == ["b.png"]
    assert "glossary" in anchors("## Glossary\n") and "reading-the-code" in anchors("## Reading the code\n")


def cli_commands():
    cli = os.environ.get("GPUSLICE_CLI")
    if not cli:
        pytest.fail("GPUSLICE_CLI is not set (run through ctest)")
    usage = subprocess.run([cli, "--help"], capture_output=True, text=True, timeout=10).stdout
    listed = usage.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  (\S+)", listed, re.M)


def test_architecture_names_every_command():
    commands = cli_commands()
    assert {"run", "top", "rm"} <= set(commands)
    (row,) = [line for line in read(os.path.join(DOCS, "architecture.md")).splitlines()
              if line.startswith("| `src/cli/` |")]
    assert [c for c in commands if f"`{c}`" not in row] == []
