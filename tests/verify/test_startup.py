"""Light start-up of ``python -m verify.construct``: --help and argument errors
import none of networkx, mpmath, flint, torch (nor numpy or sympy), structurally (``python -X
importtime``: what was imported, not how long it took); the catalogue's manifest, which they read
instead of the registry, is fresh and says what the registry says; the light checks agree with
the heavy ones they stand in for."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import constructions.catalogue as cat
from verify import construct

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("networkx", "mpmath", "flint", "torch", "sympy", "numpy")

LIGHT = [
    (["--help"], 0), (["gd", "--help"], 0), (["s000-read", "--help"], 0), (["gd-lsa", "--help"], 0), (["--list"], 0),
    (["gdd"], 2), ([], 2), (["gd"], 2), (["gd", "--layers", "4", "--arch", "nope"], 2), (["gd", "--layers", "5"], 2),
    (["gd", "--layers", "4", "--arch", "compiled-lsa"], 2), (["gd", "--layers", "4", "--n", "100000"], 2),
    (["gd", "--layers", "4", "--n", "3", "--d", "5"], 2), (["gd", "--layers", "4", "--eta", "x"], 2),
    (["gd", "--layers", "4", "--eta", "-1"], 2), (["gd", "--layers", "4", "--lam", "1"], 2),
    (["gd", "--layers", "4", "--dtype", "float8"], 2), (["gd", "--layers", "4", "--dtype", "float32,"], 2),
    (["gd", "--layers", "4", "--check", "maybe"], 2), (["gd", "--layers", "4", "--random-seed", "1"], 2),
    (["gd", "--layers", "4", "--arch", "lsa", "--conv", "fft"], 2), (["gd", "--layers", "4", "--device", "cuda"], 2),
    (["gd", "--layers", "4", "--batch", "1000000", "--n", "1000", "--d", "1"], 2),
    (["gd", "--layers", "4", "--proof-timeout", "0"], 2), (["gd", "--layers", "4", "--json", "/proc/x.json"], 2),
    (["s000-read", "--set", "q=1"], 2), (["s000-read", "--set", "n=1000"], 2), (["s000-read", "--check", "no"], 2),
]


def _imports(argv: list[str]) -> tuple[int, list[str], str]:
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "verify.construct", *argv], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    mods = [line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2]
    errors = [line for line in p.stderr.splitlines() if not line.startswith("import time:")]
    return p.returncode, mods, "\n".join(errors)


def test_help_and_argument_errors_import_nothing_heavy():
    assert cat.light_source() == "manifest", "the manifest is stale: see test_the_manifest_is_fresh"
    for argv, rc in LIGHT:
        got, mods, err = _imports(argv)
        assert got == rc, (argv, got, err)
        assert not [m for m in HEAVY if m in mods], (argv, [m for m in HEAVY if m in mods])
        if rc == 2:
            assert err.count("\n") == 0 and err.startswith("error: "), (argv, err)


def test_the_manifest_is_fresh():
    path = Path(cat.__file__).with_name(cat.MANIFEST)
    fix = 'regenerate it: python -c "import constructions.catalogue as c; c.write_manifest()"'
    assert path.is_file(), fix
    assert json.loads(path.read_text()) == json.loads(json.dumps(cat.build_manifest())), fix


def test_a_stale_manifest_falls_back_to_the_registry(monkeypatch):
    monkeypatch.setattr(cat, "_LIGHT", {})
    monkeypatch.setattr(cat, "sources_digest", lambda: "something else")
    assert cat.light_source() == "registry"
    assert list(cat.light_entries()) == list(cat.entries())
    assert list(cat.light_gd_architectures()) == list(cat.gd_architectures())
    assert all(e.gd_layers is None for e in cat.light_gd_architectures().values())


def test_the_light_view_says_what_the_registry_says():
    light, reg = cat.light_entries(), cat.entries()
    assert list(light) == list(reg)
    for name, e in reg.items():
        li = light[name]
        assert (li.paper, li.summary, li.sizes, li.claim, li.roles, li.arch, li.depth, li.state, li.ridge) == \
               (e.paper, e.summary, e.sizes, e.claim, e.roles, e.arch, e.depth, e.state, e.ridge)
        assert list(li.sizes) == list(e.sizes)  # the order the help shows
    assert list(cat.light_gd_architectures()) == list(cat.gd_architectures())
    assert cat.light_errata() == list(cat.errata())


def test_names_of_dtypes_and_backends_are_numerics_names():
    from numerics.backends import BACKENDS, DTYPES

    assert construct.DTYPES == DTYPES and construct.BACKENDS == BACKENDS


@pytest.mark.parametrize("arch", list(cat.gd_architectures()))
def test_layer_counts_depth_errors_and_state_sizes_agree_with_the_built_construction(arch):
    from constructions.base import DepthError
    from constructions.layers import BaseConv

    info = cat.light_gd_architectures()[arch]
    for n, d in ((3, 2), (9, 4)):
        con = cat.gd_architectures()[arch].build(n, d)
        assert info.gd_layers == (len(con.prologue), len(con.body), len(con.epilogue))
        assert info.gd_baseconv == any(isinstance(L, BaseConv) for L in con.layers(1))
        size = construct.state_size(info.state, n, d)
        assert size is None or size == con.state_size
        for layers in range(1, 14):
            try:
                con.steps_for_depth(layers)
                want = None
            except DepthError as e:
                want = str(e)
            assert construct.depth_error(con.name, info.gd_layers, layers) == want
    plain = all(c in "0123456789ND+^() x" for c in info.state)
    assert (construct.state_size(info.state, 3, 2) is not None) == plain


def test_the_lazy_parser_fills_the_command_asked_for_as_the_full_one():
    def options(p, cmd):
        sub = next(a for a in p._actions if a.dest == "command")
        return sorted(o for act in sub.choices[cmd]._actions for o in act.option_strings)

    full = construct.build_parser()
    for cmd in ("gd", "s000-read", "gd-elsa"):
        lazy = construct.build_parser(cmd, lazy=True)
        assert options(lazy, cmd) == options(full, cmd) and "--check" in options(full, cmd)
    lazy = construct.build_parser(None, lazy=True)
    assert options(lazy, "gd") == ["--help", "-h"]
