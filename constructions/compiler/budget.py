"""Targets ``baseconv`` / ``baseconv-causal`` under a channel budget: every state and every layer's
inner channels number at most ``C``; layers (and, where the grid has no free slot, extra tokens
appended after the grid, like the theorems' O(w) rows, seed 000 Thm. D.30 / seed 003 Thm. H.21)
are spent instead of channels.

The machine.  With budget ``C`` the state has ``M = C - 2`` *memory* channels (the grid's ``D``
channels first: ``C >= D + 2`` is the stated minimum, :func:`minimum_channels`) and two *work*
channels ``A`` and ``B``.  Every value (input, product, partial sum) sits in one memory slot
``(t, c)``; every other slot is zero, always (no junk).  Each layer carries every memory channel
that holds a live value (one inner channel per such channel, ``W_in = W_out = e_c``, filter
``delta_0``, the gate a 0/1 mask ``B_gate`` on the live tokens: dead values are zeroed for free) and
spends the other ``C - (carried channels) >= 2`` inner channels on:

* a **unit read** into a slot at token ``t`` (seed 003 Lemma H.7, one inner channel): a *local*
  form (atoms at token ``t``, any channels: ``W_in`` = the coefficients, filter ``delta_0``) or a
  *channel* form (atoms of one channel at other tokens: ``W_in = e_c``, filter taps
  ``h[shift(t, t_a)]`` = the coefficients; the other slots of that channel sit at other shifts,
  zero taps), masked to token ``t`` by ``B_gate``.  A form with ``u >= 2`` units is accumulated in
  a scratch slot at ``t``: the first layer writes two units, each later one the scratch (a local
  read) plus one unit, ``u - 1`` layers;
* a **load**: the factors of up to ``floor(spare / 2)`` products at distinct tokens, one unit each,
  into ``A`` and ``B`` at the products' tokens (constants through ``B_out``);
* a **product layer** (seed 000 App. D.2.1 MULTIPLY): one inner channel ``(u W_gate)[:, k] *
  (h * u W_in)[:, k]`` with ``W_gate = e_A``, ``W_in = e_B``, ``h = delta_0``: ``A * B`` at every
  token, which is zero except at the loaded tokens; ``W_out`` adds it to one memory channel ``d``,
  free at all of them;
* a **move** of a finished output from its staging slot to its place (one unit read, a single tap).

The layer count is exact and stated (:func:`layer_bound`): ``sum over products (2 + (u(f) - 1)^+ +
(u(g) - 1)^+) + sum over outputs max(1, u - 1) + ceil(moved / 2)``, with ``u <= 1 + M`` units per
form: at most ``P (2 + 2 M) + O (M + 1)`` for ``P`` products and ``O`` outputs, linear in the
circuit's size.  Causal convolution reads only earlier tokens, so a product or partial sum sits at
a token no earlier than what it reads and no later than the outputs placed on the grid that need
it; where no slot is free in that range the budget is too small (:class:`.routing.CompileError`),
and :func:`minimum_channels` searches upwards for the smallest budget that compiles.

**The level-parallel scheme** (``baseconv``, ``C >= LEVEL_MIN = 5``; :func:`plan_levels`): the
theorems' ``O(Delta log w)`` (seed 000 Thm. D.30 / seed 003 Thm. H.21) with explicit constants.
One *flatten* layer moves every input into one value channel ``V``, token-major (grid channel
``c``, token ``t`` -> token ``c T_g + t``: one inner channel per grid channel, a delta filter at
lag ``c T_g``).  Per level of multiplicative depth, each work channel (``A``: first factors, ``B``:
second factors) receives its factor forms by :func:`_gather_sum`: a Benes route of masked shifts
(:mod:`.benes`, seed 003 Lemmas H.7-H.8) of each distinct atom to its copy run, a doubling tree of
copies, a second Benes route to the forms' blocks (scaled by the coefficients in its last masks;
the two routes compose into one where no atom has copies), a halving tree of sums; every block
ends at the product's token, free in ``V``.  Then one product layer (seed 000 App. D.2.1
MULTIPLY) writes every product of the level into ``V``.  The outputs are gathered the same way
into ``A`` (a third Benes route where their blocks do not end at ``c T_g + t`` already) and one
*unflatten* layer puts them on the grid.  With ``K = ceil(log2 N')`` (``N'``: the tokens, the
grid's ``D T_g`` or the largest level's terms rounded up to a power of 2, the theorems' ``O(w)``
rows): layers ``<= md (6K - 1) + 8K - 1`` (``C >= 7``: both work channels route in the same
layers, 1 + 3 + 3 inner channels) or ``md (12K - 3) + 8K - 1`` (``C`` in 5, 6: one after the
other), :func:`level_bound`.  Below 5 channels, on the causal target (no Benes route: its filters
only move values to later tokens) and for small circuits where it is fewer layers, the
one-product-at-a-time scheme runs; ``compiled.bound.scheme`` says which.
"""
from __future__ import annotations

