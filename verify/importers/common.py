"""What every importer shares: reading a foreign file without pickle, exact values, and the rule
that every tensor is consumed.

An importer turns a peer's weight file into an :class:`Imported`: this toolkit's layers
(``constructions/layers.py``) with exact rational weights, in the peer's own state (its tokens
and channels), plus the conventions it read and where every tensor went.  What the layers
compute is then proved against a specification projected onto that state
(``verify/importers/mapping.py``).

Files are read with ``torch.load(weights_only=True)`` (``.pt``/``.pth``/``.bin``),
``safetensors`` or ``numpy.load(allow_pickle=False)`` (``.npz``): never by unpickling.  Float
entries become the exact binary fractions they are (``constructions.weights_io.exact_tensor``:
float16/bfloat16/float32/float64 values are exact in Python floats).  :class:`Tensors` counts
what the importer read: a tensor no mapping consumes makes the import refuse, naming it.
"""
from __future__ import annotations

import enum
import json
import re
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from constructions import ops
from constructions.layers import Layer
from constructions.exact_floats import ExactFloats, is_lazy
from constructions import weights_io
from constructions.weights_io import exact_tensor, lazy_tensor
from polyverify.plumbing.cli import one_line
from polyverify.plumbing.rational import parse_rational
from verify.cli_common import input_file_problem


class ParamSource(enum.Enum):
    """Where a specification parameter's value came from, carried beside the English text
    (``"from"`` in the report) and branched on instead of it; ``value``: the text that names it
    where the text is just that (--set, the metadata, the entry's default)."""

    SET_FLAG = "--set"  # given on the command line
    METADATA = "the file's metadata"  # declared by the file (a polyverify file naming the construction)
    FILE = "the file"  # read from the file's weights (solved)
    OWN_VALUE = "the entry's own value"  # the specification fixes it (its builder does not take it)
    DEFAULT = "the entry's default"  # nothing determines it


class ImportRefused(ValueError):
    """A file an importer cannot read or does not fully consume: one line, exit 2."""


@dataclass
class Imported:
    """A peer's weights as this toolkit's layers, in the peer's own state."""

    format: str
    file: str
    layers: list[Layer]  # exact (Fraction / int) object arrays
    state_shape: tuple[int, int] | None  # (tokens, channels) where the file fixes them (None: LSA, any tokens)
    conventions: dict  # every setting read, and from where ("file", "config in the file", "default of <peer>")
    tensors: dict[str, str]  # every tensor of the file -> what it became
    dtype: str  # float dtype of the file's weights ("float32", ...; "mixed" / "integer")
    #: sizes this file fixes for a specification (``d`` from a weight's shape, ...)
    sizes: dict = field(default_factory=dict)
    #: the parameters the file itself declares (our own files' exact metadata)
    declared_params: dict = field(default_factory=dict)
    #: tensors of the peer's model that are not part of the blocks the importer proves (an
    #: embedding, a read-out, a LayerNorm or MLP), each with what it is; the import refuses
    #: them unless ``--blocks-only``, which names each in the verdict and the JSON
    not_proved: dict = field(default_factory=dict)
    #: a training checkpoint's entries next to the model (precision-ls's ``state.pt``: the
    #: optimizer's state and the step), read safely and described; never part of the model
    training_state: dict = field(default_factory=dict)
    #: the config the file itself holds (a ``.pt`` checkpoint's ``config``, a safetensors file's ``config``
    #: metadata); an export's ``"polyverify"`` description is read from it (``verify/importers/described.py``)
    file_config: dict = field(default_factory=dict)


def max_entries(lazy: bool) -> int:
    """The entries a file may hold: ``weights_io.MAX_ENTRIES`` where the reader keeps the dense float tensors
    as stored (:meth:`Tensors.take` with ``lazy``; its eager takes are bounded by ``MAX_EAGER_ENTRIES`` on
    their own), ``weights_io.MAX_EAGER_ENTRIES`` where it forms one ``Fraction`` per entry (read at the call:
    the bounds are the module's)."""
    return weights_io.MAX_ENTRIES if lazy else weights_io.MAX_EAGER_ENTRIES


