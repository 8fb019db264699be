"""zoology's and icl-gd's importers keep the dense float tensors as stored (``constructions.exact_floats``,
issue 41): the lazy reading gives the same exact values and the same verdict as one ``Fraction`` per entry, a
one-ulp change of one stored entry is still FAILED, and a file is bounded by ``weights_io.MAX_ENTRIES`` (the
eager takes by ``MAX_EAGER_ENTRIES``), not refused for its size at the eager bound."""
from __future__ import annotations

import io
from fractions import Fraction

import numpy as np
import pytest

from constructions import weights_io
from constructions.catalogue import entries
from constructions.exact_floats import is_lazy
from verify import export as E
from verify.construct import main
from verify.importers import common, icl_gd, zoology
from verify.importers.common import ImportRefused

ARRAYS = ("W_in", "b_in", "h", "b_conv", "W_gate", "b_gate", "W_out", "b_out")


def _values(a) -> list:
    return [Fraction(x) for x in np.asarray(a).ravel().tolist()]


def _same_exact(imp_lazy, imp_eager) -> None:
    assert len(imp_lazy.layers) == len(imp_eager.layers)
    for La, Lb in zip(imp_lazy.layers, imp_eager.layers):
        if La.kind == "baseconv":
            for n in ARRAYS:
                assert _values(getattr(La, n)) == _values(getattr(Lb, n)), n
        else:
            for ha, hb in zip(La.heads, Lb.heads):
                assert _values(ha.P) == _values(hb.P) and _values(ha.Q) == _values(hb.Q)


def _export(tmp_path, name, fmt, suffix):
    e = entries()[name]
    con = e.build(**e.sizes)
    path = tmp_path / f"w{suffix}"
    E.export(path, con, fmt, k=2 if con.body else 0)
    return path


def _import(path, fmt) -> tuple[int, str]:
    out = io.StringIO()
    rc = main(["import", str(path), "--from", fmt, "--no-search"], out=out)
    return rc, out.getvalue()


def _verdict(text: str) -> str:
    return next(s for s in text.splitlines() if s.startswith("verdict:")).split(":")[1].strip()


def _eager(monkeypatch):
    """Every take one Fraction per entry (the reading before the lazy importers)."""
    monkeypatch.setattr(common, "lazy_tensor", weights_io.exact_tensor)


def _one_ulp(t: np.ndarray, key) -> None:
    """The first nonzero entry of ``t`` moved by one unit in the last place (in place)."""
    i = tuple(int(x) for x in np.argwhere(t != 0)[0])
    t[i] = np.nextafter(t[i], np.inf, dtype=t.dtype)


# ------------------------------------------------------------------ zoology

