"""Each importer's reading of a peer's layer against what the peer's own
module computes, at fewer tokens than the filter, as many, and more; and the import defects
(inert taps, icl-gd's head count, a PROVED over a partial layout, a FAILED at layer 0).

The peers' forwards below are written here from reading their code (never imported or copied):

* zoology ``zoology/mixers/base_conv.py`` ``BaseConv.forward``: ``conv(u) * projection(u) + u``;
  ``convolution.py`` ``ShortConvolution``: depthwise ``Conv1d(padding=K-1)``, first T outputs;
  ``LongConvolution`` -> ``fft_conv(u, filter)``: ``rfft`` of ``u`` and of the filter *as stored*
  with ``n = 2T`` (``torch.fft.rfft(k, n=2T)`` zero-pads a shorter filter and trims a longer one
  to 2T taps; the filter is not cut to T), product, ``irfft(n=2T)``, first T outputs, ``+ u``.
* precision-ls ``src/models/mixers/base_conv.py`` ``BaseConv.forward``:
  ``out_proj(conv(in_proj(u)) * projection(u))``, then ``bw0 * y + bw1 * u`` with ``resid``, to
  which ``src/models/gpt2.py``'s ``Block`` adds ``u`` (``use_resid``, ``block_lr = 1``);
  ``convs/convolution.py``: ``ShortConvolution`` ``Conv1d(padding=K-1)`` (causal) or
  ``padding=K//2`` (not), first T outputs, ``+ x`` with ``resid``; ``fft_conv`` cuts the filter to
  ``k[..., :T]``, FFT of size 2T (causal) or T (not), ``+ u`` with ``resid``.
* von Oswald et al. ``src/attn.py`` ``MultiHeadAttention`` (linear, no bias): per head ``h``
  columns ``h*K .. (h+1)*K`` of the query/key/value projections, logits ``q . k`` over the keys
  (all tokens but the query, ``include_query=False``), heads concatenated, ``linear``;
  ``transformer.py`` ``trans_block``: ``h + dampening * attn``.

The importer's layers are run exactly (Fractions) on dyadic inputs and compared with the peer's
float64 forward (FFT roundoff only: 1e-9)."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from verify.construct import main
from verify.importers import icl_gd, precision_ls, zoology
from verify.importers.common import ImportRefused

torch = pytest.importorskip("torch", reason="the peers' forwards are torch modules")
F = torch.nn.functional
from safetensors.numpy import save_file  # noqa: E402


def exact(a):
    return np.vectorize(Fraction, otypes=[object])(np.asarray(a, dtype=np.float64))


def run_exact(layers, u) -> np.ndarray:
    S = exact(u)
    for L in layers:
        S = L.forward(S)
    return np.vectorize(float, otypes=[float])(S)


def dyadic(rng, *shape, scale=4):
    return rng.integers(-4, 5, size=shape) / scale


# ------------------------------------------------------------------ the peers' forwards

def zoology_fft_conv(x, k):
    """zoology's fft_conv (gelu off): x (B, C, T), k (C, L) as stored."""
    T = x.shape[-1]
    n = 2 * T
    y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)[..., :T]
    return y + x


def zoology_forward(sd: dict, u: np.ndarray, pre: str) -> np.ndarray:
    t = {k[len(pre):]: torch.tensor(v, dtype=torch.float64) for k, v in sd.items() if k.startswith(pre)}
    x = torch.tensor(u, dtype=torch.float64)[None]  # (1, T, C)
    T = x.shape[1]
    if "conv.filter" in t:
        conv = zoology_fft_conv(x.transpose(1, 2), t["conv.filter"]).transpose(1, 2)
    else:
        w = t["conv.conv.weight"]
        conv = F.conv1d(x.transpose(1, 2), w, t["conv.conv.bias"], padding=w.shape[-1] - 1,
                        groups=w.shape[0])[..., :T].transpose(1, 2)
    proj = x @ t["projection.weight"].T + t["projection.bias"]
    return (conv * proj + x)[0].numpy()


