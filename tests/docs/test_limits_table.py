"""README.md's "Limits" table, rendered from the limits each command declares (its ``LIMITS`` and the
constants beside it) and compared with README.md's table, which must be exactly it.  Every key of every
declared limits table is shown by some row, so a new limit without a row fails here too.

Regenerate the README table after changing a limit or a row:

    python tests/docs/test_limits_table.py --write
"""
from __future__ import annotations

import math
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
HEADER = "| command | what | limit | lifted by |\n|---|---|---|---|\n"
REGENERATE = "python tests/docs/test_limits_table.py --write"


class Used(dict):
    """A command's declared limits; remembers which were read by the table."""

    def __init__(self, name: str, values: dict):
        super().__init__(values)
        self.name, self.read = name, set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def declared() -> dict[str, Used]:
    """Every command's declared limits, by the name the rows use (imports light modules only)."""
    from circuits import random as random_circuits
    from numerics import roundoff_config, train
    from numerics.training import construction_task
    from polyverify.plumbing import rational
    from polyverify.plumbing.cli import DEFAULT_MEMORY_LIMIT
    from polyverify.sweep import base as sweep
    from verify import bounded, catalogue_cmd, circuit_args, compare, gd_cmd
    from verify.importers import cli as import_cli
    from circuits.limits import MAX_SEED as GD_MAX_SEED

    from constructions import weights_io

    tables = {
        "rational": {"digits": rational.MAX_DIGITS, "exponent": rational.MAX_EXPONENT},
        "gd": dict(gd_cmd.GD_LIMITS),
        "gd_other": {"min_digits": gd_cmd.GD_MIN_DIGITS, "max_seed": GD_MAX_SEED},
        "catalogue": {"size": catalogue_cmd.MAX_SIZE, "seed": catalogue_cmd.MAX_SEED},
        "import": {"size": import_cli.MAX_SIZE, "variables": import_cli.MAX_PROOF_VARIABLES,
                   "layers": import_cli.MAX_LAYERS},
        "proof": {"memory": bounded.DEFAULT_MEMORY_GIB, "memory_range": bounded.MEMORY_RANGE,
                  "timeout": bounded.DEFAULT_TIMEOUT_S, "timeout_range": bounded.TIMEOUT_RANGE,
                  "terms_per_s": bounded.TERM_PRODUCTS_PER_S},
        "weights": {"entries": weights_io.MAX_ENTRIES, "layers": weights_io.MAX_LAYERS},
        "circuit": dict(circuit_args.LIMITS),
        "circuit_large": dict(circuit_args.LARGE_LIMITS),
        "random": dict(random_circuits.LIMITS),
        "random_large": dict(random_circuits.LARGE_LIMITS),
        "sweep": dict(sweep.LIMITS),
        "sweep_large": dict(sweep.LARGE_LIMITS),
        "sweep_connect": {"default": sweep.CONNECT_TIMEOUT_S, "max": sweep.CONNECT_TIMEOUT_MAX_S,
                          "jobqueue": sweep.JOBQUEUE_CONNECT_TIMEOUT_S, "jobqueue_max": sweep.JOBQUEUE_CONNECT_TIMEOUT_MAX_S},
        "compare": dict(compare.LIMITS),
        "compare_large": dict(compare.LARGE_LIMITS),
        "train": {**train.LIMITS, "memory": train.MEMORY_LIMIT},
        "task": dict(construction_task.LIMITS),
        "roundoff": {**roundoff_config.LIMITS, "memory": roundoff_config.MEMORY_LIMIT,
                     "digits": roundoff_config.DIGITS_RANGE},
        "memory": {"default": DEFAULT_MEMORY_LIMIT},
    }
    return {k: Used(k, v) for k, v in tables.items()}