def _safetensors(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


@pytest.mark.parametrize("name", ["s003-conv", "s003-linear"])
def test_zoology_export_lazy_and_eager_same_values_and_verdict(tmp_path, monkeypatch, name):
    path = _export(tmp_path, name, "zoology", ".safetensors")
    lazy = zoology.read(path, {})
    assert is_lazy(lazy.layers[0].W_gate) and is_lazy(lazy.layers[0].h)  # kept as stored
    _same_exact(lazy, zoology.read(path, {}, lazy=False))
    rc, text = _import(path, "zoology")
    assert rc == 0 and _verdict(text) == "PROVED", text
    _eager(monkeypatch)
    assert not is_lazy(zoology.read(path, {}).layers[0].W_gate)
    rc_e, text_e = _import(path, "zoology")
    assert (rc_e, _verdict(text_e)) == (rc, _verdict(text))


@pytest.mark.parametrize("name,tensor", [("s003-linear", "projection.weight"), ("s003-conv", "conv.conv.weight")])
def test_zoology_one_ulp_tampered_entry_fails(tmp_path, name, tensor):
    from safetensors.numpy import save_file

    path = _export(tmp_path, name, "zoology", ".safetensors")
    meta, t = _safetensors(path)
    key = next(k for k in t if k.endswith(tensor) and np.count_nonzero(t[k]))
    _one_ulp(t[key], key)
    save_file(t, str(path), metadata=meta)
    rc, text = _import(path, "zoology")
    assert rc == 1 and _verdict(text) == "FAILED", text


def _long_filter_file(tmp_path, T: int, C: int, L: int, dtype, wrap: bool = False, tiny_lag0: bool = False):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(T * 100 + C)
    f = rng.standard_normal((C, L)).astype(dtype)
    if not wrap and L > T + 1:
        f[:, T + 1:min(2 * T, L)] = 0  # no tap wraps round (convs.fft2t_taps)
    if tiny_lag0:
        f[0, 0] = 2.0 ** -70  # f + 1 is no float64: the lag-0 sum read as its exact rational
    t = {"backbone.layers.0.sequence_mixer.projection.weight": rng.standard_normal((C, C)).astype(dtype),
         "backbone.layers.0.sequence_mixer.projection.bias": rng.standard_normal(C).astype(dtype),
         "backbone.layers.0.sequence_mixer.conv.filter": f}
    path = tmp_path / "long.safetensors"
    save_file(t, str(path), metadata={"config": f'{{"tokens": {T}}}'})
    return path


@pytest.mark.parametrize("T,L,dtype,tiny", [(6, 6, np.float32, False), (6, 6, np.float64, True),
                                             (4, 13, np.float32, False)])
def test_zoology_long_filter_lazy_is_the_eager_reading(tmp_path, T, L, dtype, tiny):
    path = _long_filter_file(tmp_path, T, 3, L, dtype, tiny_lag0=tiny)
    lazy, eager = zoology.read(path, {}), zoology.read(path, {}, lazy=False)
    h = lazy.layers[0].h
    assert is_lazy(h) and len(h.over_pos) == int(tiny)
    _same_exact(lazy, eager)
    assert lazy.conventions == eager.conventions  # inert taps (lag T, lags >= 2T) counted the same


def test_zoology_long_filter_that_wraps_is_read_as_before(tmp_path):
    path = _long_filter_file(tmp_path, 4, 3, 7, np.float32, wrap=True)  # lags 5, 6 wrap round: no convention
    with pytest.raises(ImportRefused, match="wraps"):
        zoology.read(path, {})
    with pytest.raises(ImportRefused, match="wraps"):
        zoology.read(path, {}, lazy=False)


def test_zoology_file_above_the_eager_bound_is_read_lazily(tmp_path, monkeypatch):
    path = _long_filter_file(tmp_path, 6, 5, 6, np.float32)
    n = 5 * 5 + 5 + 5 * 6  # projection weight, bias, filter
    eager_read = 5  # the bias (the dense tensors are kept as stored)
    monkeypatch.setattr(weights_io, "MAX_EAGER_ENTRIES", eager_read)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n)
    assert is_lazy(zoology.read(path, {}).layers[0].W_gate)
    with pytest.raises(ImportRefused, match=f"{n} entries, above the limit {eager_read}"):
        zoology.read(path, {}, lazy=False)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n - 1)
    with pytest.raises(ImportRefused, match=f"{n} entries, above the limit {n - 1}"):
        zoology.read(path, {})
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n)
    monkeypatch.setattr(weights_io, "MAX_EAGER_ENTRIES", eager_read - 1)  # the eager takes are bounded too
    with pytest.raises(ImportRefused, match="one Fraction each, above the limit 4"):
        zoology.read(path, {})


# ------------------------------------------------------------------ icl-gd

def _learned_icl_gd(tmp_path, D: int, H: int, layers: int, dtype=np.float32):
    rng = np.random.default_rng(D + H)
    e = 8 if dtype == np.float16 else 30  # float16 holds 2^-24 .. 2^15
    t = {}
    for l in range(layers):
        pre = f"transformer/~trans_block/layer_{l}/"
        for name, shape in (("query", (D, H * D)), ("key", (D, H * D)), ("value", (D, H * D)),
                            ("linear", (H * D, D))):
            t[f"{pre}{name}/w"] = (rng.standard_normal(shape) * 2.0 ** rng.integers(-e, e, shape)).astype(dtype)
    t["transformer/~trans_block/layer_0/query/b"] = np.zeros(H * D, dtype=dtype)
    path = tmp_path / "icl.npz"
    np.savez(path, **t)
    return path


