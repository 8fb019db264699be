"""docs/errata.md is exactly what the verifier produces today."""
from pathlib import Path

from verify.errata import markdown, run_all

DOC = Path(__file__).resolve().parents[2] / "docs" / "errata.md"


def test_every_erratum_rejected_as_printed_and_proved_corrected():
    rows = run_all()
    assert rows, "no errata registered"
    bad = [r["id"] for r in rows if not (r["as_printed_rejected"] and r["corrected_proved"] and r["counterexample"])]
    assert not bad, f"errata not behaving as documented: {bad}"


def test_errata_doc_is_generated_and_current():
    assert DOC.read_text() == markdown(run_all()), (
        "docs/errata.md is stale: run python -m verify.errata --markdown docs/errata.md")
