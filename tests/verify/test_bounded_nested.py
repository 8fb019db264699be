"""verify/bounded.py: a limited call made inside a limited child inherits the outer limit (issue 41; H3's
``within_soft_limit``, f1114b6).  ``call_limited`` sets a child's limit from its own start and caps it by the
*hard* limit only, so a ``bounded.call`` / ``bounded.prove`` / ``run_streamed`` inside a child under a soft limit
(the nearest construction's proof in a diagnosis child, a command under a bench's cap) could map far more than the
outer limit allowed (``cli_common.call_check``, the randomized check's child, too).  Each case runs in a fresh interpreter under a soft limit 256 MiB above its address space
and allocates 1 GiB in the inner child: stopped at the memory limit, not allocated."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import io, resource
from types import SimpleNamespace
from polyverify.plumbing.cli import UsageError
from polyverify.plumbing.child import Stopped
from verify import bounded
a = SimpleNamespace(proof_memory_gib=1024.0, proof_timeout=60.0)
vm = int(open('/proc/self/statm').read().split()[0]) * 4096
resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
"""

CASES = {
    "call": """
try:
    bounded.call(lambda: len(bytearray(2**30)), a, 'inner')
    print('allocated')
except UsageError as e:
    print('stopped memory' if 'memory limit' in str(e) else 'stopped ' + str(e))
""",
    "call_check": """
from verify.cli_common import call_check
try:
    call_check(lambda: len(bytearray(2**30)), a, 'inner')
    print('allocated')
except UsageError as e:
    print('stopped memory' if 'memory limit' in str(e) else 'stopped ' + str(e))
""",
    "run_streamed": """
def body(out):
    out.write(str(len(bytearray(2**30))))
    return 0
for gib in (1024.0, None):
    try:
        bounded.run_streamed(body, io.StringIO(), timeout=60, memory_gb=gib)
        print('allocated')
    except Stopped as e:
        print('stopped', e.limit)
""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_inner_limited_call_stays_within_the_outer_soft_limit(case):
    r = subprocess.run([sys.executable, "-c", PRELUDE + CASES[case]], capture_output=True, text=True, timeout=180,
                       cwd=ROOT)
    lines = r.stdout.split()
    assert r.returncode == 0 and lines and set(r.stdout.strip().splitlines()) == {"stopped memory"}, \
        r.stdout + r.stderr[-2000:]


def test_without_a_soft_limit_the_given_limit_is_kept():
    from verify.bounded import within_soft_limit
    import resource

    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this test process runs under a soft address-space limit: the limit is lowered by design")
    assert within_soft_limit(3.5) == 3.5 and within_soft_limit(None) is None
