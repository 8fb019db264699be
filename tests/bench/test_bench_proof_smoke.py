"""Smoke test of bench/bench_proof.py: two architectures at two tiny sizes end to end in child
processes, the exact proof beside the randomized check (the table and the JSON: every exact run
proved, every randomized run passed with its bound, the CPU ratio), and its one-line errors
(exit 2) for bad arguments."""
import pytest

BENCH = "bench_proof.py"


def test_exact_and_randomized_side_by_side(run_json):
    text, res = run_json(["--archs", "baseconv,lsa", "--sizes", "3x2,5x2", "--sympy-up-to", "0", "--full-up-to", "0",
                          "--paired-up-to", "0"])
    assert "### The randomized check (`--check random`) beside the exact proof (flint)" in text
    for arch in ("baseconv", "lsa"):
        for size in ("3x2", "5x2"):
            e, r = res[f"{arch} {size} flint"], res[f"{arch} {size} random"]
            assert e["ok"] is True and r["ok"] is True and r["cpu"] > 0 and e["cpu"] > 0
            assert float(r["bound"]) < 1e-15
            row = next(line for line in text.splitlines() if line.startswith(f"| {arch} | {size} |"))
            assert f"{e['cpu'] / r['cpu']:.1f}x" in row and r["bound"] in row
            assert row.split(" | ")[3] == f"{r['cpu']:.3f} / {r['wall']:.3f}"  # numbers only, no verdict word
    assert not any(k.startswith(("baseconv-causal", "elsa")) for k in res)


def test_no_randomized_leaves_it_out(run_json):
    text, res = run_json(["--archs", "token-lsa", "--sizes", "3x2", "--sympy-up-to", "0", "--full-up-to", "0",
                          "--no-randomized"])
    assert "randomized" not in text
    assert list(res) == ["token-lsa 3x2 flint"]


@pytest.mark.parametrize("args,msg", [(["--sizes", "3x"], "is not NxD"), (["--sizes", "2x3"], "N < D"),
                                      (["--archs", "baseconv,nope"], "unknown architecture 'nope'"),
                                      (["--timeout", "0"], "--timeout"), (["--memory-gib", "100"], "--memory-gib"),
                                      (["--full-up-to", "-1"], "--full-up-to"), (["--bogus"], "unrecognized"),
                                      (["--json", "/nonexistent/dir/x.json"], "--json")])
def test_bad_arguments_are_one_line_exit_2(args, msg, refused):
    refused(args, msg)
