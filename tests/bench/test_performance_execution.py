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


def refused(capsys, fn, match: str):
    """``fn()`` returns exit status 2 with one ``error:`` line on stderr that contains ``match``."""
    rc = fn()
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and match in err, (rc, err)


def test_only_execution_refuses_a_document_without_the_section(load_bench, tmp_path, capsys):
    perf = load_bench("performance.py")
    doc = tmp_path / "perf.md"
    doc.write_text("# Performance\n\n## A\n\na\n")
    refused(capsys, lambda: perf.main(["--only", "execution", "--out", str(doc), "--quick"]), "no section")
    assert doc.read_text() == "# Performance\n\n## A\n\na\n"
    refused(capsys, lambda: perf.main(["--only", "execution", "--out", str(tmp_path / "missing.md"), "--quick"]),
            "needs the document")
    refused(capsys, lambda: perf.main(["--only", "execution", "--out", str(tmp_path)]), "is a folder")


def test_a_device_named_as_the_document_to_rerun_is_refused_and_left_alone(load_bench, capsys):
    """``--out /dev/null`` is checked like every output of the toolkit (``output_file``: a device is written
    through, never renamed over); ``--only`` refuses it first, as no document to replace a section of."""
    import os
    import stat

    perf = load_bench("performance.py")
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null on this machine")
    refused(capsys, lambda: perf.main(["--only", "startup", "--out", "/dev/null"]), "needs the document")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_committed_document_has_the_execution_section(load_bench):
    perf = load_bench("performance.py")
    text = (perf.ROOT / "docs" / "performance.md").read_text()
    perf.replace_section(text, (perf.EXECUTION_TITLE, *perf.EXECUTION_OLD_TITLES), "")  # no ValueError


def test_every_section_has_a_key_and_only_refuses_unknown_keys(load_bench, tmp_path, capsys):
    perf = load_bench("performance.py")
    full = [k for k, *_ in perf.benchmarks(False, 1)]
    assert len(set(full)) == len(full) and set(full) <= set(perf.SECTION_KEYS)
    assert {"execution", "circuit-10k", "circuit-100k", "compiler-scale", "circuit-1k"} <= set(perf.SECTION_KEYS)
    doc = tmp_path / "perf.md"
    doc.write_text("# Performance\n\n## A\n\na\n")
    refused(capsys, lambda: perf.main(["--only", "circuits", "--out", str(doc)]), "invalid choice: 'circuits'")
    refused(capsys, lambda: perf.main(["--only", "startup", "--out", str(doc), "--timeout", "nan"]), "--timeout")
    refused(capsys, lambda: perf.main(["--only", "proofs-512", "--out", str(doc), "--quick"]),
            "not a section of a --quick run")
    refused(capsys, lambda: perf.main(["--only", "circuit-1k", "--out", str(doc), "--quick"]),  # before the run
            "no section 'The circuit command end to end, 1,000 random gates'")
    assert doc.read_text() == "# Performance\n\n## A\n\na\n"


def test_only_a_circuit_section_reruns_it_in_place(load_bench, tmp_path):
    """``--only circuit-1k --quick`` runs the 1,000-gate circuit command and replaces that section alone."""
    perf = load_bench("performance.py")
    title = "The circuit command end to end, 1,000 random gates"
    doc = tmp_path / "perf.md"
    doc.write_text(f"# Performance\n\n## A\n\na\n\n## {title}\n\nold\n\n## B\n\nb\n")
    assert perf.main(["--only", "circuit-1k", "--out", str(doc), "--quick"]) == 0
    text = doc.read_text()
    assert text.startswith("# Performance\n\n## A\n\na\n\n## " + title + "\n\n`python -m circuits.random")
    assert text.endswith("\n\n## B\n\nb\n") and "old" not in text
    assert "proof: PROVED" in text and "peak resident memory of the command" in text
    assert "rerun alone by `python bench/performance.py --only circuit-1k`" in text