import math
from fractions import Fraction

import circuits as C

from .bounds import budget_width, formula
from .circuit import CompiledCircuit, compiled, h21_d, param_counts, theorem_h21
from .info import CompileInfo
from .linearise import CONST, linearise, needed
# the level-parallel scheme (constructions/compiler/levels.py); its names re-exported here
from .levels import LEVEL_MIN, LEVEL_PARALLEL, SMALL, level_bound, plan_levels, route_layers  # noqa: F401
from .place import grid, grid_channels
from .routing import CompileError, LayerSpec, shift

#: the channels beyond the grid's a budget compile needs: the two work channels A and B
EXTRA = 2


class _Machine:
    """The symbolic plan: slots, liveness, and the layers as lists of operations (shifts are
    computed at emission, when the token count is final)."""

    def __init__(self, T: int, M: int, causal: bool, reserved: set, readers: dict):
        self.T, self.M, self.causal = T, M, causal
        self.Cw = M + 2
        self.A, self.B = M, M + 1
        self.slot_of: dict = {}
        self.at: dict = {}
        self.reserved = set(reserved)  # output places: never allocated to anything else
        self.readers = readers  # atom -> number of pending reads (products, outputs, scratch)
        self.layers: list = []  # [(ops, carried {atom: slot} after the layer)]
        self.n_scratch = 0

    # ---------------------------------------------------------------- slots
    def put(self, a, slot):
        assert slot not in self.at, (a, slot)
        self.at[slot] = a
        self.slot_of[a] = slot

    def drop(self, a):
        del self.at[self.slot_of.pop(a)]

    def free_slot(self, lo: int, hi: int | None, prefer: int | None = None, channel: int | None = None):
        """A free memory slot at a token in [lo, hi] (hi None: any, extending the grid)."""
        toks = range(lo, (hi if hi is not None else self.T - 1) + 1)
        order = sorted(toks, key=lambda t: (t != prefer, abs(t - (prefer if prefer is not None else lo))))
        for t in order:
            for c in ([channel] if channel is not None else range(self.M)):
                if (t, c) not in self.at and (t, c) not in self.reserved:
                    return (t, c)
        if hi is None:
            self.T += 1
            return self.free_slot(self.T - 1, None, self.T - 1, channel)
        return None

    # ---------------------------------------------------------------- forms
    def units(self, form: dict, t: int):
        """A form at token ``t`` -> [local atoms {a: v}] + [channel groups {a: v}] (nonempty)."""
        local, groups = {}, {}
        for a, v in form.items():
            if a == CONST:
                continue
            ta, ca = self.slot_of[a]
            if ta == t:
                local[a] = v
            else:
                if self.causal and ta > t:
                    raise AssertionError("causal read from a later token")
                groups.setdefault(ca, {})[a] = v
        return ([local] if local else []) + [groups[c] for c in sorted(groups)]

    def emit(self, ops: list, consumed: list, kind: str):
        """One layer: ``ops`` (each reads the current state) and the carries of every live atom
        not consumed; the atoms in ``consumed`` lose one pending read each."""
        for a in consumed:
            self.readers[a] -= 1
        for a in [a for a in self.slot_of if self.readers.get(a, 0) <= 0]:
            self.drop(a)
        self.layers.append((ops, dict(self.slot_of), kind))

    def write(self, form: dict, t: int, lo: int, hi, where=None):
        """Accumulate ``form`` into a memory slot at a token in [lo, hi]; returns the new atom."""
        tok_lo = lo
        slot = where or self.free_slot(tok_lo, hi, prefer=hi if hi is not None else t)
        if slot is None:
            return None
        t = slot[0]
        units = self.units(form, t)
        const = form.get(CONST, Fraction(0))
        reads = [a for a in form if a != CONST]
        self.n_scratch += 1
        acc = ("s", self.n_scratch)
        if len(units) <= 2:
            ops = [("unit", u, slot, None) for u in units]
            if const:
                ops.append(("const", const, slot))
            self.put(acc, slot)
            self.readers[acc] = 1
            self.emit(ops, reads, "partial sum")
            return acc
        first, rest = units[:2], units[2:]
        self.put(acc, slot)
        self.readers[acc] = 1
        ops = [("unit", u, slot, None) for u in first] + ([("const", const, slot)] if const else [])
        self.emit(ops, [a for u in first for a in u], "partial sum")
        for u in rest:
            self.n_scratch += 1
            new = ("s", self.n_scratch)
            self.drop(acc)
            self.put(new, slot)
            self.readers[new] = 1
            self.readers[acc] = 0
            ops = [("unit", {acc: Fraction(1)}, slot, acc), ("unit", u, slot, None)]
            self.emit(ops, [a for a in u], "partial sum")
            acc = new
        return acc


