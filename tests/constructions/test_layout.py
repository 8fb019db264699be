"""constructions/layout.py: named, non-overlapping rectangular regions of the state."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from constructions.layout import ChannelAllocator, Layout, Region


def test_region_shape_and_index():
    r = Region("a", (1, 3), (2, 5), "doc")
    assert r.shape == (2, 3)
    assert r.index == (slice(1, 3), slice(2, 5))


def test_add_rejects_overlap_outside_and_duplicates():
    lay = Layout((4, 6))
    lay.add("a", (0, 2), (0, 3))
    with pytest.raises(ValueError, match="overlaps region 'a'"):
        lay.add("b", (1, 3), (2, 4))
    with pytest.raises(ValueError, match="outside the state"):
        lay.add("c", (0, 5), (0, 1))
    with pytest.raises(ValueError, match="outside the state"):
        lay.add("c", (2, 2), (0, 1))  # empty
    with pytest.raises(ValueError, match="defined twice"):
        lay.add("a", (3, 4), (5, 6))
    lay.add("b", (2, 4), (0, 3))  # touching is fine
    lay.add("c", (0, 4), (3, 6))
    assert list(lay.regions) == ["a", "b", "c"]


def test_unknown_region_names_the_known_ones():
    lay = Layout((2, 2))
    lay.add("x", (0, 1), (0, 2))
    with pytest.raises(KeyError, match=r"no region named 'y'.*\['x'\]"):
        lay["y"]


def test_locate_describe_rows_cols():
    lay = Layout((3, 5))
    lay.add("p", (0, 3), (0, 2))
    lay.add("q", (1, 2), (3, 5))
    assert lay.locate(2, 1) == ("p", (2, 1))
    assert lay.locate(1, 4) == ("q", (0, 1))
    assert lay.locate(0, 4) == ("(unassigned)", (0, 4))
    assert lay.describe(1, 4) == "region 'q' entry [0, 1] (state [1, 4])"
    assert list(lay.rows("q")) == [1] and list(lay.cols("q")) == [3, 4]


def test_put_get_on_exact_and_batched_states():
    lay = Layout((3, 4))
    lay.add("v", (0, 3), (1, 2))
    lay.add("m", (1, 3), (2, 4))
    S = lay.new_state()
    assert S.dtype == object and S.shape == (3, 4) and all(z == 0 for z in S.flat)
    lay.put(S, "v", np.array([[Fraction(1)], [Fraction(2)], [Fraction(3)]], dtype=object))
    lay.put(S, "m", Fraction(1, 2))  # broadcast
    assert [Fraction(z) for z in lay.get(S, "v")[:, 0]] == [1, 2, 3]
    assert (lay.get(S, "m") == Fraction(1, 2)).all()
    assert S[0, 2] == 0 and S[0, 0] == 0
    B = np.zeros((5, 3, 4))
    lay.put(B, "m", np.arange(5.0)[:, None, None])
    assert lay.get(B, "m").shape == (5, 2, 2)
    np.testing.assert_array_equal(B[:, 1, 2], np.arange(5.0))
    assert B[:, 0].sum() == 0


@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(1, 5))
def test_channel_allocator_tiles_the_columns_and_json_round_trips(widths, tokens):
    al = ChannelAllocator(tokens)
    for i, w in enumerate(widths):
        al.block(f"r{i}", w, f"doc {i}")
    lay = al.layout()
    assert lay.shape == (tokens, sum(widths))
    c = 0
    for i, w in enumerate(widths):
        assert lay[f"r{i}"].rows == (0, tokens) and lay[f"r{i}"].cols == (c, c + w)
        assert lay[f"r{i}"].doc == f"doc {i}"
        c += w
    back = Layout.from_json(lay.to_json())
    assert back.to_json() == lay.to_json()
    assert back.shape == lay.shape and back.regions == lay.regions
    for i in range(tokens):
        for j in range(sum(widths)):
            assert back.locate(i, j) == lay.locate(i, j) != ("(unassigned)", (i, j))


@pytest.mark.parametrize("build", [gd_baseconv, gd_baseconv_causal, gd_lsa, gd_elsa])
def test_construction_layouts_are_consistent(build):
    con = build(4, 3)
    lay = con.layout
    back = Layout.from_json(lay.to_json())
    assert back.regions == lay.regions and back.shape == lay.shape
    # every region lies inside the state and regions are disjoint (re-adding checks both)
    fresh = Layout(lay.shape)
    for r in lay.regions.values():
        fresh.add(r.name, r.rows, r.cols, r.doc)
    for r in ("x",) if build in (gd_baseconv, gd_baseconv_causal) else ("w", "u"):
        assert r in lay.regions
    if build in (gd_baseconv, gd_baseconv_causal):
        # BaseConv layouts allocate every channel over every token
        assert all(lay.locate(i, j)[0] != "(unassigned)"
                   for i in range(lay.shape[0]) for j in range(lay.shape[1]))