def precision_ls_forward(sd: dict, u: np.ndarray, pre: str, causal: bool) -> np.ndarray:
    t = {k[len(pre):]: torch.tensor(v, dtype=torch.float64) for k, v in sd.items() if k.startswith(pre)}
    resid = "branch_weights" in t
    x = torch.tensor(u, dtype=torch.float64)[None]
    T = x.shape[1]

    def lin(name, z):
        return z @ t[name + ".weight"].T + t[name + ".bias"]

    v = lin("in_proj", x).transpose(1, 2)  # (1, C, T)
    if "conv.filter" in t:
        n = 2 * T if causal else T
        k = t["conv.filter"][..., :T]
        conv = torch.fft.irfft(torch.fft.rfft(v, n=n) * torch.fft.rfft(k, n=n), n=n)[..., :T]
    else:
        w = t["conv.conv.weight"]
        K = w.shape[-1]
        conv = F.conv1d(v, w, t["conv.conv.bias"], padding=K - 1 if causal else K // 2, groups=w.shape[0])[..., :T]
    if resid:
        conv = conv + v
    y = lin("out_proj", conv.transpose(1, 2) * lin("projection", x))
    if resid:  # BaseConv's branch weights, then gpt2.py's Block adds x (block_lr = 1)
        y = x + (t["branch_weights"][0] * y + t["branch_weights"][1] * x)
    return y[0].numpy()


def icl_forward(w: dict, h: np.ndarray, heads: int, mod: str, damp=1.0) -> np.ndarray:
    q, k, v, o = (np.asarray(w[f"{mod}/{n}/w"], dtype=np.float64) for n in ("query", "key", "value", "linear"))
    ctx = h[:-1]
    K, V = q.shape[1] // heads, v.shape[1] // heads
    out = []
    for i in range(heads):
        qi, ki, vi = h @ q[:, i * K:(i + 1) * K], ctx @ k[:, i * K:(i + 1) * K], ctx @ v[:, i * V:(i + 1) * V]
        out.append((qi @ ki.T) @ vi)
    return h + damp * (np.concatenate(out, axis=1) @ o)


# ------------------------------------------------------------------ files

ZPRE = "backbone.layers.0.sequence_mixer."
PPRE = "_backbone.transformer.h.0.seq_mixer.base_conv."


def zoology_file(tmp_path, rng, C, *, filt=None, w=None, name="z.safetensors"):
    sd = {ZPRE + "projection.weight": dyadic(rng, C, C), ZPRE + "projection.bias": dyadic(rng, C)}
    if filt is not None:
        sd[ZPRE + "conv.filter"] = np.asarray(filt, dtype=np.float64)
    else:
        sd[ZPRE + "conv.conv.weight"] = np.asarray(w, dtype=np.float64)
        sd[ZPRE + "conv.conv.bias"] = dyadic(rng, C)
    p = tmp_path / name
    save_file(sd, str(p))
    return p, sd


def pls_file(tmp_path, rng, C, T, *, causal, filt=None, w=None, resid=False):
    sd = {}
    for n in ("in_proj", "projection", "out_proj"):
        sd[PPRE + n + ".weight"], sd[PPRE + n + ".bias"] = dyadic(rng, C, C), dyadic(rng, C)
    if filt is not None:
        sd[PPRE + "conv.filter"] = np.asarray(filt, dtype=np.float64)
    else:
        sd[PPRE + "conv.conv.weight"] = np.asarray(w, dtype=np.float64)
        sd[PPRE + "conv.conv.bias"] = dyadic(rng, C)
    if resid:
        sd[PPRE + "branch_weights"] = np.array([0.75, 0.0])
    p = tmp_path / "p.safetensors"
    save_file(sd, str(p), metadata={"config": json.dumps({"causal": causal, "tokens": T})})
    return p, sd


def zoology_read_checked(tmp_path, rng, T, **file):
    """A zoology file (``zoology_file``'s keywords) read at T tokens: its layers, run exactly on a
    dyadic input, equal the peer's forward. The import."""
    p, sd = zoology_file(tmp_path, rng, C, **file)
    imp = zoology.read(p, {"tokens": str(T)})
    u = dyadic(rng, T, C)
    np.testing.assert_allclose(run_exact(imp.layers, u), zoology_forward(sd, u, ZPRE), atol=1e-9)
    return imp


def pls_read_checked(tmp_path, rng, T, causal, **file):
    """The same for a precision-ls file (``pls_file``'s keywords)."""
    p, sd = pls_file(tmp_path, rng, C, T, causal=causal, **file)
    imp = precision_ls.read(p, {})
    u = dyadic(rng, T, C)
    np.testing.assert_allclose(run_exact(imp.layers, u), precision_ls_forward(sd, u, PPRE, causal), atol=1e-9)
    return imp


C = 3


# ------------------------------------------------------------------ zoology at T <, = and > the filter length

@pytest.mark.parametrize("T", [2, 4, 7])
def test_zoology_short_convolution_is_the_peers_at_every_length(tmp_path, T):
    rng = np.random.default_rng(T)
    imp = zoology_read_checked(tmp_path, rng, T, w=dyadic(rng, C, 1, 4))  # K = 4
    assert ("inert_taps" in imp.conventions) == (T < 4)


@pytest.mark.parametrize("T", [5, 6, 9])
def test_zoology_long_convolution_without_wrap_is_the_peers(tmp_path, T):
    rng = np.random.default_rng(T)
    imp = zoology_read_checked(tmp_path, rng, T, filt=dyadic(rng, C, 6))  # L = 6 <= T + 1: nothing wraps (lag T: inert)
    assert imp.conventions["convolution"]["value"] == "causal"


@pytest.mark.parametrize("T", [2, 3, 4])
def test_zoology_long_convolution_that_wraps_is_refused_naming_the_taps(tmp_path, T):
    """L = 6 > T: taps at lags T+1..min(L, 2T)-1 move later tokens onto earlier ones in the
    peer's module; a dense filter is no T-tap convention, so the file is refused."""
    rng = np.random.default_rng(T)
    f = dyadic(rng, C, 6)
    f[f == 0] = 0.5
    p, sd = zoology_file(tmp_path, rng, C, filt=f)
    with pytest.raises(ImportRefused) as e:
        zoology.read(p, {"tokens": str(T)})
    j = T + 1
    assert f"conv.filter[0, {j}] (token t <- t + {2 * T - j})" in str(e.value) and "refused" in str(e.value)
    # the wrapped taps matter: without them (what the importer used to read) the output differs
    u = dyadic(rng, T, C)
    cut = dict(sd)
    cut[ZPRE + "conv.filter"] = f.copy()
    cut[ZPRE + "conv.filter"][:, T + 1:2 * T] = 0
    assert np.abs(zoology_forward(sd, u, ZPRE) - zoology_forward(cut, u, ZPRE)).max() > 0.1


def test_the_issues_delta_at_lag_7_moves_token_4_to_token_1(tmp_path):
    f = np.zeros((1, 10))
    f[0, 7] = 1
    sd = {ZPRE + "projection.weight": np.zeros((1, 1)), ZPRE + "projection.bias": np.ones(1), ZPRE + "conv.filter": f}
    u = np.arange(1.0, 6.0)[:, None]  # tokens 0..4 hold 1..5
    y = zoology_forward(sd, u, ZPRE)[:, 0]
    # y = conv(u) * 1 + u = (u + wrapped u) + u
    np.testing.assert_allclose(y - 2 * u[:, 0], [4, 5, 0, 0, 0], atol=1e-9)


def test_zoology_wrap_read_exactly_as_circular(tmp_path):
    """T = 4, L = 8 with filter[c, 4 + s] = filter[c, s]: each lag s and its wrapped twin (lead
    T - s) carry the same tap, which is exactly a circular convolution of length T."""
    rng = np.random.default_rng(1)
    T = 4
    f = np.zeros((C, 8))
    f[:, :4] = dyadic(rng, C, 4)
    f[:, 4] = 1.5  # lag T: acts on no token
    f[:, 5:8] = f[:, 1:4]
    imp = zoology_read_checked(tmp_path, rng, T, filt=f)
    assert imp.conventions["convolution"]["value"] == ["circular"]
    assert "wrap round" in imp.conventions["convolution"]["from"]


def test_zoology_wrap_read_exactly_as_same(tmp_path):
    """T = 5, L = 10, taps at lags 0..2 and 8, 9 (leads 2, 1): lags -2..2, the "same" filter."""
    rng = np.random.default_rng(2)
    T = 5
    f = np.zeros((C, 10))
    f[:, [0, 1, 2, 8, 9]] = dyadic(rng, C, 5)
    f[:, 5] = 2.0  # lag T: inert
    imp = zoology_read_checked(tmp_path, rng, T, filt=f)
    assert imp.conventions["convolution"]["value"] == ["same"]


def test_zoology_taps_past_2T_are_trimmed_by_the_peers_fft(tmp_path):
    rng = np.random.default_rng(3)
    T = 3
    f = np.zeros((C, 12))
    f[:, :3] = dyadic(rng, C, 3)
    f[:, [3, 6, 9, 11]] = 1.25  # lag T and lags >= 2T: no token
    imp = zoology_read_checked(tmp_path, rng, T, filt=f)
    assert imp.conventions["convolution"]["value"] == "causal"
    assert imp.conventions["inert_taps"]["value"] == {"mixer 0": 4 * C}


# ------------------------------------------------------------------ precision-ls at T <, = and > the filter length

@pytest.mark.parametrize("T", [3, 6, 9])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("resid", [False, True])
def test_precision_ls_long_convolution_is_the_peers(tmp_path, T, causal, resid):
    rng = np.random.default_rng(T + 10 * causal)
    pls_read_checked(tmp_path, rng, T, causal, filt=dyadic(rng, C, 6), resid=resid)


@pytest.mark.parametrize("T", [2, 4, 7])
@pytest.mark.parametrize("resid", [False, True])
def test_precision_ls_short_causal_is_the_peers(tmp_path, T, resid):
    rng = np.random.default_rng(T)
    pls_read_checked(tmp_path, rng, T, True, w=dyadic(rng, C, 1, 4), resid=resid)


@pytest.mark.parametrize("K,T,read", [(3, 3, True), (3, 7, True), (4, 4, True), (4, 7, True), (5, 7, True),
                                      (5, 4, False),
                                      (3, 2, False), (4, 2, False)])
def test_precision_ls_short_non_causal_is_the_peers_or_refused(tmp_path, K, T, read):
    """Padding K//2: the "same" convention where its T taps hold every lag that acts; else refused."""
    rng = np.random.default_rng(K * 10 + T)
    w = dyadic(rng, C, 1, K)
    w[w == 0] = 0.25
    if not read:
        p, _ = pls_file(tmp_path, rng, C, T, causal=False, w=w)
        with pytest.raises(ImportRefused, match="the 'same' convention"):
            precision_ls.read(p, {})
        return
    pls_read_checked(tmp_path, rng, T, False, w=w)


# ------------------------------------------------------------------ the import command

def _s003_file(tmp_path, extra_lags: dict, name="z.safetensors"):
    """s003-conv's filter (N = 5) as a zoology long-convolution mixer of length 12, plus taps."""
    from constructions.catalogue import entries
    from tests.verify.import_files import zoology_mixer

    h = np.vectorize(float)(entries()["s003-conv"].build(N=5, d=2, seed=1).epilogue[0].h)
    sd = zoology_mixer(h, short=False, dtype="float64")
    f = np.zeros((2, 12))
    f[:, :5] = sd[ZPRE + "conv.filter"]
    for j, v in extra_lags.items():
        f[:, j] = v
    sd[ZPRE + "conv.filter"] = f
    p = tmp_path / name
    save_file(sd, str(p))
    return p


S003 = ["--from", "zoology", "--spec", "s003-conv", "--set", "N=5", "--set", "d=2", "--config", "tokens=5"]


def test_inert_taps_are_reported_not_a_keyerror(tmp_path):
    """Any file with inert taps crashed (KeyError: 'value', exit 1, no JSON)."""
    p = _s003_file(tmp_path, {5: 0.4, 10: 0.4, 11: -1.0})
    out = io.StringIO()
    rc = main(["import", str(p), *S003, "--json", str(tmp_path / "r.json")], out=out)
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0, out.getvalue()
    assert rep["conventions"]["inert_taps"]["value"] == {"mixer 0": 6}
    assert "convention inert_taps: {'mixer 0': 6}" in out.getvalue()


def test_a_wrapping_file_is_not_proved(tmp_path, capsys):
    """A tap of 0.40 at lag 7 with T = 5 moves token t + 3 onto token t in the
    real module (which then differs from s003-conv), and was PROVED as inert."""
    p = _s003_file(tmp_path, {7: 0.4})
    out = io.StringIO()
    rc = main(["import", str(p), *S003, "--json", str(tmp_path / "r.json")], out=out)
    err = capsys.readouterr().err
    assert rc == 2 and out.getvalue() == "" and not (tmp_path / "r.json").exists()
    assert "conv.filter[0, 7] (token t <- t + 3)" in err and "refused" in err


def test_a_wrap_that_is_circular_proves_the_circular_specification(tmp_path):
    """s003-conv's circular filter (N = 5) written as a zoology long filter of length 10 whose
    taps 6..9 repeat taps 1..4: the peer's module computes the circular convolution (checked
    against its forward), which is proved as s003-conv with circular=1 and refuted without."""
    from constructions.catalogue import entries
    from tests.verify.import_files import zoology_mixer

    h = np.vectorize(float)(entries()["s003-conv"].build(N=5, d=2, seed=1, circular=1).epilogue[0].h)
    sd = zoology_mixer(h, short=False, dtype="float64")
    f = np.zeros((2, 10))
    f[:, :5] = sd[ZPRE + "conv.filter"]
    f[:, 6:] = f[:, 1:5]
    sd[ZPRE + "conv.filter"] = f
    save_file(sd, str(tmp_path / "c.safetensors"))
    u = dyadic(np.random.default_rng(0), 5, 2)
    hc = np.array(h)
    circ = np.array([[sum(hc[s, c] * u[(t - s) % 5, c] for s in range(5)) for c in range(2)] for t in range(5)])
    np.testing.assert_allclose(zoology_forward(sd, u, ZPRE), circ, atol=1e-9)
    argv = ["import", str(tmp_path / "c.safetensors"), *S003, "--no-search", "--set"]
    out = io.StringIO()
    assert main(argv + ["circular=1"], out=out) == 0, out.getvalue()
    assert "read exactly as a circular convolution" in out.getvalue()
    assert main(argv + ["circular=0"], out=io.StringIO()) == 1


def _icl_two_heads(rng, D=3):
    """A 2-head attention (key size 2, value size 3 per head) with dyadic weights."""
    mod = "Transformer_gd/multi_head_attention"
    return {f"{mod}/query/w": dyadic(rng, D, 4), f"{mod}/key/w": dyadic(rng, D, 4),
            f"{mod}/value/w": dyadic(rng, D, 6), f"{mod}/linear/w": dyadic(rng, 6, D)}, mod


def test_icl_gd_heads_must_be_given_and_decide_the_reading(tmp_path, capsys):
    rng = np.random.default_rng(5)
    w, mod = _icl_two_heads(rng)
    np.savez(tmp_path / "h2.npz", **w)
    rc = main(["import", str(tmp_path / "h2.npz"), "--from", "icl-gd", "--spec", "s004-gd"], out=io.StringIO())
    err = capsys.readouterr().err
    assert rc == 2 and "--config num_heads=H" in err and "4 and 6 columns" in err
    h = dyadic(rng, 5, 3)
    peer = icl_forward(w, h, 2, mod)
    two = icl_gd.read(tmp_path / "h2.npz", {"num_heads": "2"})
    np.testing.assert_allclose(run_exact(two.layers, h), peer, atol=1e-9)
    one = icl_gd.read(tmp_path / "h2.npz", {"num_heads": "1"})  # the old silent default: another model
    assert np.abs(run_exact(one.layers, h) - peer).max() > 0.1
    # widths with no common factor show one head
    w1 = {k: (v[:, :3] if k.endswith("query/w") or k.endswith("key/w") else v) for k, v in w.items()}
    w1[f"{mod}/value/w"], w1[f"{mod}/linear/w"] = w[f"{mod}/value/w"][:, :2], w[f"{mod}/linear/w"][:2]
    np.savez(tmp_path / "h1.npz", **w1)
    imp = icl_gd.read(tmp_path / "h1.npz", {})
    assert imp.conventions["num_heads"]["value"] == 1 and "no common factor" in imp.conventions["num_heads"]["from"]
    np.testing.assert_allclose(run_exact(imp.layers, h), icl_forward(w1, h, 1, mod), atol=1e-9)


def test_icl_gd_defaults_are_attributed_to_the_train_config(tmp_path):
    from tests.verify.import_files import icl_gd_create_weights

    np.savez(tmp_path / "icl.npz", **icl_gd_create_weights(2, 5, 0.5))
    imp = icl_gd.read(tmp_path / "icl.npz", {"num_heads": "1"})
    assert "src/config.py" in imp.conventions["num_layers"]["from"]
    assert "transformer.py's own default is 3" in imp.conventions["num_layers"]["from"]
    assert imp.conventions["dampening"]["from"] == "default of src/transformer.py and src/config.py (1.0)"


def test_a_partial_layout_says_what_was_proved(tmp_path):
    """precision-ls's notebook file maps no query token and no epilogue of prefix-coupled: the
    PROVED names the regions and sections not in the file instead of 'X at every depth'."""
    from tests.verify.import_files import precision_ls_notebook, save_pt

    save_pt(tmp_path / "w.pt", precision_ls_notebook(2, 4, 0.1, 2), {"causal": True})
    out = io.StringIO()
    rc = main(["import", str(tmp_path / "w.pt"), "--from", "precision-ls", "--spec", "prefix-coupled", "--json",
               str(tmp_path / "r.json")], out=out)
    rep = json.loads((tmp_path / "r.json").read_text())
    line = next(x for x in out.getvalue().splitlines() if x.startswith("verdict:"))
    assert rc == 0
    assert "the file computes prefix-coupled on the regions the layout maps (not in the file: regions " in line
    assert "sections epilogue" in line and "q" in rep["verdict"]["scope"]


def test_a_full_layout_proves_the_whole_specification(tmp_path):
    from constructions.catalogue import gd_architectures
    from constructions.weights_io import save

    save(tmp_path / "w.safetensors", gd_architectures()["token-lsa"].build(4, 2), 2)
    out = io.StringIO()
    rc = main(["import", str(tmp_path / "w.safetensors"), "--from", "polyverify", "--spec", "token-lsa", "--json",
               str(tmp_path / "r.json")], out=out)
    assert rc == 0 and "verdict: PROVED: the file computes gd-token-lsa at every depth" in out.getvalue()
    assert json.loads((tmp_path / "r.json").read_text())["verdict"]["scope"].startswith("every region")


def test_a_failure_at_layer_0_says_a_layout_may_be_missing(tmp_path):
    """The notebook's channels permuted, read with the default layout: FAILED at stack layer 0,
    and the report says a --layout may be missing."""
    from tests.verify.channel_order import permute_channels
    from tests.verify.import_files import precision_ls_notebook, save_pt

    perm = [5, 6, 7, 8, 0, 1, 2, 3, 4]
    save_pt(tmp_path / "p.pt", permute_channels(precision_ls_notebook(2, 4, 0.1, 1), perm), {"causal": True})
    out = io.StringIO()
    rc = main(["import", str(tmp_path / "p.pt"), "--from", "precision-ls", "--spec", "prefix-coupled", "--no-search",
               "--json", str(tmp_path / "r.json")], out=out)
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rc == 1 and rep["proof"]["failure"]["layer"] == 0
    assert "a --layout L.json may be missing" in out.getvalue() and "--layout" in rep["verdict"]["hint"]


def test_usage_errors_do_not_wait_for_the_file(tmp_path, capsys):
    """What the arguments alone decide is refused before the file is read (a .pt
    file imports torch): a file that is not even there is never opened."""
    missing = str(tmp_path / "nope.pt")
    cases = [(["--from", "precision-ls", "--spec", "baseconv", "--config", "bogus=1"], "bogus"),
             (["--from", "precision-ls", "--spec", "baseconv", "--config", "causal=maybe"], "causal"),
             (["--from", "zoology", "--spec", "s003-conv", "--config", "tokens=2.5"], "tokens"),
             (["--from", "icl-gd", "--spec", "s004-gd", "--config", "num_heads=0"], "num_heads"),
             (["--from", "precision-ls", "--spec", "baseconv", "--set", "gamma=1"], "no size or parameter 'gamma'"),
             (["--from", "precision-ls", "--spec", "baseconv", "--set", "n=5000"], "outside 0..4096"),
             (["--from", "polyverify", "--spec", "baseconv", "--config", "causal=1"], "carries its own settings")]
    for argv, needle in cases:
        assert main(["import", missing, *argv], out=io.StringIO()) == 2
        err = capsys.readouterr().err
        assert needle in err and "not found" not in err, err
