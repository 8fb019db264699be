"""verify.catalogue_report: its options typed (CatalogueReportOptions, from its parser) and its sweep
cell's config typed (CatalogueCell): an unknown key, a missing entry or an unknown entry is one line."""
import dataclasses

import pytest

from polyverify.plumbing.cli import UsageError
from verify import catalogue_report as cr


def test_options_come_from_the_parser():
    assert [f.name for f in dataclasses.fields(cr.CatalogueReportOptions)] == ["markdown"]
    a = cr.CatalogueReportOptions.from_args(cr.build_parser().parse_args(["--markdown", "x.md"]))
    assert a.markdown == "x.md" and cr.CatalogueReportOptions().markdown is None


def test_a_catalogue_cell_is_one_entry():
    assert cr.sweep_check({"entry": "gd-baseconv"}) == {"entry": "gd-baseconv"}
    assert cr.CatalogueCell.from_mapping({"entry": "gd-baseconv"}).entry == "gd-baseconv"


@pytest.mark.parametrize("config, needle", [
    ({"entry": "gd-baseconv", "sizes": 3}, "cell 2: unknown key(s) 'sizes'; CatalogueCell takes entry"),
    ({}, "cell 2: the config needs 'entry'"),
    ({"entry": "nope"}, "cell 2: unknown catalogue entry 'nope' (python -m verify.construct --list)"),
    ({"entry": 3}, "cell 2: entry must be a string, got 3"),
])
def test_a_bad_catalogue_cell_is_one_line(config, needle):
    with pytest.raises(UsageError) as e:
        cr.sweep_check(config, where="cell 2")
    assert str(e.value) == needle
