"""Torch modules that wrap the toolkit's layer math (``constructions/layers.py``).

Every BaseConv and linear-attention block holds its arrays as
``nn.Parameter``s and, in ``forward``, builds the toolkit's layer dataclass
from them and calls *its* ``forward`` on torch tensors: there is one
definition of each layer's math, and a constructed weight set loads into the
module (:func:`stack_from_layers`, :func:`load_weight_file`) while a trained
module exports to the toolkit's weight format (:func:`export_weights`).

* :class:`BaseConvBlock`  seed 000 eq. (2)/(19) with (T, C) bias matrices and
  per-channel filters h (T, C); ``causal=False`` is circular convolution.
* :class:`LSABlock`       non-causal multi-head linear attention, Hagiwara's
  form sum_k (H W3_k)(H W1_k)^T (H W2_k) (seed 001 eq. (8), (39)).  With
  ``head_dim < width`` a head is parameterised by factors (Q, K: width x
  head_dim, V: width x head_dim, O: head_dim x width) and composed into the
  layer's (width, width) arrays as W3 = [Q 0], W1 = [K 0], W2 = V O, so the
  same layer math runs and the export is an ordinary ``lsa`` layer.
* :class:`SoftmaxAttention` + :class:`MLP`: the GPT-2 style Transformer
  baseline of seed 000 App. B.1 (softmax attention has no exact-weight layer
  in the toolkit; the Transformer is a plain torch module).

:class:`SequenceModel` = input projection -> blocks (each block: mixer with a
residual connection, then optionally an MLP; LayerNorms optional) -> output
projection, as in seed 000 App. B.1 (Tables 1-3).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from constructions import kinds
from constructions import layers as L
from constructions.base import to_float_array
from constructions.weights_io import FORMAT


# --------------------------------------------------------------------------- mixers

class BaseConvBlock(nn.Module):
    """One BaseConv layer (``constructions.layers.BaseConv``) with trainable arrays."""

    kind = "baseconv"

    BIASES = ("b_in", "b_conv", "b_gate", "b_out")

    def __init__(self, T: int, C: int, *, causal: bool = False, residual: bool = False,
                 conv_method: str = "direct", init_scale: float = 1.0, bias: str = "matrix"):
        super().__init__()
        if bias not in ("matrix", "vector"):
            raise ValueError(f"bias must be 'matrix' (T x C, Def. D.20) or 'vector' (one row shared by all tokens), not {bias!r}")
        self.T, self.C, self.causal, self.residual, self.conv_method = T, C, causal, residual, conv_method
        self.bias = bias
        rows = T if bias == "matrix" else 1
        s = 1.0 / math.sqrt(C)
        self.W_in = nn.Parameter(torch.randn(C, C) * s)
        self.b_in = nn.Parameter(torch.zeros(rows, C))
        self.h = nn.Parameter(torch.randn(T, C) / math.sqrt(T))
        self.b_conv = nn.Parameter(torch.zeros(rows, C))
        self.W_gate = nn.Parameter(torch.randn(C, C) * s)
        self.b_gate = nn.Parameter(torch.zeros(rows, C))
        self.W_out = nn.Parameter(torch.randn(C, C) * s * init_scale)
        self.b_out = nn.Parameter(torch.zeros(rows, C))

    def layer(self) -> L.BaseConv:
        """The toolkit layer over this module's (torch) arrays (a shared bias row is expanded to
        the (T, C) bias matrix it stands for)."""
        arr = {k: getattr(self, k) for k in L.BaseConv.array_fields}
        if self.bias == "vector":
            arr.update({k: arr[k].expand(self.T, self.C) for k in self.BIASES})
        return L.BaseConv(**arr, causal=self.causal, residual=self.residual)

    def forward(self, u):
        return self.layer().forward(u, conv_method=self.conv_method)

    def export_layer(self) -> L.BaseConv:
        return self.layer().map(_to_numpy)

    @classmethod
    def from_layer(cls, layer: L.BaseConv, *, conv_method: str = "direct") -> "BaseConvBlock":
        if layer.same:
            raise ValueError("a BaseConv layer with the 'same' (zero-padded) convolution cannot be trained here: "
                             "the training block runs causal or circular convolutions only")
        T, C = layer.shape
        m = cls(T, C, causal=layer.causal, residual=layer.residual, conv_method=conv_method).double()
        with torch.no_grad():
            for k in L.BaseConv.array_fields:
                getattr(m, k).copy_(_to_tensor(getattr(layer, k)))
        return m


class LSABlock(nn.Module):
    """Non-causal multi-head linear attention (``constructions.layers.LSA``).

    ``head_dim=None`` (or ``== width``): each head holds full (width, width)
    arrays W1, W2, W3.  Otherwise factors (module docstring).  ``scale``
    multiplies the output (1 keeps the layer math as written; the exported
    layer absorbs it into W2).
    """

    kind = "lsa"

    def __init__(self, C: int, heads: int = 1, head_dim: int | None = None, *,
                 residual: bool = False, init_scale: float = 1.0):
        super().__init__()
        self.C, self.n_heads, self.residual = C, heads, residual
        self.full = head_dim is None or head_dim == C
        self.head_dim = C if self.full else head_dim
        d = self.head_dim
        s = 1.0 / math.sqrt(C)
        if self.full:
            self.W1 = nn.Parameter(torch.randn(heads, C, C) * s)
            self.W2 = nn.Parameter(torch.randn(heads, C, C) * s * init_scale)
            self.W3 = nn.Parameter(torch.randn(heads, C, C) * s)
        else:
            self.Wq = nn.Parameter(torch.randn(heads, C, d) * s)
            self.Wk = nn.Parameter(torch.randn(heads, C, d) * s)
            self.Wv = nn.Parameter(torch.randn(heads, C, d) * s)
            self.Wo = nn.Parameter(torch.randn(heads, d, C) / math.sqrt(d) * init_scale)

    def layer(self) -> L.LSA:
        if self.full:
            hs = [L.LSAHead(self.W1[k], self.W2[k], self.W3[k]) for k in range(self.n_heads)]
        else:
            pad = self.C - self.head_dim
            P = lambda W: nn.functional.pad(W, (0, pad))  # noqa: E731 - (C, d) -> (C, C)
            hs = [L.LSAHead(P(self.Wk[k]), self.Wv[k] @ self.Wo[k], P(self.Wq[k])) for k in range(self.n_heads)]
        return L.LSA(hs, residual=self.residual)

    def forward(self, H):
        return self.layer().forward(H)

    def export_layer(self) -> L.LSA:
        return self.layer().map(_to_numpy)

    @classmethod
    def from_layer(cls, layer: L.LSA, *, conv_method: str = "direct") -> "LSABlock":  # no convolution
        C = np.asarray(layer.heads[0].W1).shape[0]
        m = cls(C, len(layer.heads), None, residual=layer.residual).double()
        with torch.no_grad():
            for k, hd in enumerate(layer.heads):
                m.W1[k].copy_(_to_tensor(hd.W1))
                m.W2[k].copy_(_to_tensor(hd.W2))
                m.W3[k].copy_(_to_tensor(hd.W3))
        return m


class SoftmaxAttention(nn.Module):
    """Multi-head softmax self-attention (GPT-2), optional causal mask."""

    kind = "softmax"

    def __init__(self, C: int, heads: int, *, causal: bool = False):
        super().__init__()
        if C % heads:
            raise ValueError(f"width {C} is not divisible by heads {heads}")
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        sh = lambda t: t.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # noqa: E731
        y = nn.functional.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=self.causal)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, C: int, mult: int = 4):
        super().__init__()
        self.fc = nn.Linear(C, mult * C)
        self.proj = nn.Linear(mult * C, C)

    def forward(self, x):
        return self.proj(torch.relu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN residual block: x + mixer(LN(x)), then x + MLP(LN(x)) if enabled."""

    def __init__(self, mixer: nn.Module, C: int, *, mlp: bool, layernorm: bool, mlp_mult: int = 4):
        super().__init__()
        self.mixer = mixer
        self.ln1 = nn.LayerNorm(C) if layernorm else nn.Identity()
        self.mlp = MLP(C, mlp_mult) if mlp else None
        self.ln2 = nn.LayerNorm(C) if (layernorm and mlp) else nn.Identity()

    def forward(self, x):
        x = x + self.mixer(self.ln1(x))
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return x


