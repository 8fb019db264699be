"""bench/gpu.sh on the CPU (the CI smoke test of the GPU run) and its fold into docs/performance.md."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = "bench_gpu.py"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "res"
    p = subprocess.run(["bash", "bench/gpu.sh", "--device", "cpu", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                         "PYTHON": sys.executable})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out


def test_cpu_smoke_measures_every_architecture_and_dtype_against_exact_gd(smoke):
    r = json.loads((smoke / "gpu.json").read_text())
    assert r["machine"]["device"] == "cpu"
    got = {(x["arch"], x["dtype"]) for x in r["runs"]}
    assert got == {(a, d) for a in ("baseconv", "baseconv-causal", "lsa", "elsa")
                   for d in ("float32", "float64", "bfloat16", "float16")}
    for x in r["runs"]:
        last = x["checkpoints"][-1]
        assert last["step"] == x["steps"] and x["first_nonfinite_layer"] is None
        # each dtype's error sits at its own precision: float64 far below float32 far below the halves
        bound = {"float64": 1e-20, "float32": 1e-8, "float16": 1e-3, "bfloat16": 1e-1}[x["dtype"]]
        assert 0 <= last["mse"] < bound and last["plain_mse"] < bound
    assert r["big"]["runs"] and all(c["mse"] is not None for x in r["big"]["runs"] for c in x["checkpoints"])
    assert (smoke / "gpu_roundoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((smoke / "execution.json").read_text())["results"]


def test_the_fold_says_not_run_on_a_gpu_for_a_cpu_run_or_none(smoke, tmp_path, load_bench):
    perf = load_bench("performance.py")
    assert "Not run on a GPU" in perf.gpu_section(tmp_path)  # nothing there
    assert "Not run on a GPU" in perf.gpu_section(smoke)  # the CPU smoke run is not a GPU run


def test_the_fold_names_the_card_and_every_run(smoke, tmp_path, load_bench):
    perf = load_bench("performance.py")
    folder = tmp_path / "g"
    shutil.copytree(smoke, folder)
    r = json.loads((folder / "gpu.json").read_text())
    r["machine"].update(device="cuda", card="Test Card 9000", cuda="13.0")
    (folder / "gpu.json").write_text(json.dumps(r))
    text = perf.gpu_section(folder)
    assert text.startswith("## The GPU run: Test Card 9000")
    assert text.count("| gd-") == len(r["runs"]) + len(r["not_run"])


@pytest.mark.parametrize("args,msg", [(["--device", "tpu"], "--device must be cpu or cuda"),
                                      (["--bogus"], "unknown argument")])
def test_gpu_sh_refuses_bad_arguments(args, msg):
    p = subprocess.run(["bash", "bench/gpu.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,msg", [(["--batch", "0"], "--batch must be in"), (["--big", "4x8"], "--big 4x8"),
                                      (["--dtypes", "float8"], "unknown float8"),
                                      (["--layers", "1", "--device", "cpu"], "needs")])
def test_bench_gpu_refuses_bad_input_before_work(args, msg, refused, tmp_path):
    refused([*args, "--device", "cpu", "--out", str(tmp_path / "o")] if "--device" not in args
            else [*args, "--out", str(tmp_path / "o")], msg)
    assert not (tmp_path / "o").exists()
