"""One module per format behind one registry (issue 44 item 6): ``verify.importers.REGISTRY`` is the
only table of formats; each format's module holds its reader, writer and settings; the parsers'
names and suffixes come from the registry without importing any format."""
import subprocess
import sys

import pytest

from verify import cli_common, export as E
from verify.importers import FORMATS, REGISTRY, SUFFIXES
from verify.importers.writing import ExportError

#: what every format's module has: its name, reader, reader's settings and what its writer fixes
READER = ("NAME", "SETTINGS", "read", "default_layout", "frozen")
#: a peer format's writer (tensors and config; verify/export.py writes the container by suffix)
PLAN = ("plan", "SHOWN", "FLOAT64", "check_config")
#: a format that writes its own container (polyverify)
SAVE = ("save", "check_writable", "WRITTEN_AS")


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_format_is_one_module_with_reader_and_writer(name):
    mod = FORMATS[name]
    assert mod.__name__ == f"verify.importers.{REGISTRY[name][0]}"
    missing = [a for a in READER if not hasattr(mod, a)]
    writer = PLAN if hasattr(mod, "plan") else SAVE
    missing += [a for a in writer if not hasattr(mod, a)]
    assert not missing, f"{name}: {mod.__name__} lacks {missing}"
    assert mod.NAME == name
    if hasattr(mod, "plan"):
        assert set(mod.SHOWN) <= set(mod.SETTINGS) | {"num_layers", "use_resid", "conv_type"}


def test_the_parsers_tables_are_the_registry():
    assert cli_common.FORMATS == tuple(REGISTRY) == tuple(FORMATS) == E.FORMATS
    assert cli_common.SUFFIXES is SUFFIXES and cli_common.DEFAULT_FORMAT == "polyverify"
    assert set(SUFFIXES) == set(REGISTRY) and all(SUFFIXES[n] == REGISTRY[n][1] for n in REGISTRY)
    # the --format help names each peer format's suffixes from the registry
    import argparse

    p = argparse.ArgumentParser()
    cli_common.add_export_arguments(p)
    text = " ".join(p.format_help().split())
    for n, s in SUFFIXES.items():
        if n != "polyverify":
            assert f"{n}: {', '.join(s)}" in text


def test_the_registry_is_light():
    """A parser's names and suffixes import no format (numpy, torch): --help stays light."""
    code = ("import sys, verify.cli_common as c, verify.importers as i; assert 'icl-gd' in i.FORMATS; "
            "print('numpy' in sys.modules, any(m.startswith('verify.importers.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_unknown_formats_are_refused():
    with pytest.raises(KeyError):
        FORMATS["onnx"]
    with pytest.raises(ExportError, match="unknown format 'onnx'"):
        E.frozen_for("onnx")
    with pytest.raises(ExportError, match=r"unknown peer format 'polyverify' \(formats: precision-ls, zoology, "
                                          r"icl-gd\)"):
        E.plan(None, "polyverify")