def _spare(mach: _Machine) -> int:
    chans = {c for (_, c) in mach.at}
    return mach.Cw - len(chans)


def _readers(atoms: dict, level: dict, need, outputs: dict):
    """``(products in level order, atom -> its pending reads)``: a factor of a product, an output."""
    readers: dict = {}
    prods = sorted((a for a in need if atoms[a][0] == "mul"), key=lambda a: (level[a], int(a[1:])))
    for p in prods:
        for f in atoms[p][1:]:
            for a in f:
                if a != CONST:
                    readers[a] = readers.get(a, 0) + 1
    for f in outputs.values():
        for a in f:
            if a != CONST:
                readers[a] = readers.get(a, 0) + 1
    return prods, readers


def _causal_limits(mach: _Machine, atoms: dict, outputs: dict, places: dict) -> dict:
    """Causal: the latest token each atom may sit at (the grid outputs that need it); a
    CompileError where an output placed on the grid reads an input at a later token."""
    hi: dict = {}
    for name, f in outputs.items():
        if places.get(name) is None:
            continue
        stack = [a for a in f if a != CONST]
        while stack:
            a = stack.pop()
            if hi.get(a, math.inf) <= places[name][0]:
                continue
            hi[a] = places[name][0]
            if atoms[a][0] == "mul":
                stack += [x for ff in atoms[a][1:] for x in ff if x != CONST]
    for name, f in outputs.items():
        if places.get(name) is not None:
            toks = [mach.slot_of[a][0] for a in f if a != CONST and a.startswith("in:")]
            if toks and max(toks) > places[name][0]:
                raise CompileError(f"output {name!r} is placed at token {places[name][0]} but depends on token "
                                   f"{max(toks)}: the causal target only moves values to later tokens")
    return hi


