"""Seed 003 MQAR, the width grid (issue 45 item 1): the smallest-width criterion read over five seeds per cell
(a cell with fewer read only where its seeds settle that median, else open: "undecided", never a verdict the
records do not show), the order that runs the deciding cells first, and the records of the width grid's run
added to the CPU grid's records (whole records of its cells only)."""
import json

import pytest

from numerics.experiments import seed003_mqar as mq
from numerics.experiments import seed003_mqar_report as mqr
from polyverify.sweep import cell_id, record_digest

CELL = "numerics.experiments.seed003_mqar:cell"


def record(m, N, d, seed, acc, *, steps=12000, first=2000):
    """A finished width-grid cell as the sweep runner records it (its config one of ``widths_configs``)."""
    cfg = next(c for c in mq.widths_configs() if (c["mixer"], c["N"], c["d"], c["seed"]) == (m, N, d, seed))
    hist = [{"step": 200, "train_loss": 1.0, "test_acc": 0.1}, {"step": steps, "train_loss": 1.0, "test_acc": acc}]
    res = {"mixer": m, "N": N, "D": cfg["D"], "d": d, "lr": cfg["lr"], "best_test_acc": acc, "final_test_acc": acc,
           "steps_run": steps if acc < 0.99 else first, "final_train_loss": 1.0, "params": 1, "history": hist,
           "stopped": None}
    rec = {"id": cell_id(CELL, cfg), "cell": CELL, "config": cfg, "status": "ok", "result": res, "cpu_s": 10.0,
           "wall_s": 12.0, "finished": "2026-12-07T15:00:00+00:00",
           "code_version": {"package": "0.1.0", "sources": "0123456789abcdef", "modules": 37}}
    rec["digest"] = record_digest(rec)
    return rec


def summary(accs: dict):
    """accs[(mixer, N, d)] = [best test accuracy per seed 0, 1, ...]: a summary of those width-grid records."""
    rows = [record(m, N, d, sd, a) for (m, N, d), xs in accs.items() for sd, a in enumerate(xs)]
    return mq.summarise(rows, False)


def crit(s):
    return next(c for c in s["criteria"] if c["id"] == "widths-vs-N")


HIT, MISS = 0.99, 0.3


def full(m, N, d_hit, *, seeds=5):
    """``m`` at N below the threshold at every width of the grid under ``d_hit``, reaching it from ``d_hit`` on."""
    return {(m, N, d): [HIT if d >= d_hit else MISS] * seeds for d in mq.WIDTHS["dims"]}


def test_width_records_are_apart_from_the_grid_runs_and_pooled():
    s = summary(full("attention", 16, 16) | full("baseconv", 16, 96))
    # the CPU grid's cells (seeds 0-2 at its widths) are its runs; the others the width grid's, pooled with them
    grid = {(c["mixer"], c["N"], c["d"], c["seed"]) for c in mq.configs(False) if not c.get("part")}
    assert {(x["mixer"], x["N"], x["d"], x["seed"]) for x in s["runs"]} == {k for k in grid if k[1] == 16}
    assert len(s["runs"]) + len(s["widths"]) == 60 and s["widths_run"]["cells"] == len(s["widths"])
    assert mq.pooled(s)["baseconv/16/96"]["reached"] == 5 and mq.pooled(s)["baseconv/16/96"]["seeds"] == [0, 1, 2, 3, 4]


def test_cell_state_reads_a_median_of_five_only_where_the_seeds_settle_it():
    s = summary({("attention", 16, 16): [HIT, HIT, HIT], ("attention", 16, 32): [MISS, MISS, MISS],
                 ("attention", 16, 64): [HIT, MISS, HIT, MISS], ("baseconv", 16, 16): [HIT] * 5})
    state = {d: mq.cell_state(s, "attention", 16, d, 5) for d in (16, 32, 64, 96)}
    assert state[16]["state"] == "reach" and state[16]["missing"] == 2
    assert state[32]["state"] == "below"
    assert state[64]["state"] == "open" and state[64]["missing"] == 1  # 2 of 4: the fifth seed decides
    assert state[96] == {"d": 96, "state": "open", "seeds": 0, "reached": 0, "median": None, "missing": 5,
                         "short": False}