class LimitFormatter(string.Formatter):
    """``str.format`` with the table's ways of writing a number: ``p2`` (2^20), ``p2m1`` (2^63-1), ``p10``
    (10^9), ``bytes`` (64 MiB), ``days`` (seconds as days); any other spec as ``format``."""

    def format_field(self, value, spec):
        if spec == "p2":
            k = int(value).bit_length() - 1
            assert value == 2 ** k, value
            return f"2^{k}"
        if spec == "p2m1":
            k = int(value + 1).bit_length() - 1
            assert value == 2 ** k - 1, value
            return f"2^{k}-1"
        if spec == "p10":
            k = round(math.log10(value))
            assert value == 10 ** k, value
            return f"10^{k}"
        if spec == "bytes":
            for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
                if value >= size and value % size == 0:
                    return f"{value // size} {unit}"
            return f"{value} B"
        if spec == "days":
            assert value % 86400 == 0, value
            return f"{value // 86400} days"
        return super().format_field(value, spec)


#: the rows: (command, what, limit, lifted by), each a template filled from :func:`declared`
ROWS = [
    ("every command", "an exact rational given as text (`--eta`, `--lam`, `--set`, weight-file metadata): digits of "
     "a numerator, denominator or decimal; exponent (`1e-5`)",
     "{rational[digits]:,}; {rational[exponent]:,} in magnitude (`polyverify/plumbing/rational.py`: checked before any "
     "big integer is built)", "-"),
    ("`verify.construct gd`", "`--layers`", "{gd[--layers]:,}", "`--allow-large`"),
    ("", "`--n`, `--d`", "{gd[--n]:,}, {gd[--d]:,}", "`--allow-large`"),
    ("", "`--n` x `--d` (variables of the exact proof; its cost per architecture and size: `docs/performance.md`)",
     "{gd[--n x --d (proof variables)]:,}", "`--allow-large`"),
    ("", "`--batch`", "{gd[--batch]:p2}", "`--allow-large`"),
    ("", "`--batch` x `--layers` (problem-layers of the float runs)", "{gd[--batch x --layers (problem-layers)]:p10}",
     "`--allow-large`"),
    ("", "`--digits`", "{gd_other[min_digits]} to {gd[--digits]:,}", "`--allow-large` (upper)"),
    ("", "estimated memory of the run", "{gd[memory (estimate)]}", "`--allow-large`"),
    ("", "`--seed`, `--kappa`", "0 to {gd_other[max_seed]:p2m1}; finite, >= 1", "-"),
    ("`verify.construct NAME`", "each `--set` size", "{catalogue[size]} (seeds {catalogue[seed]:p2m1})",
     "`--allow-large` (sizes)"),
    ("`verify.construct import`", "each size of the specification (`--set`, the file's metadata); n x d of a `gd` "
     "specification (variables of the exact proof); layers in the file",
     "{import[size]:,}; {import[variables]:,}; {import[layers]:,}", "`--allow-large` (n x d)"),
    ("`gd`, `import`, `circuit`, `NAME` (every exact proof of the CLIs)", "memory of the proof (it runs in a forked "
     "child; past the limit: exit 2, one line naming it, never a FLINT abort)", "{proof[memory]:g} GiB",
     "`--proof-memory-gib` ({proof[memory_range][0]:g} to {proof[memory_range][1]:,})"),
    ("", "time of the proof", "{proof[timeout]:g} s",
     "`--proof-timeout` ({proof[timeout_range][0]} s to {proof[timeout_range][1]:days})"),
    ("", "`circuit` only: the proof's work estimated from the circuit before compiling (the compiler's product tree, "
     "term bounds capped by monomial counts, {proof[terms_per_s]:p10} term products per second)",
     "refused above `--proof-timeout`", "`--proof-timeout`"),
    ("weight files (`--weights`, `--learned`)", "entries in all; layers", "{weights[entries]:,}; {weights[layers]:,}",
     "-"),
    ("`verify.construct circuit`", "`--graph` file size; nodes; size (wires with multiplicity)",
     "{circuit[max_file_bytes]:bytes}; {circuit[max_nodes]:,}; {circuit[max_size]:,}",
     "`--allow-large` ({circuit_large[max_file_bytes]:bytes}; {circuit_large[max_nodes]:,}; "
     "{circuit_large[max_size]:,})"),
    ("", "fan-in of one gate; multiplicity of one wire; formal degree of any node",
     "{circuit[max_fan_in]:,}; {circuit[max_mult]:,}; {circuit[max_degree]:,}",
     "`--allow-large` ({circuit_large[max_fan_in]:,}; {circuit_large[max_mult]:,}; {circuit_large[max_degree]:,})"),
    ("", "digits of a constant", "{circuit[max_const_digits]:,}", "`--allow-large` ({circuit_large[max_const_digits]:,})"),
    ("", "`--trials`, `--float-trials`; trials x nodes", "{circuit[max_trials]:,}; {circuit[max_trial_nodes]:,}",
     "`--allow-large` ({circuit_large[max_trials]:p10}; {circuit_large[max_trial_nodes]:p10})"),
    ("", "tokens x channels of a placed circuit's grid", "{circuit[max_grid]:,}",
     "`--allow-large` ({circuit_large[max_grid]:p10})"),
    ("", "`--channels` (a layer holds C x C weight arrays)", "{circuit[max_channels]:,}",
     "`--allow-large` ({circuit_large[max_channels]:,})"),
    ("", "`--repeat` (steps of an iteration); `--float-trials` x `--repeat` x nodes x 2 dtypes (the mpmath "
     "reference of the float runs)", "{circuit[max_repeat]:,}; {circuit[max_repeat_work]:p10}",
     "`--allow-large` ({circuit_large[max_repeat]:p10}; {circuit_large[max_repeat_work]:p10})"),
    ("`circuits.random`", "`--gates`; `--inputs`; `--max-arity`",
     "{random[max_gates]:,}; {random[max_inputs]:,}; {random[max_arity]:,}",
     "`--allow-large` ({random_large[max_gates]:,} gates, {random_large[max_inputs]:,} inputs; "
     "{random_large[max_arity]:,})"),
    ("", "`--gates` x `--max-arity` (wires); `--inputs` + `--gates` (nodes): the circuit command's own limits",
     "{random[max_wires]:,}; {random[max_nodes]:,}",
     "`--allow-large` ({random_large[max_wires]:,}; {random_large[max_nodes]:,})"),
    ("`verify.construct circuit`", "bytes read from `--graph` (a pipe or `/dev/zero` is cut off there, whatever its "
     "reported size)", "{circuit[max_file_bytes]:bytes}", "`--allow-large` ({circuit_large[max_file_bytes]:bytes})"),
    ("`numerics.sweep`", "cells of a grid; `--workers`; `--jobs`",
     "{sweep[cells]:,}; {sweep[workers]:,}; {sweep[jobs]:,}",
     "`--allow-large` ({sweep_large[cells]:,}; {sweep_large[workers]:,}; {sweep_large[jobs]:,})"),
    ("", "`--retries`; a grid file's size", "{sweep[retries]}; {sweep[grid_bytes]:bytes}", "-"),
    ("`numerics.sweep`", "`--connect-timeout` (TCP connect, Dask handshake and identity of `--scheduler` or "
     "`--scheduler-file`'s address)", "{sweep_connect[default]:g} s (at most {sweep_connect[max]:g})", "-"),
    ("`numerics.sweep`", "`--connect-timeout` with `--jobqueue` (the batch submissions and the queue until the first "
     "worker connects; a failed `sbatch`/`qsub` is one line, exit 2, jobs already submitted cancelled)",
     "{sweep_connect[jobqueue]:g} s (at most {sweep_connect[jobqueue_max]:g})", "-"),
    ("`verify.compare`", "`--n` / `--d`; `--problems`; `--iters`; values per list",
     "{compare[max_n]:,} / {compare[max_d]:,}; {compare[max_problems]:,}; {compare[max_iters]:,}; "
     "{compare[max_values]}",
     "`--allow-large` ({compare_large[max_n]:,} / {compare_large[max_d]:,}; {compare_large[max_problems]:,}; "
     "{compare_large[max_iters]:,}; {compare_large[max_values]})"),
    ("`numerics.train`", "`--steps`; `--batch`; `--eval-batch`",
     "{train[steps]:p10}; {train[batch]:,}; {train[eval_batch]:p2}", "`--allow-large`"),
    ("", "`--n` / `--d`; `--width` / `--layers` / `--heads`",
     "{train[n]:,} / {train[d]:,}; {train[width]:,} / {train[layers]:,} / {train[heads]:,}", "`--allow-large`"),
    ("", "`--k`; `--metric-batches`; `--threads`", "{train[k]:,}; {train[metric_batches]:,}; {train[threads]:,}",
     "`--allow-large`"),
    ("", "estimated memory (activations, convolution kernels, parameters and optimiser state)",
     "{train[memory]:bytes}", "`--allow-large`"),
    ("`numerics.training.construction_task`", "`--n` / `--d`; `--steps`; `--batch`; `--k`",
     "{task[n]:,} / {task[d]:,}; {task[steps]:p10}; {task[batch]:,}; {task[k]:,}", "`--allow-large`"),
    ("`numerics.roundoff`", "largest `--layers`; `--batch` / `--n` / `--d`; values per list",
     "{roundoff[layers]:,}; {roundoff[batch]:,} / {roundoff[n]:,} / {roundoff[d]:,}; {roundoff[list]:,}",
     "`--allow-large`"),
    ("", "`--layer-ref`; `--layer-ref-layers`; configurations (backend and dtype pairs x conv x kappa x sigma)",
     "{roundoff[layer_ref]:,}; {roundoff[layer_ref_layers]:,}; {roundoff[configurations]:,}", "`--allow-large`"),
    ("", "high-precision reference work; estimated memory",
     "{roundoff[reference_ops]:p10} mpfr multiply-adds; {roundoff[memory]:bytes}", "`--allow-large`"),
    ("", "`--digits`", "{roundoff[digits][0]} to {roundoff[digits][1]}", "-"),
]