class _Budget:
    """The planning pass of :func:`plan_budget` on a machine: products in batches, then the outputs."""

    def __init__(self, mach: _Machine, atoms: dict, channels: int, hi: dict):
        self.mach, self.atoms, self.channels, self.hi = mach, atoms, channels, hi
        self.causal = mach.causal

    def too_small(self, what):
        return CompileError(f"channel budget {self.channels} is too small for the causal target: no free slot "
                            f"for {what}")

    def ready(self, f, t):
        """f as one unit at t: (unit, const), after scratch accumulation where it has >= 2 units."""
        mach, causal = self.mach, self.causal
        units = mach.units(f, t)
        if len(units) <= 1:
            return f
        lo = max(mach.slot_of[a][0] for a in f if a != CONST) if causal else 0
        acc = mach.write({a: v for a, v in f.items() if a != CONST}, t, lo, t if causal else None)
        if acc is None:
            raise self.too_small(f"a partial sum at token {t}")
        out = {acc: Fraction(1)}
        if CONST in f:
            out[CONST] = f[CONST]
        return out

    def _slot(self, p, batch: list, used_t: set):
        """Product ``p``'s slot: the first of a batch any free slot in its token range, a later one
        the batch's channel at a token the batch does not use (None: none)."""
        mach, causal, atoms = self.mach, self.causal, self.atoms
        fa, fb = atoms[p][1], atoms[p][2]
        toks = [mach.slot_of[a][0] for f in (fa, fb) for a in f if a != CONST]
        lo = max(toks) if causal else 0
        top = self.hi.get(p) if causal else None
        if causal and top is not None and top < lo:
            raise CompileError(f"product {p} is needed at token {top} but reads token {lo}")
        prefer = max(set(toks), key=toks.count) if not causal else lo
        if not batch:
            slot = mach.free_slot(lo, top, prefer=prefer)
            if slot is None:
                raise self.too_small(f"product {p} (tokens {lo}..{top})")
            return slot
        d = batch[0][2][1]
        for t in sorted(range(lo, (top if top is not None else mach.T - 1) + 1), key=lambda t: (t != prefer, t)):
            if t not in used_t and (t, d) not in mach.at and (t, d) not in mach.reserved:
                return (t, d)
        return None

    def batch(self, pending: list) -> list:
        """Products whose factors are ready (level order), distinct tokens, a common free channel."""
        mach, atoms = self.mach, self.atoms
        batch, used_t = [], set()
        spare = _spare(mach)
        for p in pending:
            if len(batch) >= max(1, spare // 2):
                break
            fa, fb = atoms[p][1], atoms[p][2]
            if any(a != CONST and a not in mach.slot_of for f in (fa, fb) for a in f):
                continue
            slot = self._slot(p, batch, used_t)
            if slot is None:
                continue
            batch.append((p, (fa, fb), slot))
            used_t.add(slot[0])
            if mach.units(fa, slot[0]).__len__() > 1 or mach.units(fb, slot[0]).__len__() > 1:
                break  # a product that needs partial sums goes alone
        return batch

    def multiply(self, batch: list) -> None:
        """A batch's partial sums (scratch at the product's token where a factor has >= 2 units), its
        load layer and its product layer."""
        mach = self.mach
        loads = []
        held = {slot for *_, slot in batch} - mach.reserved
        mach.reserved |= held  # the products' slots stay free while their factors are prepared
        for p, (fa, fb), slot in batch:
            loads.append((p, self.ready(fa, slot[0]), self.ready(fb, slot[0]), slot))
        mach.reserved -= held
        ops, consumed = [], []
        for p, fa2, fb2, slot in loads:
            t = slot[0]
            for X, f in ((mach.A, fa2), (mach.B, fb2)):
                for u in mach.units(f, t):
                    ops.append(("unit", u, (t, X), None))
                if f.get(CONST):
                    ops.append(("const", f[CONST], (t, X)))
                consumed += [a for a in f if a != CONST]
        mach.emit(ops, consumed, "load")
        d = loads[0][3][1]
        for p, _, _, slot in loads:
            mach.put(p, slot)
        mach.emit([("product", d)], [], "product")

    def products(self, prods: list) -> None:
        pending = list(prods)
        while pending:
            batch = self.batch(pending)
            self.multiply(batch)
            done = {p for p, *_ in batch}
            pending = [p for p in pending if p not in done]

    def stage(self, outputs: dict, places: dict) -> dict:
        """Each output accumulated at a free slot (never another output's place): name -> its atom
        (None: the output is 0)."""
        mach, causal = self.mach, self.causal
        staged = {}
        for name in sorted(outputs):
            f = outputs[name]
            place = places.get(name)
            atoms_f = [a for a in f if a != CONST]
            if place is not None and len(f) == 1 and atoms_f and f[atoms_f[0]] == 1 \
                    and mach.slot_of.get(atoms_f[0]) == place:
                staged[name] = atoms_f[0]  # a pass-through in place: it keeps its pending read (alive)
                continue
            if not f:
                staged[name] = None
                continue
            lo = max([mach.slot_of[a][0] for a in atoms_f], default=0) if causal else 0
            top = place[0] if (causal and place is not None) else None
            slot = mach.free_slot(lo, top, prefer=place[0] if place is not None else lo)
            if slot is None:
                raise self.too_small(f"output {name!r} (tokens {lo}..{top})")
            staged[name] = mach.write(f, slot[0], slot[0], slot[0], where=slot)
        return staged

    def place(self, outputs: dict, places: dict, staged: dict) -> dict:
        """The outputs moved from their staging slots to their places, two per layer: name -> slot."""
        mach = self.mach
        slots, moves = {}, []
        for name in sorted(outputs):
            place = places.get(name)
            a = staged[name]
            s = mach.slot_of[a] if a is not None else None
            if place is None:
                place = s if s is not None else mach.free_slot(0, None)
                mach.reserved.add(place)
            slots[name] = place
            if s is not None and s != place:
                moves.append((name, a, place))
        for i in range(0, len(moves), 2):
            ops = []
            for name, a, place in moves[i:i + 2]:
                ops.append(("unit", {a: Fraction(1)}, place, None))
            mach.emit(ops, [a for _, a, _ in moves[i:i + 2]], "move (outputs)")
            for name, a, place in moves[i:i + 2]:
                mach.put(("out", name), place)
                mach.readers[("out", name)] = 1
            mach.layers[-1] = (ops, dict(mach.slot_of), "move (outputs)")
        return slots


def plan_budget(g, causal: bool, channels: int):
    """The symbolic plan of ``g`` on ``channels`` channels: (machine, inputs, output slots)."""
    T, inputs, places = grid(g)
    D = grid_channels(g)
    if channels < D + EXTRA:
        raise ValueError(f"channel budget {channels} is below the minimum {D + EXTRA} (the grid's {D} channels + "
                         f"{EXTRA} work channels)")
    atoms, level, outputs = linearise(g)
    prods, readers = _readers(atoms, level, needed(atoms, outputs), outputs)
    reserved = {p for p in places.values() if p is not None}
    mach = _Machine(T, channels - EXTRA, causal, reserved, readers)
    for name, (t, c) in inputs.items():
        mach.put(f"in:{name}", (t, c))
    hi = _causal_limits(mach, atoms, outputs, places) if causal else {}
    # unread inputs: the first layer does not carry them (zeroed at no cost)
    for a in [a for a in mach.slot_of if mach.readers.get(a, 0) <= 0]:
        mach.drop(a)
    plan = _Budget(mach, atoms, channels, hi)
    plan.products(prods)
    # outputs: staged (accumulated at a free slot, never another output's place), then moved
    slots = plan.place(outputs, places, plan.stage(outputs, places))
    if not mach.layers:
        mach.layers.append(([], dict(mach.slot_of), "carry"))
    return mach, inputs, slots


def _emit(mach: _Machine, inputs: dict) -> list:
    T, Cw = mach.T, mach.Cw
    before = {f"in:{n}": s for n, s in inputs.items()}
    out = []
    for ops, after, kind in mach.layers:
        spec = LayerSpec(kind)
        live = {}
        for a, (t, c) in after.items():
            if before.get(a) == (t, c):
                live.setdefault(c, []).append(t)
        for c, toks in sorted(live.items()):
            k = spec.new_inner()
            spec.W_in[(c, k)] = spec.h[(0, k)] = spec.W_out[(k, c)] = Fraction(1)
            for t in toks:
                spec.b_gate[(t, k)] = Fraction(1)
        for op in ops:
            if op[0] == "const":
                _, v, (t, c) = op
                spec.b_out[(t, c)] = spec.b_out.get((t, c), 0) + v
            elif op[0] == "unit":
                _, u, (t, c), _ = op
                k = spec.new_inner()
                slots = {a: before[a] for a in u}
                if all(s[0] == t for s in slots.values()):
                    for a, v in u.items():
                        spec.W_in[(slots[a][1], k)] = spec.W_in.get((slots[a][1], k), 0) + v
                    spec.h[(0, k)] = Fraction(1)
                else:
                    (ch,) = {s[1] for s in slots.values()}
                    spec.W_in[(ch, k)] = Fraction(1)
                    for a, v in u.items():
                        s = shift(t, slots[a][0], T, mach.causal)
                        assert s is not None and s != 0
                        spec.h[(s, k)] = v
                spec.b_gate[(t, k)] = Fraction(1)
                spec.W_out[(k, c)] = Fraction(1)
            else:  # product
                k = spec.new_inner()
                spec.W_gate[(mach.A, k)] = spec.W_in[(mach.B, k)] = spec.h[(0, k)] = Fraction(1)
                spec.W_out[(k, op[1])] = Fraction(1)
        assert spec.inner <= Cw, (spec.inner, Cw)
        out.append(spec)
        before = after
    return out


def layer_bound(g, channels: int) -> dict:
    """The stated layer guarantee of a budget compile (see the module docstring)."""
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    P = sum(1 for a in need if atoms[a][0] == "mul")
    O = len(outputs)
    M = channels - EXTRA
    value = P * (2 + 2 * M) + O * (M + 1) + math.ceil(O / 2) + 1
    return {"layers": value, "products": P, "outputs": O, "memory_channels": M,
            "formulas": {"layers": formula("P (2 + 2 M) + O (M + 1) + ceil(O / 2) + 1", {"P": P, "O": O, "M": M},
                                           value), "state_width": budget_width(channels)},
            "rule": "per product 2 layers (load A and B, multiply) + (u - 1) partial-sum layers per factor of u >= 2 "
                    "units (u <= 1 + M: a local read and one read per memory channel); per output max(1, u - 1); "
                    "ceil(moved / 2) moves: <= P (2 + 2 M) + O (M + 1) + ceil(O / 2) + 1"}


def one_at_a_time_layers(g, causal: bool, channels: int) -> int:
    """The layers of the one-product-at-a-time scheme on a validated placed circuit at budget
    ``channels`` (what :func:`compile_budget` compares the level-parallel scheme with)."""
    mach, inputs, _ = plan_budget(g, causal, channels)
    return len(_emit(mach, inputs))


def minimum_channels(g, causal: bool, limit: int | None = None) -> int:
    """The smallest budget this compiler accepts: the grid's channels + 2; for the causal target
    the smallest from there at which every product and output finds a slot (searched, up to
    ``limit``)."""
    lo = grid_channels(g) + EXTRA
    if not causal:
        return lo
    top = limit if limit is not None else lo + 64
    for c in range(lo, top + 1):
        try:
            plan_budget(g, True, c)
            return c
        except CompileError as e:
            if "too small" not in str(e):
                raise
    raise CompileError(f"no causal budget up to {top} channels compiles this circuit")


# ---------------------------------------------------------------------------------------------
# The level-parallel scheme (baseconv, C >= LEVEL_MIN): every product of a level in one layer.

def layers_of(specs, T: int, Cw: int, causal: bool) -> list:
    """The BaseConv layers (``T`` tokens, ``Cw`` channels) of the layer specifications ``specs``."""
    return [sp.layer(T, Cw, causal) for sp in specs]


def _plan(g, causal: bool, channels: int):
    """:func:`compile_budget`'s specifications: (specs, tokens, inputs, output slots, bound, scheme)."""
    scheme, specs = None, None
    if not causal and channels >= LEVEL_MIN:
        specs, T, inputs, slots, bound = plan_levels(g, channels)
        scheme = "level-parallel"
        small = layer_bound(g, channels)
        if small["layers"] < len(specs) or small["products"] <= SMALL:
            n_lp = len(specs)
            mach, inputs2, slots2 = plan_budget(g, causal, channels)
            specs2 = _emit(mach, inputs2)
            if len(specs2) < len(specs):
                specs, T, inputs, slots, scheme = specs2, mach.T, inputs2, slots2, "one product at a time"
                bound = layer_bound(g, channels)
                bound["why"] = (f"fewer layers than the level-parallel scheme ({len(specs2)} against "
                                f"{n_lp})")
    if specs is None:
        mach, inputs, slots = plan_budget(g, causal, channels)
        specs, T = _emit(mach, inputs), mach.T
        scheme = "one product at a time"
        bound = layer_bound(g, channels)
        bound["why"] = ("the causal target: its filters move values only to later tokens, so no Benes route"
                        if causal else f"budget {channels} below the level-parallel scheme's minimum {LEVEL_MIN}")
    return specs, T, inputs, slots, bound, scheme


def budget_shape(g, causal: bool = False, channels: int = 0) -> tuple[int, int, int]:
    """``(layers, width, tokens)`` of :func:`compile_budget` at ``channels``, planned only (no weights
    built): what :mod:`.budget_search` compares; the same errors."""
    specs, T, *_ = _plan(g, causal, channels)
    return len(specs), channels, T


def compile_budget(g, name: str = "circuit", causal: bool = False, channels: int = 0) -> CompiledCircuit:
    """Compile a validated placed circuit to BaseConv on at most ``channels`` channels (states and
    inner channels).  ``baseconv`` with ``channels >= LEVEL_MIN``: the level-parallel scheme
    (:func:`plan_levels`), unless the one-product-at-a-time scheme's stated bound is already fewer
    layers (small circuits), then that one; otherwise (the causal target, whose filters cannot move a
    value to an earlier token, so no Benes route; or a budget below ``LEVEL_MIN``) one product at a
    time (:func:`plan_budget`).  ``compiled.bound.scheme`` says which ran."""
    specs, T, inputs, slots, bound, scheme = _plan(g, causal, channels)
    m = C.metrics(g, validated=True)
    pl = C.placement(g)
    target = "baseconv-causal" if causal else "baseconv"
    Cw = channels
    layers = layers_of(specs, T, Cw, causal)
    bound.update({"scheme": scheme, "tokens": T, "state_width": channels, "inner_width": channels,
                  "channel_budget": channels})
    bound["formulas"] = {**bound.get("formulas", {}), "state_width": budget_width(channels)}
    info = {
        "circuit": m,
        "compiled": CompileInfo("budget", target, layers=len(layers), tokens=T, state_width=Cw,
                                grid_tokens=pl.tokens if pl else 1, channel_budget=channels,
                                inner_width=max(sp.inner for sp in specs), params=param_counts(layers),
                                plan=[sp.kind for sp in specs], outputs=dict(sorted(slots.items())), bound=bound),
        "theorem_H21_bound": theorem_h21(m, h21_d(g)),
    }
    conv = "causal (linear) convolution" if causal else "circular convolution"
    return compiled(g, name, (T, Cw), layers, inputs, slots, info,
                    reference="seed 000 Thm. D.30 / seed 003 Thm. H.21 under a channel budget (App. D.2.1 MULTIPLY; "
                              "seed 003 Lemmas H.7-H.8 masked shifts"
                              + (", Benes routing)" if scheme == "level-parallel" else ")"),
                    notes=f"placed circuit on {T} tokens ({T - (pl.tokens if pl else 1)} appended), {conv}, "
                          f"channel budget {channels}, {scheme} scheme")


def pareto(g, target: str, max_points: int = 48, **kw) -> list:
    """The layers/channels frontier of ``g`` on ``target``: the lower envelope of every compile a
    budget search tries (:func:`.budget_search.pareto`, which this names)."""
    from .budget_search import pareto as search_pareto

    return search_pareto(g, target, max_points=max_points, **kw)
