"""The committed GPU results (docs/experiments/gpu/<NAME>/, run on a card by numerics/experiments/gpu.sh):
their summaries are what this code's summary makes of their cell records, they name the card, and
``--resummarise`` rewrites a summary from the cell records without running a cell."""
import json
import shutil
from pathlib import Path

import pytest

from numerics.experiments import load
from numerics.experiments.__main__ import main
from numerics.experiments.common import GPU_DIR, RESULTS, SUMMARY

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "docs" / "experiments" / GPU_DIR
RUN = sorted(p.parent.name for p in GPU.glob(f"*/{SUMMARY}"))


def rows(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / RESULTS).read_text().splitlines() if line.strip()]


@pytest.mark.skipif(not RUN, reason="no GPU results committed under docs/experiments/gpu")
@pytest.mark.parametrize("name", RUN)
def test_committed_gpu_summary_is_this_codes_summary_of_its_cells(name):
    d = GPU / name
    s = json.loads((d / SUMMARY).read_text())
    dev = s["device"]
    assert s["grid"] == "gpu" and dev["device"].startswith("cuda") and dev["name"], "marked with the card"
    again = load(name).summarise(rows(d), s["quick"])
    assert again["criteria"] == s["criteria"], f"stale: python -m numerics.experiments {name} --resummarise --out {d}"


def test_resummarise_rewrites_from_the_cells_and_keeps_the_run_record(tmp_path, capsys):
    if not (GPU / "seed000-table7" / RESULTS).is_file():
        pytest.skip("no committed GPU run of seed000-table7 to rewrite")
    out = tmp_path / "t7"
    shutil.copytree(GPU / "seed000-table7", out)
    before = json.loads((out / SUMMARY).read_text())
    (out / "figure.png").unlink()
    assert main(["seed000-table7", "--resummarise", "--out", str(out)]) == 0
    s = json.loads((out / SUMMARY).read_text())
    assert s["criteria"] == before["criteria"] and s["device"] == before["device"]
    # the run record is the one of the command that ran the cells on the card, with the rewrite added
    run = dict(s["run"])
    assert run.pop("resummarised")["rows"] == len(rows(out))
    assert run == {k: v for k, v in before["run"].items() if k != "resummarised"}
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "written again from the 6 cell records" in capsys.readouterr().out
    # another experiment's folder is refused: one line, exit 2, nothing written
    assert main(["seed003-mqar", "--resummarise", "--out", str(out)]) == 2
    assert "holds 'seed000-table7', not seed003-mqar" in capsys.readouterr().err


def test_report_marks_the_gpu_sections_with_the_card():
    from numerics.experiments.report import build_report

    text = build_report(ROOT / "docs" / "experiments")
    for name in RUN:
        card = json.loads((GPU / name / SUMMARY).read_text())["device"]["name"]
        assert f"### On a GPU: {card}" in text
    assert text.count("not run on a GPU") >= 4 - len(RUN)