def load_tensors(path: str | Path, fmt: str, *, lazy: bool = False) -> tuple[dict[str, np.ndarray], dict]:
    """``(tensors, extra)`` of a ``.pt`` / ``.safetensors`` / ``.npz`` file: tensors as numpy
    arrays (bfloat16 widened to float32, exactly); ``extra`` holds non-tensor entries of a
    ``.pt`` file (a ``config`` dict) or a safetensors file's metadata.  A file of more entries than
    :func:`max_entries` ``(lazy)`` is refused before its tensors are read (safetensors) or converted."""
    path = Path(path)
    limit = max_entries(lazy)
    problem = input_file_problem(path)  # the verify commands' one input check: a device, a FIFO said as such
    if problem is not None:
        raise ImportRefused(f"{path}: {problem}" + ("" if problem.startswith("file not found") else
                                                     f": a {fmt} weight file is needed"))
    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            return _safetensors(path, limit)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                tensors = {k: z[k] for k in z.files}
            return _checked(tensors, path, limit), {}
        if suffix in (".pt", ".pth", ".bin", ".ckpt"):
            from verify.cli_common import torch_installed, torch_missing

            if not torch_installed():
                raise ImportRefused(f"{path}: {torch_missing('read')}")
            return _torch(path, limit)
    except ImportRefused:
        raise
    except Exception as e:  # noqa: BLE001 - any reader's error is a one-line refusal naming the file
        raise ImportRefused(f"{path}: not a readable {suffix.lstrip('.')} file ({unreadable_reason(path, e)})") from None
    raise ImportRefused(f"{path}: unknown file type {suffix!r} (.pt/.pth/.bin/.ckpt read with torch.load(weights_only=True), "
                       f".safetensors, .npz)")


#: a terminal's escape sequences (torch puts bold text in its weights_only message)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def plain_text(e: BaseException | str) -> str:
    """A reader's message as plain text: terminal escape sequences removed, the first line kept."""
    return one_line(_ANSI.sub("", str(e)) if isinstance(e, BaseException) and str(e) else
                    _ANSI.sub("", e) if isinstance(e, str) else e)