def test_criterion_reads_claim_1_where_the_records_decide_it():
    paper = (full("attention", 16, 16) | full("attention", 32, 16) | full("attention", 64, 16)
             | full("baseconv", 16, 64) | full("baseconv", 32, 128) | full("baseconv", 64, 256))
    c = crit(summary(paper))
    assert c["met"] is True and c["per_mixer"] == {"attention": "same", "baseconv": "grows"}
    assert c["smallest"]["baseconv"] == {"16": 64, "32": 128, "64": 256}
    # attention's smallest width grows too: not the paper's contrast
    c = crit(summary(paper | full("attention", 64, 32)))
    assert c["met"] is False and c["per_mixer"]["attention"] == "grows"
    # attention's grows from N = 16 to 32 and is back at 16 at N = 64: the same from the smallest N to the largest,
    # but it grows at a step: not the paper's contrast
    c = crit(summary(paper | full("attention", 32, 32)))
    assert c["per_mixer"]["attention"] == "same" and c["steps"]["attention"] == {"16->32": "grows", "32->64": "smaller"}
    assert c["met"] is False
    # BaseConv's does not grow from the smallest N to the largest: not met
    c = crit(summary(paper | full("baseconv", 64, 64)))
    assert c["met"] is False and c["per_mixer"]["baseconv"] == "same"


def test_criterion_is_undecided_where_cells_are_missing_and_names_them():
    paper = (full("attention", 16, 16) | full("attention", 32, 16) | full("attention", 64, 16)
             | full("baseconv", 16, 64) | full("baseconv", 32, 128))
    # BaseConv at N = 64: three seeds below at d = 16 and 32 only; 64 up have no record
    part = {("baseconv", 64, d): [MISS] * 3 for d in (16, 32)}
    s = summary(paper | part)
    c = crit(s)
    assert c["met"] is None and c["per_mixer"]["baseconv"] == "undecided"
    assert c["bounds"]["baseconv"]["64"] == {"lo": 64, "hi": None, "decided": False}
    assert [x["d"] for x in c["missing"]["baseconv"]["64"]] == [64, 96, 128, 256]
    text = "\n".join(mqr.widths_lines(s, c))
    assert "N = 64: d = 64 or more (open: seeds missing)" in text and "undecided: cells missing" in text
    assert "baseconv, N = 64, d = 64 (0 seeds recorded, 5 of 5 without a record)" in text
    assert "undecided: cells open" in mqr.widths_reading(s)
    # where the seeds recorded there already put BaseConv's width above N = 16's at N = 64, it grows from the
    # smallest N to the largest; from N = 32 (128) to 64 (96 or more) it may still be smaller: not read
    more = {("baseconv", 64, d): [MISS] * 3 for d in (64,)}
    c = crit(summary(paper | part | more))
    assert c["per_mixer"]["baseconv"] == "grows" and c["steps"]["baseconv"]["32->64"] == "undecided"
    assert c["met"] is None
    # and once d = 96 and 128 are below there too, it is larger at every step: met
    c = crit(summary(paper | part | more | {("baseconv", 64, d): [MISS] * 3 for d in (96, 128)}))
    assert c["steps"]["baseconv"] == {"16->32": "grows", "32->64": "grows"} and c["met"] is True
    # one N of the width grid without any record: said, read over the others
    c = crit(summary(full("attention", 16, 16) | full("attention", 32, 16) | full("baseconv", 16, 64)
                     | full("baseconv", 32, 128)))
    assert c["met"] is True and c["notes"] == ["N = 64 of the width grid: no record yet, so read from N = 16 to 32 only"]


