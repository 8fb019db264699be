"""history.json / result.json are strict JSON: a diverged run's NaN and inf are written
as null, noted under "non_finite", and read back as floats by a resumed run and the report."""
import json
import math

import pytest

from numerics.training import RecipeConfig, TaskConfig, TrainConfig, Trainer, jsonio
from numerics.training.report import check_runs


def _strict_load(text: str):
    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def test_round_trip_names_each_non_finite_value():
    rec = {"step": 3, "test_mse": math.nan, "lr": 0.1, "loadavg": [0.5, math.inf], "x": {"y": -math.inf}}
    text = jsonio.dumps([rec])
    data = _strict_load(text)
    assert data[0]["test_mse"] is None and data[0]["loadavg"] == [0.5, None] and data[0]["x"] == {"y": None}
    assert data[0]["non_finite"] == {"test_mse": "nan", "loadavg.1": "inf", "x.y": "-inf"}
    back = jsonio.restore(data[0])
    assert math.isnan(back["test_mse"]) and back["loadavg"][1] == math.inf and back["x"]["y"] == -math.inf
    assert "non_finite" not in back and back["lr"] == 0.1
    assert jsonio.dumps({"a": 1.0}) == '{"a": 1.0}'  # finite records unchanged, no note


def test_a_diverged_run_writes_strict_json_and_resumes(tmp_path):
    root, tmp_path = tmp_path, tmp_path / "div"
    cfg = TrainConfig(task=TaskConfig("gradient", n=4, d=2),
                      recipe=RecipeConfig(lr=1e12, scheduler="constant", ema="none", skip_grad_norm=math.inf),
                      steps=6, batch=8, eval_every=3, eval_batch=16, threads=1)
    cfg.model.width, cfg.model.layers = 4, 1
    Trainer(cfg, tmp_path, progress=False).run()
    hist = _strict_load((tmp_path / "history.json").read_text())
    _strict_load((tmp_path / "result.json").read_text())
    assert any("non_finite" in h for h in hist)  # the step-0 train loss at least (no step taken yet)
    tr = Trainer.resume(tmp_path, steps=8, progress=False)
    assert [h["step"] for h in tr.history] == [h["step"] for h in hist]
    assert all(isinstance(h["train_loss"], float) for h in tr.history)  # NaN again, not None
    runs = check_runs(root)
    assert all(isinstance(r["test_mse"], float) for r in runs["div"])


def test_a_null_loss_without_a_note_is_still_refused_by_the_report(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "history.json").write_text('[{"step": 0, "test_mse": null}]')
    from polyverify.plumbing.cli import UsageError

    with pytest.raises(UsageError, match="test_mse a number"):
        check_runs(tmp_path)