def test_icl_gd_export_lazy_and_eager_same_values_and_verdict(tmp_path, monkeypatch):
    path = _export(tmp_path, "s004-gd", "icl-gd", ".safetensors")
    _same_exact(icl_gd.read(path, {}), icl_gd.read(path, {}, lazy=False))
    rc, text = _import(path, "icl-gd")
    assert rc == 0 and _verdict(text) == "PROVED", text
    _eager(monkeypatch)
    rc_e, text_e = _import(path, "icl-gd")
    assert (rc_e, _verdict(text_e)) == (rc, _verdict(text))


@pytest.mark.parametrize("H,dtype,y_update", [(1, np.float32, False), (2, np.float64, True), (3, np.float16, False)])
def test_icl_gd_learned_heads_lazy_are_the_eager_products(tmp_path, H, dtype, y_update):
    """Dense floats over a wide exponent range (2^-30 .. 2^30 scales): P and Q exactly as the Fraction path."""
    path = _learned_icl_gd(tmp_path, 4, H, 2, dtype)
    cfg = {"num_heads": H, "y_update": y_update, "dampening": "3/7"}
    _same_exact(icl_gd.read(path, cfg), icl_gd.read(path, cfg, lazy=False))


def test_icl_gd_exact_float_product_is_the_rational_product():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((3, 4)) * 2.0 ** rng.integers(-1070, 1000, (3, 4))
    B = rng.standard_normal((4, 2)).astype(np.float32)
    A[0] = 0
    got = icl_gd.exact_float_product(A, B)
    want = [[sum((Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(4)), Fraction(0))
             for j in range(2)] for i in range(3)]
    assert [[Fraction(x) for x in r] for r in got.tolist()] == want
    assert all(x == 0 and type(x) is int for x in got[0])  # a zero is the int 0


@pytest.mark.parametrize("tensor", ["key/w", "linear/w"])
def test_icl_gd_one_ulp_tampered_entry_fails(tmp_path, tensor):
    from safetensors.numpy import save_file

    path = _export(tmp_path, "s004-gd", "icl-gd", ".safetensors")
    meta, t = _safetensors(path)  # (the config travels in the metadata)
    key = next(k for k in t if k.endswith(tensor))
    _one_ulp(t[key], key)
    save_file(t, str(path), metadata=meta)
    rc, text = _import(path, "icl-gd")
    assert rc == 1 and _verdict(text) == "FAILED", text


def test_icl_gd_file_above_the_eager_bound_is_read_lazily(tmp_path, monkeypatch):
    path = _learned_icl_gd(tmp_path, 3, 1, 2)
    n = 2 * 4 * 9 + 3  # two layers' four 3 x 3 weights and a bias
    monkeypatch.setattr(weights_io, "MAX_EAGER_ENTRIES", 3)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n)
    cfg = {"num_heads": 1}
    assert len(icl_gd.read(path, cfg).layers) == 2
    with pytest.raises(ImportRefused, match=f"{n} entries, above the limit 3"):
        icl_gd.read(path, cfg, lazy=False)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n - 1)
    with pytest.raises(ImportRefused, match=f"{n} entries, above the limit {n - 1}"):
        icl_gd.read(path, cfg)


# ------------------------------------------------------------------ precision-ls (its dense tensors read lazily since 254ad20)

def test_precision_ls_file_above_the_eager_bound_is_read(tmp_path, monkeypatch):
    from verify.importers import precision_ls

    path = _export(tmp_path, "s003-linear", "precision-ls", ".safetensors")
    n = sum(int(np.prod(t.shape)) for t in _safetensors(path)[1].values())
    monkeypatch.setattr(weights_io, "MAX_EAGER_ENTRIES", n - 1)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n)
    assert is_lazy(precision_ls.read(path, {}).layers[0].W_in)
    monkeypatch.setattr(weights_io, "MAX_ENTRIES", n - 1)
    with pytest.raises(ImportRefused, match=f"{n} entries, above the limit {n - 1}"):
        precision_ls.read(path, {})