def test_decide_order_runs_the_open_crossing_cells_first():
    s = summary({("attention", 16, 16): [HIT] * 3, ("attention", 32, 16): [HIT, MISS, MISS],
                 ("attention", 32, 32): [HIT] * 3, ("baseconv", 16, 32): [MISS] * 3, ("baseconv", 16, 64): [HIT] * 3})
    order = [(c["mixer"], c["N"], c["d"], c["seed"]) for c in mq.decide_order(s, mq.missing_cells(s))]
    assert len(order) == len(mq.missing_cells(s)) == len(set(order))
    # the deciding cells first, at every N alike, the cheapest (N x d) first, seeds 0-2 before 3-4 at equal cost:
    # BaseConv's open d = 16 at N = 16 (the crossing's lower bound there) and the missing seeds of attention's
    # decided crossing there (d = 16), then N = 32's open d = 16 for both mixers
    assert order[:14] == [*[("baseconv", 16, 16, sd) for sd in (0, 1, 2)], ("attention", 16, 16, 3),
                          ("attention", 16, 16, 4), ("baseconv", 16, 16, 3), ("baseconv", 16, 16, 4),
                          *[("baseconv", 32, 16, sd) for sd in (0, 1, 2)], ("attention", 32, 16, 3),
                          ("attention", 32, 16, 4), ("baseconv", 32, 16, 3), ("baseconv", 32, 16, 4)]
    rest = order.index(("attention", 16, 32, 0))  # the first cell that decides nothing yet
    first = order[:rest]
    assert [N * d for _, N, d, _ in first] == sorted(N * d for _, N, d, _ in first)
    # among them: the missing seeds of a crossing's width (BaseConv d = 64 at N = 16, attention d = 32 at N = 32),
    # N = 64 (no record) up to each mixer's largest crossing width elsewhere (attention 32, BaseConv 64)
    for c in [("baseconv", 16, 64, 3), ("attention", 32, 32, 4), ("attention", 64, 32, 0), ("baseconv", 64, 64, 4)]:
        assert c in first
    # not among them: widths above a decided crossing, attention at N = 64 above d = 32
    for c in [("attention", 16, 32, 0), ("baseconv", 16, 96, 0), ("attention", 64, 64, 0), ("baseconv", 64, 96, 0)]:
        assert c not in first
    assert order[-1] == ("baseconv", 64, 256, 4)
    # the rest: seeds 0-2 of every cell, the cheapest first, before any seed 3-4
    later = order[rest:]
    low = [c for c in later if c[3] < 3]
    assert later[:len(low)] == low and [N * d for _, N, d, _ in low] == sorted(N * d for _, N, d, _ in low)
    assert ("attention", 64, 256, 0) in low and later.index(("attention", 64, 256, 0)) < later.index(("attention", 16, 32, 3))


def test_add_widths_records_adds_whole_records_of_the_width_grid_only(tmp_path):
    out, widths = tmp_path / "cpu", tmp_path / "widths"
    (widths / "cells").mkdir(parents=True)
    out.mkdir()
    old = {"id": "x", "cell": CELL, "config": {"part": "tune"}, "status": "ok", "index": 0}
    (out / "results.jsonl").write_text(json.dumps(old) + "\n")
    good = record("attention", 64, 16, 0, 0.95)
    bad = record("attention", 64, 32, 0, 0.95)
    bad["result"]["best_test_acc"] = 1.0  # edited after it was written: its digest no longer matches
    grid = record("attention", 16, 32, 0, 0.95)  # a cell of the CPU grid: its record is the CPU grid run's
    failed = {**record("attention", 64, 16, 1, 0.95), "status": "failed"}
    for rec in (good, bad, grid, failed):
        (widths / "cells" / f"{rec['id']}-{rec['config']['d']}-{rec['config']['seed']}-{rec['status']}.json").write_text(
            json.dumps(rec))
    got = mq.add_widths_records(str(widths), str(out))
    assert got["added"] == 1 and got["replaced"] == 0 and len(got["refused"]) == 2
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["x", good["id"]] and rows[1]["index"] == 1
    assert {k: v for k, v in rows[1].items() if k not in ("index", "resumed")} == good
    # again: the same record replaced, not doubled
    assert mq.add_widths_records(str(widths), str(out))["replaced"] == 1
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("N", [N for N, _ in mq.WIDTHS["sizes"]])
def test_every_width_config_is_a_valid_cell_with_a_vocabulary_above_N(N):
    for c in (c for c in mq.widths_configs() if c["N"] == N):
        assert mq.config_of(c).vocab > N


def test_setting_lines_say_the_width_grids_other_vocabulary():
    s = summary(full("attention", 16, 16) | full("attention", 64, 16) | full("baseconv", 16, 64))
    text = mqr.setting_lines(s)[0]
    assert "N = 16, 32, 64 where the paper runs" in text or "N = 16, 64 where the paper runs" in text
    assert "the width grid's N = 64 at vocabulary 128 instead of 64" in text
    assert "V/N = 4 at N = 16" in text and "V/N = 2 at N = 64" in text
    assert "20,475 possible sets at N = 64" in text