def render(tables: dict[str, Used] | None = None) -> str:
    """The table as README.md holds it (header included)."""
    tables = declared() if tables is None else tables
    f = LimitFormatter()
    return HEADER + "".join("|" + "|".join(f" {f.format(cell, **tables)} " if cell else " " for cell in row) + "|\n"
                            for row in ROWS)


def readme_table(text: str) -> tuple[int, int]:
    """Where README.md's limits table starts and ends (the header line to the first blank line after it)."""
    start = text.index(HEADER)
    end = text.index("\n\n", start) + 1
    return start, end


def test_readme_limits_table_is_the_declared_limits():
    text = README.read_text()
    start, end = readme_table(text)
    assert text[start:end] == render(), f"README.md's limits table differs from the declared limits: {REGENERATE}"


def test_every_declared_limit_has_a_row():
    tables = declared()
    render(tables)
    unread = {name: sorted(set(t) - t.read) for name, t in tables.items() if set(t) - t.read}
    # the default memory limit is the one gd, numerics.train and numerics.roundoff declare as theirs
    assert unread == {"memory": ["default"]}, f"declared limits the README table does not show: {unread}"
    assert tables["train"]["memory"] == tables["roundoff"]["memory"] == tables["memory"]["default"]


def test_the_same_limit_declared_twice_agrees():
    """Limits one command shares with another are declared by one of them and read by the other; where two
    modules state the same limit, they agree (the table shows one)."""
    from circuits import random as random_circuits
    from constructions import weights_io
    from verify import circuit_args
    from verify.importers import cli as import_cli

    assert import_cli.MAX_LAYERS == weights_io.MAX_LAYERS
    assert random_circuits.LIMITS["max_wires"] == circuit_args.LIMITS["max_size"]
    assert random_circuits.LIMITS["max_nodes"] == circuit_args.LIMITS["max_nodes"]


def test_the_formatter_refuses_a_number_it_would_misstate():
    f = LimitFormatter()
    assert f.format("{0:p2} {1:p2m1} {2:p10} {3:bytes} {4:days}", 2**20, 2**63 - 1, 10**9, 64 * 2**20, 7 * 86400) \
        == "2^20 2^63-1 10^9 64 MiB 7 days"
    for spec, value in (("p2", 3), ("p2m1", 2**8), ("p10", 2000), ("days", 3600)):
        try:
            f.format("{0:" + spec + "}", value)
        except AssertionError:
            continue
        raise AssertionError(f"{spec} wrote {value}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] != ["--write"]:
        print(render(), end="")
        sys.exit(0)
    text = README.read_text()
    start, end = readme_table(text)
    README.write_text(text[:start] + render() + text[end:])
    print(f"wrote the limits table of {README}")
