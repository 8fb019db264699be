"""docs/algorithms.md: its examples (docs/algorithms_examples.py) run as written, and the page shows them and
what they compile to."""
import inspect
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
sys.path.insert(0, str(DOCS))

import algorithms as page  # noqa: E402
import algorithms_examples as X  # noqa: E402

TEXT = (DOCS / "algorithms.md").read_text()


def _row_head(line: str) -> str:
    """A table row without its float error columns (machine-dependent in the last digit)."""
    return "|".join(line.split("|")[:5])


@pytest.mark.parametrize("name", list(X.EXAMPLES))
def test_example_runs_as_written_and_the_page_shows_it(name):
    r = page.run_example(name, trials=2)
    compiled = [row for row in r["rows"] if "runs" in row]
    assert compiled, f"{name}: no target holds it"
    for row in compiled:
        assert row["verdict"] == "PROVED" and all(row["sections"].values()), (name, row["target"])
        f64, f32 = row["runs"]["float64"], row["runs"]["float32"]
        assert len(f64.errors) == page.STEPS and not any(f64.non_finite) and not any(f32.non_finite)
        assert max(f64.errors) < 1e-13 and max(f32.errors) < 1e-4 and max(f32.errors) > max(f64.errors)
    # the page holds the code as written and, per target, the same compile and verdict
    assert inspect.getsource(X.EXAMPLES[name]).rstrip() in TEXT
    section = TEXT.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
    shown = [_row_head(x) for x in section.splitlines() if x.startswith("| ") and not x.startswith("| target")]
    want = [_row_head(x) for x in page.render([r], []).split(f"## {name}\n", 1)[1].split("\n## ", 1)[0].splitlines()
            if x.startswith("| ") and not x.startswith("| target")]
    assert shown == want
    assert (DOCS / f"algorithms_{name}.png").exists()


def test_gd_comparison_table_is_current():
    table = page.render([], page.gd_comparison()).split("## GD from five lines", 1)[1]
    assert table in TEXT
