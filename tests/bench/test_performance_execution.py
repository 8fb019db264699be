"""bench/performance.py's execution section: rerun alone (``--only execution``) it replaces its own
section of the document and nothing else; refused before any work where there is no such section."""
import pytest


def test_replace_section_keeps_the_rest(load_bench):
    perf = load_bench("performance.py")
    doc = "# Performance\n\nhead\n\n## A\n\na\n\n## Float forward of the constructions against a baseline\n\nold\n\n## B\n\nb\n"
    new = perf.replace_section(doc, (perf.EXECUTION_TITLE, *perf.EXECUTION_OLD_TITLES), "## X\n\nnew\n\n")
    assert new == "# Performance\n\nhead\n\n## A\n\na\n\n## X\n\nnew\n\n## B\n\nb\n"
    last = "## A\n\na\n\n## " + perf.EXECUTION_TITLE + "\n\nold\n"  # the last section: up to the end
    assert perf.replace_section(last, (perf.EXECUTION_TITLE,), "## Y\n") == "## A\n\na\n\n## Y\n"
    with pytest.raises(ValueError, match="no section"):
        perf.replace_section("## A\n\na\n", (perf.EXECUTION_TITLE,), "")


def test_only_execution_refuses_a_document_without_the_section(load_bench, tmp_path):
    perf = load_bench("performance.py")
    doc = tmp_path / "perf.md"
    doc.write_text("# Performance\n\n## A\n\na\n")
    with pytest.raises(SystemExit, match="no section"):
        perf.main(["--only", "execution", "--out", str(doc), "--quick"])
    assert doc.read_text() == "# Performance\n\n## A\n\na\n"
    with pytest.raises(SystemExit, match="needs the document"):
        perf.main(["--only", "execution", "--out", str(tmp_path / "missing.md"), "--quick"])


def test_the_committed_document_has_the_execution_section(load_bench):
    perf = load_bench("performance.py")
    text = (perf.ROOT / "docs" / "performance.md").read_text()
    perf.replace_section(text, (perf.EXECUTION_TITLE, *perf.EXECUTION_OLD_TITLES), "")  # no ValueError
