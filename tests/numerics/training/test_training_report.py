"""The recipe / StepLR comparison of ``numerics.training.report`` on hand-made histories."""
import pytest

from numerics.training.report import at_step, ratio_summary, summary_table


def hist(pairs):
    return [{"step": s, "test_mse": m} for s, m in pairs]


def test_ratio_summary_counts_points_and_the_step_from_which_it_holds():
    a = hist([(0, 1.0), (10, 1e-3), (20, 1e-5), (30, 1e-6), (40, 1e-7)])
    b = hist([(0, 1.0), (10, 1e-2), (20, 1e-2), (30, 1e-5), (40, 1e-4), (50, 1e-9)])
    s = ratio_summary(a, b)
    assert s["points"] == 4                       # step 0 excluded; 50 is not common
    assert s["at_least"] == 2                     # 1000x at 20, 1000x at 40; 10x at 10 and 30
    assert s["min"] == pytest.approx(10.0) and s["from_step"] == 40
    assert s["ratio_last"] == pytest.approx(1000.0) and s["last_step"] == 40
    assert s["ratio_last_vs_best"] == pytest.approx(1e-5 / 1e-7)   # StepLR's best up to step 40


def test_ratio_summary_never_when_the_last_point_is_below_the_factor():
    a = hist([(0, 1.0), (10, 1e-6), (20, 1e-3)])
    b = hist([(0, 1.0), (10, 1e-3), (20, 1e-3)])
    s = ratio_summary(a, b)
    assert s["from_step"] is None and s["at_least"] == 1
    assert "never" in summary_table({"r": a, "s": b}, pairs=[("r", "s")])


def test_at_step_takes_the_last_evaluation_at_or_before():
    h = hist([(0, 1.0), (10, 0.5), (20, 0.25)])
    assert at_step(h, 15) == 0.5 and at_step(h, 20) == 0.25