def unreadable_reason(path: Path, e: BaseException) -> str:
    """What was wrong with a file a reader failed on, for a user: an empty file, what a ``.pt``
    file holds instead of torch.save's checkpoint (torch's own messages are an unpickler's opcode
    as a bare ``KeyError: 101``, ``pop from empty list``, or a paragraph with escape sequences),
    else the reader's message as plain text."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        head = b""
    if not head:
        return "the file is empty, 0 bytes"
    text = _ANSI.sub("", str(e)).strip()
    if path.suffix.lower() == ".npz" and not head.startswith(b"PK"):
        return f"not a zip archive, which an .npz file is (the file starts with {head!r})"
    if path.suffix.lower() not in _TORCH_SUFFIXES:
        return plain_text(e)
    if "Weights only load failed" in text:
        glob = re.search(r"GLOBAL (\S+) was not an allowed global", text)
        if glob:
            return (f"it pickles a {glob[1]} object, which torch.load(weights_only=True) does not unpickle: a weight "
                    f"file holds tensors, numbers, strings, lists and dicts only")
        m = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\s*\n|\Z)", text, re.S)
        detail = " ".join(m[1].split()) if m else ""
        return ("its pickle is one torch.load(weights_only=True) does not read" + (f" ({detail})" if detail else "")
                + ": not a file torch.save wrote, or it pickles Python objects other than tensors")
    if head.startswith(b"PK\x03\x04"):
        return f"a zip archive, but not a checkpoint torch.save wrote ({text.split('. ')[0] or type(e).__name__})"
    if head[:1] == b"\x80":
        return f"a pickle, but not a checkpoint torch.save wrote ({plain_text(e)})"
    return (f"not a checkpoint torch.save wrote: neither its zip archive nor a pickle (the file starts with "
            f"{head!r})")


def _checked(tensors: dict, path, limit: int) -> dict:
    total = sum(int(np.prod(t.shape)) for t in tensors.values())
    if total > limit:
        raise ImportRefused(f"{path}: {total} entries, above the limit {limit} of a weight file")
    return tensors


def _safetensors(path: Path, limit: int):
    from safetensors import safe_open

    try:
        import torch  # noqa: F401  (bfloat16 tensors need the torch framework)

        framework = "pt"
    except ImportError:  # torch is the torch extra: numpy reads every dtype but bfloat16
        framework = "numpy"
    with safe_open(str(path), framework=framework) as f:
        meta = f.metadata() or {}
        names = list(f.keys())
        total = sum(int(np.prod(f.get_slice(n).get_shape())) for n in names)
        if total > limit:
            raise ImportRefused(f"{path}: {total} entries, above the limit {limit} of a weight file")
        tensors = {n: _to_numpy(f.get_tensor(n)) for n in names}
    return tensors, {"metadata": meta}


def _to_numpy(t):
    if isinstance(t, np.ndarray):
        return t
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()  # exact: every bfloat16 is a float32
    return t.numpy()


#: entries a training checkpoint holds next to ``model_state_dict`` (precision-ls's ``src/train.py``
#: saves ``{"model_state_dict", "optimizer_state_dict", "train_step"}`` as ``state.pt``): read with
#: ``weights_only=True`` and described, never part of the model
TRAINING_ENTRIES = {"optimizer_state_dict": "the optimizer's state: moments and settings of training",
                    "train_step": "the training step it was saved at"}


def _torch(path: Path, limit: int):
    import torch

    with warnings.catch_warnings():  # torch's notes on the pickle protocol: the verdict is our one line
        warnings.simplefilter("ignore")
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    extra: dict = {}
    if isinstance(obj, dict) and "model_state_dict" in obj:  # a training checkpoint (precision-ls's state.pt)
        training = {}
        for k, v in obj.items():
            if k == "config" and isinstance(v, dict):
                extra["config"] = v
            elif k in TRAINING_ENTRIES:
                training[k] = _describe_training_entry(k, v, path, torch)
            elif k != "model_state_dict":
                raise ImportRefused(f"{path}: entry {k!r} next to 'model_state_dict' is not read (a checkpoint holds "
                                   f"the model_state_dict, optionally {', '.join(TRAINING_ENTRIES)} and a 'config' "
                                   f"dict)")
        if training:
            extra["training_state"] = training
        obj = obj["model_state_dict"]
    if not isinstance(obj, dict):
        raise ImportRefused(f"{path}: holds a {type(obj).__name__}, not a state_dict (a dict of tensors)")
    tensors = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            tensors[str(k)] = _to_numpy(v)
        elif k == "config" and isinstance(v, dict):
            extra["config"] = v
        else:
            raise ImportRefused(f"{path}: entry {k!r} is a {type(v).__name__}, not a tensor (a state_dict holds "
                               f"tensors; settings go in a 'config' dict next to 'model_state_dict')")
    return _checked(tensors, path, limit), extra


def _describe_training_entry(k: str, v, path, torch) -> dict:
    """What a training checkpoint's entry next to the model holds (counted, not used)."""
    if k == "train_step":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ImportRefused(f"{path}: entry 'train_step' is a {type(v).__name__}, not an integer step")
        return {"value": v, "what": TRAINING_ENTRIES[k]}
    if not isinstance(v, dict):
        raise ImportRefused(f"{path}: entry {k!r} is a {type(v).__name__}, not an optimizer state_dict")
    count = [0, 0]

    def walk(x):
        if isinstance(x, torch.Tensor):
            count[0] += 1
            count[1] += int(x.numel())
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)

    walk(v)
    return {"tensors": count[0], "entries": count[1], "what": TRAINING_ENTRIES[k]}