# --------------------------------------------------------------------------- model

from .names import MODELS  # noqa: E402 (importable without torch)


@dataclass
class ModelConfig:
    """Architecture settings (seed 000 App. B.1, Tables 1-3)."""

    model: str = "baseconv"  # baseconv | lsa | transformer
    T: int = 21  # sequence length (tokens)
    d_in: int = 12
    d_out: int = 5
    width: int = 32
    layers: int = 3
    heads: int = 1  # lsa / transformer
    head_dim: int | None = None  # lsa: None = full (width, width) heads
    mlp: bool = False
    layernorm: bool = False
    mlp_mult: int = 4
    causal: bool = False  # baseconv convolution / transformer mask
    conv_method: str = "direct"
    init_scale: float = 1.0  # scales the init of each mixer's output map
    pos_embedding: bool = True  # transformer only (GPT-2 learned positions)
    lsa_embed_scale: float = 0.25  # lsa only: scales the input projection's init
    bias: str = "matrix"  # baseconv: (T, C) bias matrices (Def. D.20) or one shared row ("vector")

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")

    def to_json(self) -> dict:
        return asdict(self)


class SequenceModel(nn.Module):
    """in_proj (d_in -> width) -> blocks -> out_proj (width -> d_out), on (B, T, d_in)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        C = cfg.width
        self.in_proj = nn.Linear(cfg.d_in, C, bias=cfg.model == "transformer")
        if cfg.model == "lsa":  # cubic layers: a small embedding keeps early Adam steps from blowing up
            with torch.no_grad():
                self.in_proj.weight.mul_(cfg.lsa_embed_scale)
        self.pos = (nn.Parameter(torch.randn(cfg.T, C) * 0.02)
                    if cfg.model == "transformer" and cfg.pos_embedding else None)
        blocks = []
        for _ in range(cfg.layers):
            if cfg.model == "baseconv":
                mix = BaseConvBlock(cfg.T, C, causal=cfg.causal, conv_method=cfg.conv_method,
                                    init_scale=cfg.init_scale, bias=cfg.bias)
            elif cfg.model == "lsa":
                # the layer is cubic in its input and sums over T tokens: start its output small
                mix = LSABlock(C, cfg.heads, cfg.head_dim, init_scale=cfg.init_scale / (cfg.T * C))
            else:
                mix = SoftmaxAttention(C, cfg.heads, causal=cfg.causal)
            blocks.append(Block(mix, C, mlp=cfg.mlp, layernorm=cfg.layernorm, mlp_mult=cfg.mlp_mult))
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(C) if cfg.layernorm else nn.Identity()
        self.out_proj = nn.Linear(C, cfg.d_out, bias=cfg.model == "transformer")

    def forward(self, u):
        x = self.in_proj(u)
        if self.pos is not None:
            x = x + self.pos
        for b in self.blocks:
            x = b(x)
        return self.out_proj(self.ln_f(x))

    # ---------------------------------------------------------------- export
    def exportable(self) -> bool:
        c = self.cfg
        return c.model in ("baseconv", "lsa") and not c.mlp and not c.layernorm

    def toolkit_layers(self) -> list[L.Layer]:
        """The blocks as toolkit layers (float64 numpy arrays), residual folded in."""
        if not self.exportable():
            raise ValueError("only BaseConv / linear-attention models without MLPs and LayerNorms "
                             "have a toolkit layer form (softmax, MLP and LayerNorm are not toolkit layers)")
        out = []
        for b in self.blocks:
            lay = b.mixer.export_layer()
            out.append(_with_residual(lay))
        return out


def _with_residual(layer: L.Layer) -> L.Layer:
    from dataclasses import replace

    return replace(layer, residual=True)


# --------------------------------------------------------------------------- stacks of toolkit layers

class LayerStack(nn.Module):
    """A plain stack of toolkit layers as torch modules, on the construction's state."""

    def __init__(self, blocks: list[nn.Module]):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, S):
        for b in self.blocks:
            S = b(S)
        return S

    def toolkit_layers(self) -> list[L.Layer]:
        return [b.export_layer() for b in self.blocks]


