"""numerics/experiments: each experiment's typed cell configs (polyverify.plumbing.options.CellConfig): every
grid's dicts and every committed record's ``config`` read through ``config_of`` and given back key
for key (so the sweep runner's cell ids and the records stay what they were), defaults in one place,
bad configs refused in one line before any cell runs."""
import json
from pathlib import Path

import pytest

from numerics.experiments import EXPERIMENTS, load
from numerics.experiments import seed000_table7 as t7
from numerics.experiments import seed002_ntk as s2
from numerics.experiments import seed004_table1 as s4
from numerics.experiments.common import OnDevice, cell_budget, grid_configs
from polyverify.plumbing.options import ConfigError

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "experiments"
TYPED = [m for m in (load(n) for n in EXPERIMENTS) if hasattr(m, "config_of")]


@pytest.mark.parametrize("module", TYPED, ids=lambda m: m.NAME)
@pytest.mark.parametrize("quick", [True, False])
def test_every_grid_config_is_read_and_given_back_unchanged(module, quick):
    grids = [module.configs(quick)] + ([module.gpu_configs(quick)] if hasattr(module, "gpu_configs") else [])
    for configs in grids:
        for i, c in enumerate(configs):
            typed = module.config_of(c, where=f"cell {i}")
            assert typed.to_mapping() == c and list(typed.to_mapping()) == list(c)
            assert json.dumps(typed.to_mapping()) == json.dumps(c)


@pytest.mark.parametrize("module", TYPED, ids=lambda m: m.NAME)
def test_every_committed_record_config_reads(module):
    files = [p for p in (RESULTS / module.NAME / "results.jsonl", RESULTS / "gpu" / module.NAME / "results.jsonl")
             if p.exists()]
    assert files or module.NAME not in ("seed000-table7", "seed002-ntk", "seed004-table1")
    for p in files:
        for line in p.read_text().splitlines():
            config = json.loads(line)["config"]
            assert module.config_of(config).to_mapping() == config


def test_defaults_live_in_the_config():
    c = t7.config_of({"k": 2, "steps": 30, "recipe": "paper"})
    assert (c.width, c.batch, c.eval_batch, c.final_eval, c.init_scale, c.dtype, c.init) == \
        (32, 256, 1024, 8192, t7.INIT_SCALE, "float32", "random")
    assert (c.device, c.grid, c.order, c.cells) == ("cpu", "cpu", 0, 1)
    d = s2.config_of({"part": "delay", "delay": 2, "steps": 5})
    assert (d.T, d.n_x, d.n_train, d.n_test, d.draws, d.snr_db) == (20, 15, 10, 10, 20, 20.0)
    m = s4.config_of({"kind": "model", "variant": "full", "layers": 2, "column": "3", "steps": 5, "eval": 10})
    assert m.recipe() == {**s4.RECIPE, "init_std": s4.INIT_STD["full"]}
    m = s4.config_of({"kind": "model", "variant": "diag", "layers": 2, "column": "3", "steps": 5, "eval": 10,
                      "lr": 1e-3, "init_std": 0.05})
    assert m.recipe() == {**s4.RECIPE, "lr": 1e-3, "init_std": 0.05} and list(m.recipe()) == [*s4.RECIPE, "init_std"]


@pytest.mark.parametrize("module, config, needle", [
    (t7, {"k": 1, "steps": 5, "recipe": "paper", "widht": 8}, "unknown key(s) 'widht'"),
    (t7, {"k": 0, "steps": 5, "recipe": "paper"}, "k must be >= 1, got 0"),
    (t7, {"k": 1, "steps": 5, "recipe": "paper", "init": "warm"}, "init must be one of 'random', 'exact'"),
    (t7, {"k": 1, "steps": 5, "recipe": "paper", "settings": "fast"}, "settings must be one of 'training-doc'"),
    (t7, {"k": 1, "steps": "5", "recipe": "paper"}, "steps must be an integer, got '5'"),
    (s2, {"part": "delay", "delay": 20, "steps": 5}, "delay must be below T = 20, got 20"),
    (s2, {"part": "ntk", "n": 5, "T": 3}, "the config needs 'seed'"),
    (s4, {"kind": "baselines", "column": "9", "eval": 5, "tune": 5}, "column must be one of '0'"),
    (s4, {"kind": "baselines", "column": "3", "eval": 5, "tune": 5, "draws": 0}, "draws must be >= 1, got 0"),
])
def test_a_bad_cell_is_one_line_before_any_work(module, config, needle):
    with pytest.raises(ConfigError) as e:
        module.cell(config)
    assert needle in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("cell: ")


def test_grid_configs_reads_every_cell_and_refuses_a_device_the_cells_do_not_have():
    assert grid_configs(t7, True, "cpu", "cuda")[0]["device"] == "cuda"  # table 7 trains on a device
    with pytest.raises(ConfigError, match=r"^--device cuda: seed004-table1's cells run on the CPU only$"):
        grid_configs(s4, True, "cpu", "cuda")

    class Broken:
        NAME = "broken"
        config_of = staticmethod(t7.config_of)

        @staticmethod
        def configs(quick):
            return [{"k": 1, "steps": 5, "recipe": "paper"}, {"k": 1, "steps": 5, "recipe": "adam"}]

    with pytest.raises(ConfigError, match=r"^broken --quick cell 1: recipe must be one of 'paper', 'standard'"):
        grid_configs(Broken, True)


def test_cell_budget_reads_the_typed_config_or_its_dict(monkeypatch):
    import time

    from numerics.experiments import common

    assert cell_budget(OnDevice()) is None
    monkeypatch.setenv(common.DEADLINE_ENV, repr(time.time() + 1000))
    monkeypatch.setenv(common.WORKERS_ENV, "2")
    # 4 cells still to start (this one the 3rd of 6) on 2 workers: 2 rounds share the time left
    a, b = cell_budget(OnDevice(order=2, cells=6)), cell_budget({"order": 2, "cells": 6})
    assert a == pytest.approx((1000 - common.MARGIN_S) / 2, abs=2) and b == pytest.approx(a, abs=1)