class Tensors:
    """The file's tensors; :meth:`take` consumes one (returning it exact), :meth:`check_all_read`
    refuses the file naming a tensor nothing took."""

    def __init__(self, tensors: dict[str, np.ndarray], path):
        self.t, self.path = tensors, str(path)
        self.read: dict[str, str] = {}
        self.eager_entries = 0  # entries taken as one Fraction each (bounded by weights_io.MAX_EAGER_ENTRIES)
        self.outside: dict[str, str] = {}  # tensors of the model outside the proved blocks -> what they are

    def not_proved(self, k: str, what: str) -> None:
        """``k`` is a tensor of the peer's model the importer recognises but does not prove
        (an embedding, a read-out, a LayerNorm, an MLP): ``what`` names it."""
        self.outside[k] = what

    def __contains__(self, k):
        return k in self.t

    def keys(self):
        return list(self.t)

    def raw(self, k: str) -> np.ndarray:
        return self.t[k]

    def dims(self, k: str, ndim: int, what: str) -> tuple[int, ...]:
        """Tensor ``k``'s shape, checked before a size is read off it: ``ndim`` dimensions, each at
        least 1 (a 0-dim or empty tensor where a matrix or a filter belongs is refused naming it,
        never an IndexError); ``what`` says what the tensor should be, e.g. ``"an nn.Linear weight
        (out x in)"``."""
        if k not in self.t:
            raise ImportRefused(f"{self.path}: lacks tensor {k} ({what})")
        shape = tuple(int(n) for n in self.t[k].shape)
        if len(shape) != ndim or 0 in shape:
            got = "is 0-dim (a scalar)" if not shape else f"has shape {shape}" + (" (empty)" if 0 in shape else "")
            raise ImportRefused(f"{self.path}: tensor {k} {got}: {what} needs {ndim} dimension"
                                f"{'s' if ndim != 1 else ''}, none of them 0")
        return shape

    def take(self, k: str, what: str, shape: tuple | None = None, lazy: bool = False) -> np.ndarray:
        """Tensor ``k`` read exactly (and counted as read): an object array of its exact values, or with
        ``lazy`` a float tensor as :class:`~constructions.exact_floats.ExactFloats` (the stored floats, each
        the binary fraction it is, formed where a consumer reads it: no ``Fraction`` per entry)."""
        if k not in self.t:
            raise ImportRefused(f"{self.path}: lacks tensor {k} ({what})")
        t = self.t[k]
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ImportRefused(f"{self.path}: tensor {k} has shape {tuple(t.shape)}, {what} needs {tuple(shape)}")
        lazy = lazy and t.dtype.kind == "f"  # (an integer tensor is read eagerly by lazy_tensor too)
        if not lazy:
            self.eager_entries += int(t.size)
            if self.eager_entries > weights_io.MAX_EAGER_ENTRIES:
                raise ImportRefused(f"{self.path}: tensor {k} would make {self.eager_entries} entries read one "
                                   f"Fraction each, above the limit {weights_io.MAX_EAGER_ENTRIES} of such a reading")
        try:
            a = lazy_tensor(t, k, self.path) if lazy else exact_tensor(t, k, self.path)
        except ValueError as e:
            raise ImportRefused(str(e)) from None
        self.read[k] = what
        return a

    def check_all_read(self) -> None:
        unread = [k for k in self.t if k not in self.read and k not in self.outside]
        if unread:
            more = f" and {len(unread) - 3} more" if len(unread) > 3 else ""
            raise ImportRefused(f"{self.path}: tensor {unread[0]} is not part of the model the importer reads"
                               f"{' (' + ', '.join(unread[1:3]) + more + ')' if len(unread) > 1 else ''}; the "
                               f"file is refused: every tensor must be part of the proof")

    def dtype(self) -> str:
        kinds = {str(self.t[k].dtype) for k in self.read}
        floats = sorted(k for k in kinds if k.startswith("float") or k == "bfloat16")
        if not floats:
            return "integer"
        return floats[0] if len(floats) == 1 else "mixed (" + ", ".join(floats) + ")"


def mark_not_proved(T: Tensors, table) -> None:
    """Recognise the peer model's tensors outside the blocks the importer proves: ``table`` is
    ``[(regex, what), ...]``; a key that fully matches is recorded (:meth:`Tensors.not_proved`)
    with ``what`` (``{i}`` filled with the regex's first group, a block index)."""
    import re

    for k in T.keys():
        if k in T.read or k in T.outside:
            continue
        for rx, what in table:
            m = re.fullmatch(rx, k)
            if m:
                T.not_proved(k, what.format(i=m.group(1) if m.groups() else ""))
                break


def numbered_blocks(T: Tensors, key, path, what: str, hint: str) -> list[dict[str, str]]:
    """The file's blocks in order, each ``{name within the block: key}``: the keys (not outside
    the blocks) that fully match the regex ``key``, whose group 1 is the block's index (absent: a
    single block, 0) and group 2 the name. None, or indices other than 0..n-1, is an
    ImportRefused naming ``what`` (block, mixer) and ``hint`` (the keys looked for)."""
    blocks: dict[int, dict[str, str]] = {}
    for k in T.keys():
        m = key.fullmatch(k)
        if m and k not in T.outside:
            blocks.setdefault(int(m[1]) if m[1] is not None else 0, {})[m[2]] = k
    if not blocks:
        T.check_all_read()  # names the first tensor that is not a block's
        raise ImportRefused(f"{path}: no BaseConv {what} tensors ({hint})")
    if sorted(blocks) != list(range(len(blocks))):
        raise ImportRefused(f"{path}: {what} indices {sorted(blocks)} are not 0..{len(blocks) - 1}")
    return [blocks[i] for i in range(len(blocks))]


