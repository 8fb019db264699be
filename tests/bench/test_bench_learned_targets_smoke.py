"""Smoke test of bench/bench_learned_targets.py: the import rows of one tiny size end to end (each command
in its own interpreter, the files made in a cache folder and reused by a rerun), the JSON's rows with the
CPU seconds at the verdict lines, the markdown table printed from a written JSON (``--table``), and the
cache's exclusive writing (a file is made once; a failed make leaves nothing behind)."""
import json
import os
import threading

import pytest

BENCH = "bench_learned_targets.py"


def test_the_import_rows_of_a_tiny_size_and_the_cache(bench, tmp_path, capsys):
    cache, out = tmp_path / "cache", tmp_path / "r.json"
    args = ["--sizes", "4x2", "--no-state-pt", "--runs", "import", "--timeout", "300", "--cache", str(cache),
            "--json", str(out)]
    assert bench.main(args) == 0
    first = capsys.readouterr().out
    res = json.loads(out.read_text())
    assert res["files_cache"] == str(cache) and len(res["load_average_at_end"]) == 3
    rows = {r["file"]: r for r in res["rows"]}
    assert set(rows) == {"tampered", "learned (3 Adam steps)"}  # only the selected rows' files were made
    for r in rows.values():
        assert r["verdict"] == "FAILED" and r["size"] == "4x2" and r["target"] is None and r["met"] is None
        assert 0 < r["proof_line_s"] <= r["wall_s"] and 0 < r["proof_line_cpu_s"] <= r["cpu_s"]
        assert r["load_at_start"] >= 0
    (folder,) = cache.iterdir()
    made = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert made == ["gd-baseconv-4x2-k1.safetensors", "learned-4x2.pt"] and "wrote" in first
    mtimes = {p: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert bench.main(args) == 0  # the rerun reuses the files
    assert "reusing" in capsys.readouterr().out and {p: p.stat().st_mtime_ns for p in folder.iterdir()} == mtimes
    assert bench.main(["--table", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| size | file | command | verdict | proof: at s | proof: CPU s |")
    line = next(x for x in table if "| learned (3 Adam steps) |" in x)
    rerun = {r["file"]: r for r in json.loads(out.read_text())["rows"]}  # the rerun wrote the JSON again
    assert f"| {rerun['learned (3 Adam steps)']['proof_line_cpu_s']} |" in line


def test_a_cached_file_is_made_once_and_never_partly(bench, tmp_path):
    calls = []

    def make(tmp):
        calls.append(1)
        p = tmp / "f.bin"
        p.write_bytes(b"x" * 1000)
        return p

    threads = [threading.Thread(target=bench.cached, args=(tmp_path, "f.bin", make)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and (tmp_path / "f.bin").read_bytes() == b"x" * 1000

    def broken(tmp):
        (tmp / "g.bin").write_bytes(b"half")
        raise RuntimeError("stopped while writing")

    with pytest.raises(RuntimeError):
        bench.cached(tmp_path, "g.bin", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "f.bin"]  # no g.bin, no temporary folder


def test_group_cpu_counts_this_process_group(bench):
    sum(i * i for i in range(2_000_000))  # some CPU in this process
    cpu = bench.group_cpu(os.getpgid(0))
    assert cpu is not None and cpu > 0
    assert bench.group_cpu(2**22 + 12345) == 0  # no process in that group
