"""Named layouts: the state is a (rows x cols) matrix cut into named regions.

Embedding, read-out and the weight
builders address the state by region name, never by hand-written slices, and
the layout travels with the exported weights.  A region is a rectangle
``rows x cols``; for BaseConv the rows are tokens and the columns channels,
for seed 001's LSA/ELSA the state is the matrix ``H`` of the paper.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import ops


@dataclass(frozen=True)
class Region:
    name: str
    rows: tuple[int, int]  # [start, stop)
    cols: tuple[int, int]
    doc: str = ""

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows[1] - self.rows[0], self.cols[1] - self.cols[0])

    @property
    def index(self) -> tuple[slice, slice]:
        return (slice(*self.rows), slice(*self.cols))


@dataclass
class Layout:
    """A ``shape`` and named, non-overlapping rectangular regions.

    Build it with :meth:`add` (explicit rectangle) or with the helpers
    :meth:`channels` (a block of columns over a row range, the BaseConv
    idiom), which allocate columns left to right.
    """

    shape: tuple[int, int]
    row_axis: str = "tokens"
    col_axis: str = "channels"
    regions: dict[str, Region] = field(default_factory=dict)

    def add(self, name: str, rows: tuple[int, int], cols: tuple[int, int], doc: str = "") -> Region:
        if name in self.regions:
            raise ValueError(f"region {name!r} defined twice")
        r0, r1 = rows
        c0, c1 = cols
        if not (0 <= r0 < r1 <= self.shape[0] and 0 <= c0 < c1 <= self.shape[1]):
            raise ValueError(f"region {name!r} {rows}x{cols} outside the state {self.shape}")
        reg = Region(name, (r0, r1), (c0, c1), doc)
        for other in self.regions.values():
            if r0 < other.rows[1] and other.rows[0] < r1 and c0 < other.cols[1] and other.cols[0] < c1:
                raise ValueError(f"region {name!r} overlaps region {other.name!r}")
        self.regions[name] = reg
        return reg

    def __getitem__(self, name: str) -> Region:
        try:
            return self.regions[name]
        except KeyError:
            raise KeyError(f"no region named {name!r}; regions are {sorted(self.regions)}") from None

    def rows(self, name: str) -> range:
        return range(*self[name].rows)

    def cols(self, name: str) -> range:
        return range(*self[name].cols)

    def locate(self, i: int, j: int) -> tuple[str, tuple[int, int]]:
        """``(region name, index inside the region)`` of a state entry."""
        for reg in self.regions.values():
            if reg.rows[0] <= i < reg.rows[1] and reg.cols[0] <= j < reg.cols[1]:
                return reg.name, (i - reg.rows[0], j - reg.cols[0])
        return "(unassigned)", (i, j)

    def describe(self, i: int, j: int) -> str:
        name, (a, b) = self.locate(i, j)
        return f"region {name!r} entry [{a}, {b}] (state [{i}, {j}])"

    # ---------------------------------------------------------------- states
    def new_state(self, zero=0) -> np.ndarray:
        """An exact (object) zero state."""
        return ops.zeros_like_object(self.shape, zero)

    def put(self, state: np.ndarray, name: str, block) -> np.ndarray:
        """Write ``block`` (broadcast to the region's shape) into ``state``."""
        reg = self[name]
        state[(...,) + reg.index] = block
        return state

    def get(self, state, name: str):
        return state[(...,) + self[name].index]

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "row_axis": self.row_axis, "col_axis": self.col_axis,
                "regions": [{"name": r.name, "rows": list(r.rows), "cols": list(r.cols), "doc": r.doc}
                            for r in self.regions.values()]}

    @classmethod
    def from_json(cls, d: dict) -> "Layout":
        lay = cls(tuple(d["shape"]), d.get("row_axis", "tokens"), d.get("col_axis", "channels"))
        for r in d["regions"]:
            lay.add(r["name"], tuple(r["rows"]), tuple(r["cols"]), r.get("doc", ""))
        return lay


class ChannelAllocator:
    """Allocates BaseConv channel blocks left to right over all tokens.

    >>> alloc = ChannelAllocator(tokens=3)
    >>> alloc.block("a", 2, "the rows a_i of A"); alloc.block("b", 1)
    >>> layout = alloc.layout()
    """

    def __init__(self, tokens: int):
        self.tokens = tokens
        self.blocks: list[tuple[str, int, str]] = []

    def block(self, name: str, width: int, doc: str = "") -> None:
        self.blocks.append((name, width, doc))

    def layout(self) -> Layout:
        C = sum(w for _, w, _ in self.blocks)
        lay = Layout((self.tokens, C))
        c = 0
        for name, w, doc in self.blocks:
            lay.add(name, (0, self.tokens), (c, c + w), doc)
            c += w
        return lay