# the trainable torch module of each toolkit layer kind (constructions/kinds.py)
kinds.provide("baseconv", "torch_block", BaseConvBlock)
kinds.provide("lsa", "torch_block", LSABlock)
kinds.lacks("token_lsa", "torch_block", "trained through numerics.training.token_lsa.TokenLinearTransformer "
            "(seed 004's Full, Diag and GD++ parameterisations), which exports token_lsa layers")
kinds.lacks("elsa", "torch_block", "no trainable torch module is written for ELSA's stages and bias matrices")


def stack_from_layers(layers: list[L.Layer], *, conv_method: str = "direct",
                      dtype=torch.float64) -> LayerStack:
    """Load exact (or float) toolkit layers into trainable torch modules.

    Exact rationals are rounded once to float64 (``to_float_array``)."""
    blocks = []
    for lay in layers:
        try:
            block = kinds.get(lay.kind, "torch_block")
        except kinds.KindUnsupported as e:
            raise ValueError(f"{e} (torch modules: {' and '.join(kinds.supporting('torch_block'))})") from None
        blocks.append(block.from_layer(lay, conv_method=conv_method))
    return LayerStack(blocks).to(dtype)


def load_weight_file(path, spec=None, k=None, **kw) -> LayerStack:
    """A toolkit weight file (``constructions.weights_io``) as a torch :class:`LayerStack`."""
    from constructions.weights_io import load

    return stack_from_layers(load(path, spec, k).layers, **kw)


