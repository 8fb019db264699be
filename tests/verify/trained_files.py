"""Trained peer checkpoints for the import tests and ``bench/bench_import_trained.py`` (issue 41 item 1):
files a few optimizer steps away from a construction, so that every entry of every tensor is a dense
float, written the way the exports and the peers write them.

* :func:`trained_precision_ls`: ``gd-baseconv`` as a module of ``polyverify.torch.load_module`` (unshared
  body, what precision-ls fixes frozen: ``verify.export.frozen_for``), ``steps`` Adam steps on the squared
  output of random states, exported with ``verify.export.export(path, module, "precision-ls")``
  (``steps=0``: the untouched module);
* :func:`trained_state_pt`: precision-ls's ``state.pt`` as its ``src/train.py`` saves it
  (``{"model_state_dict", "optimizer_state_dict", "train_step"}``) after ``steps`` AdamW steps of the
  notebook's ``TransformerModel`` (``_read_in``, zero ``wpe``, the blocks of
  ``notebooks/baseconv_construction.ipynb`` under ``causal=True``, ``_read_out``; ``src/models/gpt2.py``
  with ``use_resid=False``, no MLPs, no LayerNorms), trained towards the last token's sum of inputs
  on every output (any loss that reaches every block moves its weights);
* :data:`IDENTITY`: the layout of an export (the file's state is the construction's).
"""
from __future__ import annotations

from fractions import Fraction

IDENTITY = {"format": "polyverify-layout/1"}


def trained_module(con, k, fmt: str, *, steps: int = 3, seed: int = 0):
    """``polyverify.torch.load_module(con, k)`` with what ``fmt`` fixes frozen (``verify.export.frozen_for``),
    after ``steps`` Adam steps (lr 1e-3) on the squared output of 6 random states drawn with ``seed``."""
    import torch

    from polyverify.torch import load_module
    from verify import export as E

    m = load_module(con, k, frozen=E.frozen_for(fmt))
    if steps:
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        S = torch.randn(6, *con.layout.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        for _ in range(steps):
            opt.zero_grad()
            m(S).pow(2).mean().backward()
            opt.step()
    return m


def trained_precision_ls(path, *, n: int = 4, d: int = 2, k: int = 2, steps: int = 3, eta=Fraction(1, 16),
                         seed: int = 0):
    """``gd-baseconv`` (n, d, eta) with ``k`` body copies, ``steps`` Adam steps (lr 1e-3), exported to
    precision-ls at ``path``; returns the export (``verify.export.Exported``)."""
    from constructions.catalogue import entries
    from verify import export as E

    con = entries()["gd-baseconv"].build(n=n, d=d, eta=Fraction(eta))
    m = trained_module(con, k, "precision-ls", steps=steps, seed=seed)
    return E.export(path, m, "precision-ls")


def notebook_forward(sd: dict, u, causal: bool = True):
    """precision-ls's ``TransformerModel.forward`` for the notebook's settings (``use_resid=False``, no
    MLPs, no LayerNorms, depthwise ``Conv1d`` filters): ``_read_in``, plus ``wpe``, the blocks'
    ``BaseConv`` (``out_proj(conv(in_proj(x)) * projection(x))``), ``_read_out``; ``u``: (B, N, D + 1)."""
    import torch.nn.functional as F

    T = u.shape[1]
    x = u @ sd["_read_in.weight"].T + sd["_read_in.bias"] + sd["_backbone.transformer.wpe.weight"][:T]
    i = 0
    while f"_backbone.transformer.h.{i}.seq_mixer.base_conv.in_proj.weight" in sd:
        p = f"_backbone.transformer.h.{i}.seq_mixer.base_conv."

        def lin(name, z):
            return z @ sd[p + name + ".weight"].T + sd[p + name + ".bias"]

        w = sd[p + "conv.conv.weight"]
        K = w.shape[-1]
        v = lin("in_proj", x).transpose(1, 2)
        c = F.conv1d(v, w, sd[p + "conv.conv.bias"], padding=K - 1 if causal else K // 2, groups=w.shape[0])[..., :T]
        x = lin("out_proj", c.transpose(1, 2) * lin("projection", x))
        i += 1
    return x @ sd["_read_out.weight"].T + sd["_read_out.bias"]


def trained_state_pt(path, *, k: int = 2, steps: int = 3, seed: int = 0) -> dict:
    """The notebook's model (D = 2, N = 4, ``k`` GD steps) after ``steps`` AdamW steps (lr 1e-3), saved as
    ``src/train.py``'s ``state.pt`` at ``path``; returns the trained state_dict."""
    import torch

    from tests.verify.test_import_checkpoints import D, N, notebook_model_state_dict

    sd = {name: torch.nn.Parameter(v.clone().float()) for name, v in notebook_model_state_dict(k).items()}
    opt = torch.optim.AdamW(sd.values(), lr=1e-3)
    u = torch.randn(16, N, D + 1, generator=torch.Generator().manual_seed(seed))
    for _ in range(steps):
        opt.zero_grad()
        y = notebook_forward(sd, u)
        ((y[:, -1, :] - u[:, -1, :].sum(-1, keepdim=True)) ** 2).mean().backward()
        opt.step()
    trained = {name: v.detach().clone() for name, v in sd.items()}
    torch.save({"model_state_dict": trained, "optimizer_state_dict": opt.state_dict(), "train_step": steps}, str(path))
    return trained
