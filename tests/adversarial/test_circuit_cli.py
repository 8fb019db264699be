"""Bad input to ``python -m verify.construct circuit`` and ``python -m circuits.random`` is
refused before any work: exit 2, one line on stderr (``error: ...``, no traceback), nothing on
stdout, no file touched.  The circuits beyond a limit are built as node-link JSON in the test
folder; every limit of ``verify.circuit_cmd.LIMITS`` and ``circuits.random.LIMITS`` is met once."""
from __future__ import annotations

import io
import json
import os

import pytest

import circuits as C
from circuits.random import LARGE_LIMITS as RANDOM_LARGE, LIMITS as RANDOM_LIMITS, main as random_main
from verify.circuit_cmd import LARGE_LIMITS, LIMITS
from verify.construct import main as construct_main


# ------------------------------------------------------------------ circuit files (node-link JSON)

def _doc(nodes, links):
    return {"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}


def chain(k):
    """x squared k times: degree 2^k, k + 1 nodes."""
    nodes = [{"id": 0, "op": "input", "name": "x"}] + [{"id": i, "op": "mul"} for i in range(1, k + 1)]
    nodes[-1]["output"] = "y"
    return _doc(nodes, [{"source": i - 1, "target": i, "mult": 2} for i in range(1, k + 1)])


def power(m):
    """x^m as one wire of mult m."""
    return _doc([{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "mul", "output": "y"}],
                [{"source": 0, "target": 1, "mult": m}])


def product(m, op="mul"):
    """an m-ary gate of m distinct inputs."""
    nodes = [{"id": i, "op": "input", "name": f"x{i}"} for i in range(m)] + [{"id": m, "op": op, "output": "y"}]
    return _doc(nodes, [{"source": i, "target": m} for i in range(m)])


def many_nodes(n):
    """n - 1 inputs and one add gate of the first two (unused inputs are kept): n nodes."""
    nodes = [{"id": i, "op": "input", "name": f"x{i}"} for i in range(n - 1)]
    nodes.append({"id": n - 1, "op": "add", "output": "y"})
    return _doc(nodes, [{"source": 0, "target": n - 1}, {"source": 1, "target": n - 1}])


def heavy_wires(gates, m):
    """``gates`` add gates x+x+...+x (one wire of mult m each), summed: size gates*m + gates, degree 1."""
    nodes = [{"id": "x", "op": "input", "name": "x"}] + [{"id": i, "op": "add"} for i in range(gates)]
    nodes.append({"id": "s", "op": "add", "output": "y"})
    links = [{"source": "x", "target": i, "mult": m} for i in range(gates)]
    links += [{"source": i, "target": "s"} for i in range(gates)]
    return _doc(nodes, links)


def const_text(value_json: str) -> str:
    """x * c with the constant written literally (a JSON integer or string)."""
    doc = _doc([{"id": 0, "op": "input", "name": "x"}, {"id": "big", "op": "const", "value": 0},
                {"id": 2, "op": "mul", "output": "y"}],
               [{"source": 0, "target": 2}, {"source": "big", "target": 2}])
    return json.dumps(doc).replace('"value": 0', f'"value": {value_json}')


DIGITS = 5001
FILES = {
    "deg60.json": lambda: json.dumps(chain(60)),
    "deg11.json": lambda: json.dumps(chain(11)),
    "mult1e9.json": lambda: json.dumps(power(10**9)),
    "mul3000.json": lambda: json.dumps(product(3000)),
    "add3000.json": lambda: json.dumps(product(3000, "add")),
    "nodes.json": lambda: json.dumps(many_nodes(LIMITS["max_nodes"] + 1)),
    "n3001.json": lambda: json.dumps(many_nodes(3001)),
    "size.json": lambda: json.dumps(heavy_wires(60, 1000)),
    "wide.json": lambda: json.dumps(heavy_wires(2, 1000)),
    "const_int.json": lambda: const_text("7" * DIGITS),
    "const_pq.json": lambda: const_text('"1/' + "7" * DIGITS + '"'),
    "const_neg.json": lambda: const_text("-" + "3" * 1001),
    "const_python.json": lambda: const_text("7" * 4400),
    "not_json.json": lambda: "not json at all",
    "dot.json": lambda: json.dumps(C.dump(C.dot(2))),
    "dead.json": lambda: json.dumps(_doc([{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "mul", "output": "y"},
                                          {"id": 2, "op": "add"}],
                                         [{"source": 0, "target": 1, "mult": 2}, {"source": 0, "target": 2,
                                                                                   "mult": 2}])),
    "weights.txt": lambda: "not a weight file",
    # placed: x at token 200000 (a grid beyond max_grid); y = u*v placed before v's token
    "grid.json": lambda: json.dumps(_doc([{"id": 0, "op": "input", "name": "x", "token": 200_000, "channel": 0},
                                          {"id": 1, "op": "mul", "output": "y"}],
                                         [{"source": 0, "target": 1, "mult": 2}])),
    "backwards.json": lambda: json.dumps(_doc([{"id": 0, "op": "input", "name": "u", "token": 0, "channel": 0},
                                               {"id": 1, "op": "input", "name": "v", "token": 1, "channel": 0},
                                               {"id": 2, "op": "mul", "output": "y", "token": 0, "channel": 1}],
                                              [{"source": 0, "target": 2}, {"source": 1, "target": 2}])),
}


@pytest.fixture(scope="module")
def texts():
    return {name: make() for name, make in FILES.items()}  # built once: some are large


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    """One file just over the size limit, made once (sparse where the file system allows it;
    where it does not, writing it for every test cost seconds of system time)."""
    path = tmp_path_factory.mktemp("huge") / "huge.json"
    with open(path, "wb") as f:
        f.truncate(LIMITS["max_file_bytes"] + 1)
    return path


@pytest.fixture
def workdir(tmp_path, texts, huge):
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    os.link(huge, tmp_path / "huge.json")  # a hard link: no copy
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("a file, not a folder")
    (tmp_path / "report.json").write_text("an old report")
    return tmp_path




def _graph(name, *more):
    return ["circuit", "--graph", "{tmp}/" + name, "--json", "{tmp}/report.json", *more]


AL = "--allow-large"
# (argv with {tmp}, words the one-line error must contain)
CIRCUIT_CASES = [
    # sizes: the limit and how to lift it are named
    (_graph("deg60.json"), ["deg60.json: node 11:", "formal degree 2048", f"max_degree = {LIMITS['max_degree']}", AL]),
    (_graph("deg60.json", AL), ["node 17:", "formal degree 131072", f"max_degree = {LARGE_LIMITS['max_degree']}"]),
    (_graph("deg11.json"), ["node 11", "formal degree 2048", "max_degree"]),
    (_graph("mult1e9.json"), ["node 1: operand 0 has mult 1000000000", f"max_mult = {LIMITS['max_mult']}", AL]),
    (_graph("mult1e9.json", AL), ["mult 1000000000", f"max_mult = {LARGE_LIMITS['max_mult']}"]),
    (_graph("mul3000.json"), ["node 3000: mul gate has 3000 operands", f"max_fan_in = {LIMITS['max_fan_in']}", AL]),
    (_graph("add3000.json"), ["node 3000: add gate has 3000 operands", "max_fan_in"]),
    (_graph("nodes.json"), [f"{LIMITS['max_nodes'] + 1} nodes", f"max_nodes = {LIMITS['max_nodes']}", AL]),
    (_graph("size.json"), ["size 60060", f"max_size = {LIMITS['max_size']}", AL]),
    (_graph("huge.json"), ["huge.json", f"max_file_bytes = {LIMITS['max_file_bytes']}", AL]),
    (_graph("const_int.json"), ["node 'big'", f"{DIGITS} digits", f"max_const_digits = {LIMITS['max_const_digits']}",
                                AL]),
    (_graph("const_pq.json"), ["node 'big'", f"{DIGITS} digits", "max_const_digits"]),
    (_graph("const_neg.json"), ["node 'big'", "1001 digits", "max_const_digits"]),
    (_graph("const_int.json", AL), ["node 'big'", f"max_const_digits = {LARGE_LIMITS['max_const_digits']}"]),
    (_graph("const_python.json", AL), ["node 'big'", "4400 digits"]),
    (_graph("grid.json"), ["200001 tokens x 1 channels", f"max_grid = {LIMITS['max_grid']}", AL]),
    # a target that cannot realise the circuit
    (_graph("backwards.json", "--target", "baseconv-causal"),
     ["backwards.json", "--target baseconv-causal", "output 'y'", "token 0", "depends on token 1"]),
    (_graph("dot.json", "--target", "lsa-typo"), ["--target", "invalid choice"]),
    (_graph("dot.json", "--proof-memory-gib", "nan"), ["--proof-memory-gib", "finite"]),
    (_graph("dot.json", "--proof-memory-gib", "0"), ["--proof-memory-gib", ">= 0.25"]),
    (_graph("dot.json", "--proof-timeout", "0"), ["--proof-timeout", ">= 1"]),
    # --trials
    (_graph("dot.json", "--trials", "0"), ["--trials must be >= 1"]),
    (_graph("dot.json", "--trials", "1000000000"), ["--trials", f"limit {LIMITS['max_trials']}", AL]),
    (_graph("dot.json", "--trials", "1000000000", AL), ["--trials", f"limit {LARGE_LIMITS['max_trials']}"]),
    (_graph("dot.json", "--trials", "1e9"), ["--trials", "invalid int value"]),
    (_graph("wide.json", "--trials", "1000000", AL), ["--trials 1000000", "memory"]),
    (_graph("n3001.json", "--trials", "1000"), ["--trials 1000 x 3001 nodes",
                                                f"max_trial_nodes = {LIMITS['max_trial_nodes']}", AL]),
    (_graph("n3001.json", "--trials", "1000000", AL), ["--trials 1000000 x 3001 nodes",
                                                       f"max_trial_nodes = {LARGE_LIMITS['max_trial_nodes']}"]),
    # unreadable input: the file is named once (see test_graph_file_named_once)
    (_graph("not_json.json"), ["not_json.json: invalid JSON"]),
    (_graph("binary.json"), ["binary.json", "not a JSON text file"]),
    (_graph("missing.json"), ["cannot read", "missing.json"]),
    (_graph("afolder"), ["cannot read", "afolder"]),
    (["circuit"], ["--graph"]),
    (_graph("dot.json", "--bogus"), ["unrecognized arguments: --bogus"]),
    # output paths
    (["circuit", "--graph", "{tmp}/dot.json", "--json", "{tmp}/afolder"], ["--json", "is a folder, not a file"]),
    (["circuit", "--graph", "{tmp}/dot.json", "--json", "{tmp}/afile/r.json"], ["--json", "is a file, not a folder"]),
    (["circuit", "--graph", "{tmp}/dot.json", "--json", "{tmp}/new/"], ["--json", "not a file name"]),
    (["circuit", "--graph", "{tmp}/dot.json", "--export", "{tmp}/afolder"], ["--export", "is a folder, not a file"]),
    (["circuit", "--graph", "{tmp}/dot.json", "--export", "{tmp}/afile/w.safetensors"],
     ["--export", "is a file, not a folder"]),
    (_graph("dot.json", "--export", "{tmp}/report.json"), ["--export", "the same file as --json"]),
    (["circuit", "--graph", "{tmp}/dot.json", "--json", "{tmp}/dot.json"], ["--json", "the same file as --graph"]),
    # --weights
    (_graph("dot.json", "--weights", "{tmp}/missing.safetensors"), ["--weights", "file not found"]),
    (_graph("dot.json", "--weights", "{tmp}/afolder"), ["--weights", "is a folder"]),
    (_graph("dot.json", "--weights", "{tmp}/weights.txt"), ["not a readable safetensors file"]),
    # a circuit with a dead node: its warning is not printed when the run is refused
    (_graph("dead.json", "--weights", "{tmp}/weights.txt"), ["not a readable safetensors file"]),
    (_graph("dead.json", "--trials", "0"), ["--trials must be >= 1"]),
    # a negative seed (was a numpy traceback after the proof); an unbounded input stream
    (_graph("dot.json", "--seed=-1"), ["--seed must be >= 0"]),
    (["circuit", "--graph", "/dev/zero"], ["/dev/zero: more than", f"max_file_bytes = {LIMITS['max_file_bytes']}",
                                           AL]),
]


@pytest.mark.parametrize("argv,needles", CIRCUIT_CASES, ids=[" ".join(c[0][2:])[:70] for c in CIRCUIT_CASES])
def test_circuit_bad_input_is_refused_up_front(workdir, argv, needles, refused):
    refused(construct_main, [a.replace("{tmp}", str(workdir)) for a in argv], workdir, needles, out=io.StringIO())


NOWHERE = "/proc/polyverify-no-such-folder"  # cannot be created, even by root


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("argv", [
    ["circuit", "--graph", "{tmp}/dot.json", "--json", NOWHERE + "/r.json"],
    ["circuit", "--graph", "{tmp}/dot.json", "--export", NOWHERE + "/w.safetensors"],
])
def test_circuit_unwritable_output_is_refused_up_front(workdir, argv, refused):
    test_circuit_bad_input_is_refused_up_front(workdir, argv, ["cannot create folder", NOWHERE], refused)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_circuit_read_only_folder_is_refused_up_front(workdir, refused):
    ro = workdir / "afolder"
    ro.chmod(0o555)
    try:
        test_circuit_bad_input_is_refused_up_front(
            workdir, ["circuit", "--graph", "{tmp}/dot.json", "--json", "{tmp}/afolder/r.json"],
            ["--json", "not writable"], refused)
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("name", ["not_json.json", "missing.json", "deg60.json", "const_int.json"])
def test_graph_file_named_once(workdir, capsys, name):
    assert construct_main(["circuit", "--graph", str(workdir / name)], out=io.StringIO()) == 2
    assert capsys.readouterr().err.count(name) == 1


def test_library_load_refuses_what_python_cannot_convert(workdir):
    """Without limits, circuits.io.load still names the node instead of suggesting sys.set_int_max_str_digits."""
    with pytest.raises(C.CircuitError, match=r"node 'big': const value has 5001 digits, which exceeds Python's limit"):
        C.load(workdir / "const_int.json")


def test_limits_are_in_the_help(capsys):
    with pytest.raises(SystemExit):
        construct_main(["circuit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for k, v in LIMITS.items():
        assert f"{k} {v} ({LARGE_LIMITS[k]} with --allow-large)" in text.replace("--allow- large", "--allow-large")
    for opt in ("--graph", "--json", "--export", "--weights", "--seed", "--trials", "--allow-large"):
        assert opt in text


def test_outputs_into_a_new_folder_written_whole(workdir):
    out = io.StringIO()
    rep, w = workdir / "new" / "sub" / "r.json", workdir / "new" / "w.safetensors"
    rc = construct_main(["circuit", "--graph", str(workdir / "dot.json"), "--json", str(rep), "--export", str(w),
                         "--trials", "2"], out=out)
    assert rc == 0, out.getvalue()
    assert json.loads(rep.read_text())["proof"]["ok"] is True and w.stat().st_size > 0
    assert sorted(p.name for p in (workdir / "new").rglob("*")) == ["r.json", "sub", "w.safetensors"]  # no temp


def test_pruned_nodes_warning_is_one_line(workdir, capsys):
    assert construct_main(["circuit", "--graph", str(workdir / "dead.json"), "--trials", "2"], out=io.StringIO()) == 0
    err = capsys.readouterr().err
    assert err == f"warning: {workdir / 'dead.json'}: pruned 1 node(s) feeding no output: 2\n"


def test_degree_2048_runs_with_allow_large_and_reports_float_overflow(workdir):
    out = io.StringIO()
    rep = workdir / "r.json"
    rc = construct_main(["circuit", "--graph", str(workdir / "deg11.json"), "--allow-large", "--trials", "32", "--float-trials", "32",
                         "--json", str(rep)], out=out)
    assert rc == 0, out.getvalue()
    r = json.loads(rep.read_text())
    assert r["metrics"]["degree"] == 2048 and r["modular_trials"]["exact_agreement"] == 32
    assert r["float64_trials"]["non_finite"] >= 1 and "not finite in float64" in out.getvalue()


# ------------------------------------------------------------------ python -m circuits.random

RANDOM_CASES = [
    (["--gates", "1e8"], ["--gates", "invalid int value"]),
    (["--gates", "100000000"], ["--gates", f"limit {RANDOM_LIMITS['max_gates']}", AL]),
    (["--gates", "100000000", AL], ["--gates", f"limit {RANDOM_LARGE['max_gates']}"]),
    (["--gates", "0"], ["--gates must be >= 1"]),
    (["--inputs", "1000000000"], ["--inputs", f"limit {RANDOM_LIMITS['max_inputs']}", AL]),
    (["--inputs=-1"], ["--inputs must be >= 0"]),
    (["--max-arity", "1000000"], ["--max-arity", f"limit {RANDOM_LIMITS['max_arity']}", AL]),
    (["--max-arity", "1"], ["--max-arity must be >= 2"]),
    (["--seed=-1"], ["--seed must be >= 0"]),
    (["--const-prob", "2"], ["--const-prob", "limit 1.0"]),
    (["--const-prob", "nan"], ["--const-prob", "finite"]),
    (["--max-degree=-1"], ["--max-degree must be >= 0"]),
    (["--gates", "1", "--outputs", "2"], ["random_circuit:", "n_outputs <= n_gates"]),
    (["--out", "{tmp}/afolder"], ["--out", "is a folder, not a file"]),
    (["--out", "{tmp}/afile/c.json"], ["--out", "is a file, not a folder"]),
    (["--out", "{tmp}/new/"], ["--out", "not a file name"]),
    (["--gates", "1", "--outputs", "2", "--out", "{tmp}/report.json"], ["n_outputs"]),
    (["--bogus"], ["unrecognized arguments"]),
    # the most wires (--gates x --max-arity) and the nodes bounded up front by the circuit
    # command's own limits (this case ran over 4 minutes and drew a file the circuit command refuses)
    (["--gates", "10000", "--inputs", "10000", "--max-arity", "1024"],
     ["--gates 10000 x --max-arity 1024 = 10240000 wires", f"max_wires = {RANDOM_LIMITS['max_wires']}", AL]),
    (["--gates", "1000000", "--max-arity", "11", AL], ["11000000 wires", f"max_wires = {RANDOM_LARGE['max_wires']}"]),
    (["--gates", "10000", "--inputs", "10001"], ["--inputs = 10001 exceeds the limit 10000"]),
    (["--gates", "9000", "--inputs", "9000", "--max-arity", "5"],
     ["the circuit drawn has", "constants", f"max_nodes = {RANDOM_LIMITS['max_nodes']}", AL]),
    (["--gates", "5000", "--inputs", "5000", "--max-arity", "11", "--out", "{tmp}/new/c.json"],
     ["5000 x --max-arity 11 = 55000 wires"]),
]


@pytest.mark.parametrize("argv,needles", RANDOM_CASES, ids=[" ".join(c[0])[:60] for c in RANDOM_CASES])
def test_random_bad_input_is_refused_up_front(workdir, argv, needles, refused):
    refused(random_main, [a.replace("{tmp}", str(workdir)) for a in argv], workdir, needles)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_random_unwritable_out_is_refused_up_front(workdir, refused):
    test_random_bad_input_is_refused_up_front(workdir, ["--out", NOWHERE + "/c.json"],
                                              ["--out", "cannot create folder"], refused)


def test_random_limits_are_the_circuit_commands():
    """What circuits.random may write, the circuit command reads (at the same --allow-large)."""
    for mine, theirs in ((RANDOM_LIMITS, LIMITS), (RANDOM_LARGE, LARGE_LIMITS)):
        assert mine["max_wires"] == theirs["max_size"] and mine["max_nodes"] == theirs["max_nodes"]
        assert mine["max_arity"] <= theirs["max_fan_in"]


def test_graph_from_a_fifo_without_writer_ends_at_once(workdir, capsys, monkeypatch):
    """Opening a FIFO nobody writes to does not wait forever: its first data is awaited for
    circuits.io.FIFO_WAIT_S (a late writer is read: tests/adversarial/test_output_paths.py), then it is
    refused in one line."""
    import circuits.io as cio

    monkeypatch.setattr(cio, "FIFO_WAIT_S", 0.2)
    fifo = workdir / "pipe.json"
    os.mkfifo(fifo)
    assert construct_main(["circuit", "--graph", str(fifo)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no writer" in err and "pipe.json" in err


def test_random_out_says_what_it_wrote(tmp_path, capsys):
    path = tmp_path / "new" / "c.json"
    assert random_main(["--seed", "2", "--inputs", "4", "--gates", "12", "--outputs", "2", "--out", str(path)]) == 0
    cap = capsys.readouterr()
    g = C.load(path)
    assert cap.err == "" and cap.out.count("\n") == 1
    assert (f"{g.number_of_nodes()} nodes" in cap.out and "4 inputs" in cap.out and "2 outputs" in cap.out
            and str(path) in cap.out)
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["c.json"]


def test_random_help_documents_every_option_and_limit(capsys):
    with pytest.raises(SystemExit):
        random_main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    parser_opts = ["--seed", "--inputs", "--gates", "--outputs", "--max-arity", "--const-prob", "--max-degree",
                   "--out", "--allow-large"]
    from circuits.random import build_parser

    for action in build_parser()._actions:
        assert action.help, action.option_strings
    for opt in parser_opts:
        assert opt in text
    for k, v in RANDOM_LIMITS.items():
        assert f"{k} {v}" in text


def test_a_proof_beyond_its_limits_stops_with_one_line(workdir, capsys, monkeypatch):
    """The proof runs in a child process: a proof that outlives --proof-timeout (or dies at the
    memory cap, where FLINT aborts the process) ends the command with one line, exit 2."""
    import time

    import verify.prover.proof

    def slow(*args, **kwargs):
        time.sleep(30)

    monkeypatch.setattr(verify.prover.proof, "prove", slow)
    rc = construct_main(["circuit", "--graph", str(workdir / "dot.json"), "--proof-timeout", "1"], out=io.StringIO())
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "the exact proof stopped: did not finish within the time limit (1 s)" in err and "--proof-timeout" in err