def export_weights(model: nn.Module, path, *, name: str = "trained", notes: dict | None = None) -> Path:
    """Write a trained model in the toolkit's weight format (``polyverify-weights/1``).

    Tensors ``layers.{i}.{array}`` (float64) for every block; for a
    :class:`SequenceModel` also ``embed.weight`` (width x d_in, the input
    projection) and ``readout.weight`` (d_out x width): the state the layers
    act on is ``u @ embed.weight.T`` and the prediction ``state @ readout.weight.T``.
    The residual connection of each block is the layer's ``residual=True``.
    ``exact`` is empty: ``weights_io.load`` reads every entry as the binary
    fraction its float64 is.
    """
    from safetensors.numpy import save_file

    layers = model.toolkit_layers()
    tensors, specs = {}, []
    for i, lay in enumerate(layers):
        for nm, arr in lay.arrays().items():
            tensors[f"layers.{i}.{nm}"] = np.ascontiguousarray(np.asarray(arr, dtype=np.float64))
        specs.append({"kind": lay.kind, "config": lay.config(), "source": i})
    extra = {}
    if isinstance(model, SequenceModel):
        tensors["embed.weight"] = _to_numpy(model.in_proj.weight)
        tensors["readout.weight"] = _to_numpy(model.out_proj.weight)
        extra["model"] = model.cfg.to_json()
    meta = {
        "format": FORMAT,
        "construction": json.dumps({"name": name, "reference": "trained (numerics.training)", "k": 1,
                                    "params": {}, "variables": {},
                                    "sections": {"prologue": len(layers), "body": 0, "epilogue": 0},
                                    **extra, **({"notes": notes} if notes else {})}),
        "layout": json.dumps({}),
        "layers": json.dumps(specs),
        "exact": json.dumps({}),
    }
    path = Path(path)
    from polyverify.plumbing.cli import atomic_path

    with atomic_path(path) as tmp:  # the folder made if missing; never half a file
        save_file(tensors, str(tmp), metadata=meta)
    return path


def _to_numpy(t) -> np.ndarray:
    return np.ascontiguousarray(t.detach().to("cpu", torch.float64).numpy())


def _to_tensor(a) -> torch.Tensor:
    a = np.asarray(a)
    if a.dtype == object:
        a = to_float_array(a, np.float64)
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def save_token_gradient(path, n: int, d: int, *, kappa: float = 5.0):
    """Write the hand-set weights of ``constructions.token_gradient`` as a ``numerics.training`` SequenceModel export (``verify.compare`` reads
    it as a trained gradient model).  1/N must be a binary fraction (N a power of two) for the
    float64 file to be exact; otherwise it is rounded once."""
    from constructions.token_gradient import token_gradient_weights

    w = token_gradient_weights(n, d)
    C = 5 * d + 2
    model = SequenceModel(ModelConfig(model="baseconv", T=n + 1, d_in=2 * d + 2, d_out=d, width=C,
                                      layers=3)).double()
    f = lambda a: torch.as_tensor(np.asarray(a, dtype=float))  # noqa: E731
    with torch.no_grad():
        model.in_proj.weight.copy_(f(w["embed"]))
        model.out_proj.weight.copy_(f(w["readout"]))
        for blk, layer in zip(model.blocks, w["layers"]):
            for k in L.BaseConv.array_fields:
                getattr(blk.mixer, k).copy_(f(getattr(layer, k)))
    eta = 2.0 * n / (kappa ** 2 + 1.0)
    return export_weights(model, path, name="trained-baseconv-gradient",
                          notes={"task": {"name": "gradient", "T": n + 1, "d_in": 2 * d + 2, "d_out": d,
                                          "kappa": kappa, "eta": eta},
                                 "constructed": "constructions.token_gradient (hand-set, not trained)"})