def test_cpu_estimate_reads_the_cell_then_the_nearest_width_then_the_length():
    runs = [{"mixer": "baseconv", "N": 32, "d": 64, "cpu_s": 100.0}, {"mixer": "baseconv", "N": 32, "d": 64, "cpu_s": 120.0},
            {"mixer": "baseconv", "N": 32, "d": 256, "cpu_s": 500.0}, {"mixer": "attention", "N": 16, "d": 16, "cpu_s": 10.0}]
    assert mqr.cpu_estimate(runs, "baseconv", 32, 64) == (110.0, "cell")
    assert mqr.cpu_estimate(runs, "baseconv", 32, 128) == (220.0, "width")  # 64 and 256 equally near: the narrower
    assert mqr.cpu_estimate(runs, "baseconv", 32, 16) == (27.5, "width")
    assert mqr.cpu_estimate(runs, "baseconv", 64, 256) == (1000.0, "length")  # N = 32's d = 256, x 64 / 32
    assert mqr.cpu_estimate(runs, "attention", 32, 32) == (40.0, "length")
    assert mqr.cpu_estimate(runs, "baseconv", 16, 64) is None  # no BaseConv run at N = 16 or below


def test_headline_and_index_state_the_deciding_criterion_first():
    """The section opens, and the index reads, with whether the setting shows Claim 1 by the criterion that measures
    both mixers alike; the other criteria are counted apart and say that they read only the first grid."""
    from numerics.experiments import report

    paper = (full("attention", 16, 16) | full("attention", 32, 16) | full("attention", 64, 16)
             | full("baseconv", 16, 64) | full("baseconv", 32, 128) | full("baseconv", 64, 256))
    for accs, said in ((paper, "shown"), (paper | full("attention", 32, 32), "not shown"),
                       ({k: v for k, v in paper.items() if k[:2] != ("baseconv", 64)}
                        | {("baseconv", 64, d): [MISS] * 3 for d in (16, 32)}, "undecided (cells missing)")):
        s = summary(accs)
        c, others = crit(s), [x for x in s["criteria"] if x["id"] != "widths-vs-N"]
        head, index = mqr.headline(s), report.criteria_state(mq, s)
        assert head.startswith(f"**Claim 1 in this setting: {said}.**") and f"**{said}**" in index
        assert index.startswith("Claim 1") and f"{sum(bool(x['met']) for x in others)} of {len(others)}" in index
        assert "N = 16: 16, N = 32: " in head and c["text"] not in head
        lines = mqr.criteria_lines(s)
        assert lines[0].startswith(f"* {c['text']}")
        marked = [x for x in lines if x.startswith("* ") and "(reads only the first grid: N = " in x]
        assert len(marked) == len(others)
    # a summary without the width grid's criterion: the index counts the criteria met, the section has no headline
    s = summary(paper)
    s["criteria"] = [x for x in s["criteria"] if x["id"] != "widths-vs-N"]
    assert mqr.headline(s) == "" and report.criteria_state(mq, s).startswith("criteria met: ")
    assert not any("reads only the first grid" in x for x in mqr.criteria_lines(s))


def test_missing_lines_give_each_N_its_whole_grid_cost_recorded_plus_estimated():
    """Per N: the CPU the grid's records took (one run per seed) plus the estimate for its missing cells; an N
    without a record of either mixer is all estimate."""
    from numerics.experiments.common import fmt

    accs = full("attention", 16, 16) | {k: v[:3] for k, v in full("baseconv", 16, 96).items()}
    text = mqr.missing_lines(summary(accs))[0]
    # every record took 10 s: 30 attention + 18 BaseConv runs; BaseConv's 12 missing seeds at that cell's 10 s each
    assert f"N = 16: {fmt(480 / 3600)} + {fmt(120 / 3600)} = {fmt(600 / 3600)}" in text
    assert f"N = 32: {fmt(0.0)} + " in text and f"N = 64: {fmt(0.0)} + " in text


def test_relapse_lines_name_the_widths_above_a_crossing_that_fall_below_it_again():
    """A width above the mixer's first crossing whose median (three seeds or more) is below the threshold again is
    named with its median; a cell of fewer seeds is not read, and a grid that stays above after crossing says
    nothing."""
    accs = full("attention", 16, 32) | {("attention", 16, 256): [MISS, MISS, HIT], ("attention", 16, 128): [MISS] * 2}
    text = mqr.relapse_lines(summary(accs))
    assert len(text) == 1 and "attention's median falls below 0.9 again at N = 16, d = 256" in text[0]
    assert "1 of 3 reaching it" in text[0] and "d = 128" not in text[0] and "d = 16 " not in text[0]
    assert mqr.relapse_lines(summary(full("attention", 16, 32) | full("baseconv", 16, 96))) == []
