"""polyverify.plumbing.options: a sweep cell's typed config (CellConfig): defaults in one place, every value
checked however the config is made, one-line errors, and the grid's dict given back key for key."""
from __future__ import annotations

import dataclasses
import json
import pickle

import pytest

from polyverify.plumbing.cli import UsageError
from polyverify.plumbing.options import CellConfig, ConfigError, cell_config, one_of, option, positive


@cell_config
class Base(CellConfig):
    device: str = "cpu"
    order: int = 0


@cell_config
class Train(Base):
    part: str = option(choices=("train",))
    k: int = option(check=(positive, ">= 1"))
    recipe: str = option("paper", choices=("paper", "standard"))
    lr: float | None = None
    width: int = 32
    sizes: tuple[int, ...] = (1, 2)

    def validate(self):
        if self.recipe == "standard" and self.lr is not None:
            raise ConfigError("lr is the recipe's own with recipe 'standard'")


@cell_config
class Probe(CellConfig):
    part: str = option(choices=("probe",))
    n: int = 8


def test_defaults_and_keyword_only_fields_after_a_base_with_defaults():
    c = Train(part="train", k=2)
    assert (c.device, c.order, c.recipe, c.lr, c.width, c.sizes) == ("cpu", 0, "paper", None, 32, (1, 2))
    with pytest.raises(TypeError):
        Train("train", 2)  # keyword-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.k = 3


def test_from_mapping_gives_back_the_dict_it_was_made_from():
    config = {"k": 1, "part": "train", "width": 32, "lr": 1e-2, "sizes": [3, 4]}
    c = Train.from_mapping(config)
    assert c.width == 32 and c.lr == 0.01 and c.sizes == [3, 4]
    m = c.to_mapping()
    assert m == config and list(m) == list(config)  # the explicit default (width 32) kept, the order kept
    assert json.dumps(m) == json.dumps(config)
    assert Train.from_mapping({"part": "train", "k": 1}).to_mapping() == {"part": "train", "k": 1}
    assert Probe.from_mapping({"part": "probe"}).to_mapping() == {"part": "probe"}
    # made directly: every field; equal to the same values made from a mapping
    assert Train(part="train", k=1).to_mapping()["width"] == 32
    assert Train.from_mapping({"part": "train", "k": 1}) == Train(part="train", k=1)
    # pickles (the sweep runner's workers), keeping what it was made from
    assert pickle.loads(pickle.dumps(c)).to_mapping() == config


@pytest.mark.parametrize("config, needle", [
    ({"part": "train", "k": 1, "wdith": 3}, "cell 4: unknown key(s) 'wdith'; Train takes device, order, part, k"),
    ({"part": "train"}, "cell 4: the config needs 'k'"),
    ({"part": "train", "k": 0}, "cell 4: k must be >= 1, got 0"),
    ({"part": "train", "k": True}, "cell 4: k must be an integer, got True"),
    ({"part": "train", "k": 1.0}, "cell 4: k must be an integer, got 1.0"),
    ({"part": "train", "k": 1, "lr": "big"}, "cell 4: lr must be a number or None, got 'big'"),
    ({"part": "train", "k": 1, "lr": float("nan")}, "cell 4: lr must be a number or None, got nan"),
    ({"part": "train", "k": 1, "recipe": "sgd"}, "cell 4: recipe must be one of 'paper', 'standard', got 'sgd'"),
    ({"part": "train", "k": 1, "sizes": [1, "2"]}, "cell 4: sizes must be a list of an integer, got [1, '2']"),
    ({"part": "train", "k": 1, "recipe": "standard", "lr": 1e-3}, "cell 4: lr is the recipe's own"),
])
def test_bad_configs_are_one_line_errors(config, needle):
    with pytest.raises(ConfigError) as e:
        Train.from_mapping(config, where="cell 4")
    msg = str(e.value)
    assert msg.startswith(needle) and "\n" not in msg
    assert isinstance(e.value, UsageError) and isinstance(e.value, ValueError)


def test_direct_construction_is_checked_too():
    with pytest.raises(ConfigError, match="k must be >= 1"):
        Train(part="train", k=-1)
    with pytest.raises(ConfigError, match="width must be an integer"):
        Train(part="train", k=1, width="32")


def test_one_of_picks_the_class_by_its_key():
    classes = {"train": Train, "probe": Probe}
    assert one_of({"part": "probe", "n": 3}, "part", classes) == Probe(part="probe", n=3)
    assert isinstance(one_of({"part": "train", "k": 2}, "part", classes), Train)
    with pytest.raises(ConfigError, match=r"^grid: part must be one of 'train', 'probe', got 'macaque'$"):
        one_of({"part": "macaque"}, "part", classes, where="grid")
    with pytest.raises(ConfigError, match="part must be one of .* got None"):
        one_of({}, "part", classes)
    with pytest.raises(ConfigError, match="a cell's config is a dict"):
        Train.from_mapping([("k", 1)])
