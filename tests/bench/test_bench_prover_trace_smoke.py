"""bench/bench_prover_trace.py runs and reads one way: the only back edge between prover files on a traced
proof is the kernel's section callback into proof.py."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_traced_proof_reads_one_way():
    spec = importlib.util.spec_from_file_location("bench_prover_trace", ROOT / "bench" / "bench_prover_trace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    edges, files = mod.trace(refute=False)
    assert edges and "verify/prover/kernel.py" in files
    back = {(a, b) for (a, b) in edges if (b, a) in edges}
    assert back <= {("verify/prover/kernel.py", "verify/prover/proof.py"),
                    ("verify/prover/proof.py", "verify/prover/kernel.py")}, back
    # the diagnosis files are not run by a proof that holds
    assert not {"verify/prover/locate.py", "verify/prover/refute.py"} & files