def describe_not_proved(not_proved: dict) -> str:
    """``what: name, name; what: name`` (every tensor named, grouped by what it is)."""
    groups: dict = {}
    for k, what in not_proved.items():
        groups.setdefault(what, []).append(k)
    return "; ".join(f"{what}: {', '.join(ks)}" for what, ks in groups.items())


def parse_settings(pairs: list[str] | None, flag: str) -> dict[str, str]:
    """``KEY=VALUE`` strings -> dict (a repeated key is refused)."""
    out: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p or not p.split("=", 1)[0].strip():
            raise ImportRefused(f"{flag} {p!r}: expected KEY=VALUE")
        k, v = (s.strip() for s in p.split("=", 1))
        if k in out:
            raise ImportRefused(f"{flag} {k} given twice")
        out[k] = v
    return out


def as_bool(v, what: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, np.integer)) and int(v) in (0, 1):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ImportRefused(f"setting {what} must be true or false, got {v!r}")


def as_rational(v, what: str) -> Fraction:
    try:
        if isinstance(v, float):
            return Fraction(v)
        return parse_rational(v if isinstance(v, (int, Fraction)) else str(v), f"setting {what}")  # bounded
    except (ValueError, ZeroDivisionError):
        raise ImportRefused(f"setting {what} must be a number, got {v!r}") from None


def as_count(v, what: str, lo: int = 1, hi: int = 4096) -> int:
    """An integer setting in ``lo..hi`` (``2.5`` or ``x`` is refused, not rounded)."""
    q = as_rational(v, what)
    if q.denominator != 1 or not lo <= q <= hi:
        raise ImportRefused(f"setting {what} must be an integer in {lo}..{hi}, got {v!r}")
    return int(q)


def config_from(extra: dict, settings: dict, path, *, known: tuple, fmt: str) -> tuple[dict, dict]:
    """The model settings: ``--config KEY=VALUE`` first, then the file's own (a ``config`` dict in a
    ``.pt`` file, JSON under ``config`` in a safetensors file's metadata).  A ``--config`` key the
    ``fmt`` importer does not read (not in ``known``) is refused.  Returns (values, source)."""
    unknown = [k for k in settings if k not in known]
    if unknown:
        article = "an" if fmt[0] in "aeio" else "a"
        raise ImportRefused(f"--config {unknown[0]}: not {article} {fmt} setting the importer reads ({', '.join(known)})")
    cfg, src = {}, {}
    filed = extra.get("config")
    if filed is None and "metadata" in extra and "config" in extra["metadata"]:
        try:
            filed = json.loads(extra["metadata"]["config"])
        except json.JSONDecodeError as e:
            raise ImportRefused(f"{path}: metadata 'config' is not JSON ({one_line(e)})") from None
    if filed is not None and not isinstance(filed, dict):
        raise ImportRefused(f"{path}: its 'config' is not an object")
    for k, v in (filed or {}).items():
        cfg[k], src[k] = v, "config in the file"
    for k, v in settings.items():
        cfg[k], src[k] = v, "--config"
    return cfg, src


def filed_config(imp: Imported, cfg: dict, src: dict) -> Imported:
    """``imp`` with :attr:`Imported.file_config`: the settings of ``config_from`` that came from the file."""
    imp.file_config = {k: v for k, v in cfg.items() if src.get(k) == "config in the file"}
    return imp


def transpose(a: np.ndarray) -> np.ndarray:
    """The transposed matrix; a lazily read one (no declared rationals) stays lazy (its floats transposed)."""
    if is_lazy(a) and a.is_float_only():
        return ExactFloats(np.ascontiguousarray(a.floats.T))
    return np.ascontiguousarray(np.asarray(a).T)


def repeat_rows(vec: np.ndarray, T: int) -> np.ndarray:
    """A per-channel bias (C,) as the (T, C) bias matrix of Def. D.20 (the same row on every token)."""
    out = np.empty((T, vec.shape[0]), dtype=object)
    out[:] = vec[None, :]
    return out


def zeros(*shape) -> np.ndarray:
    return ops.zeros_like_object(shape)


def eye(n: int) -> np.ndarray:
    return ops.eye_object(n)
