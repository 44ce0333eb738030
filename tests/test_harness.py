"""tests/harness.py can fail: a script with a failed check exits 1 however
it ends (finish, sys.exit(0), sys.exit(77), falling off its end), a case of
Harness.each that fails or raises fails the script, a tessera run that
should succeed and did not is a failed check; a script whose checks pass
exits 0, or 77 with parts skipped. numbers/same_numbers tell values apart.
Usage: test_harness.py"""
import os
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
from harness import check, finish, numbers, same_numbers  # noqa: E402

PRELUDE = f"import sys\nsys.path.insert(0, {TESTS!r})\nfrom harness import *\n"


def exit_of(body):
    """The exit status and output of a script importing the harness."""
    p = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


SCRIPTS = [
    # (what, body, expected exit status)
    ("passing checks, finish()", "check(True, 'a')\nfinish()", 0),
    ("passing checks, no finish()", "check(True, 'a')", 0),
    ("passing checks, parts skipped", "check(True, 'a')\nfinish(['no bwrap'])", 77),
    ("a failed check, finish()", "check(True, 'a')\ncheck(False, 'b')\nfinish()", 1),
    ("a failed check, parts skipped", "check(False, 'b')\nfinish(['no bwrap'])", 1),
    ("a failed check, no finish()", "check(False, 'b')", 1),
    ("a failed check, then sys.exit(0)", "check(False, 'b')\nsys.exit(0)", 1),
    ("a failed check, then sys.exit(77)", "check(False, 'b')\nsys.exit(77)", 1),
    ("a failed check in a case of Harness.each",
     "h = Harness('/bin/true')\nh.each([1, 2], lambda c: h.check(c == 1, f'case {c}'))\nh.finish()", 1),
    ("a case of Harness.each that raises",
     "h = Harness('/bin/true')\nh.each([1], lambda c: 1 / 0)\nh.finish()", 1),
    ("passing cases of Harness.each",
     "h = Harness('/bin/true')\nh.each([1, 2], lambda c: h.check(True, f'case {c}'))\nh.finish()", 0),
    ("a tessera run that should succeed and failed", "h = Harness('/bin/false')\nh.tessera('cc')\nh.finish()", 1),
    ("the same with fatal=True", "h = Harness('/bin/false', fatal=True)\nh.tessera('cc')\ncheck(True, 'x')", 1),
    ("a run expected to fail that failed",
     "h = Harness('/bin/false')\np = h.tessera('cc', expect_ok=False)\nh.check(p.returncode == 1, 'refused')\n"
     "h.finish()", 0),
]

for what, body, expected in SCRIPTS:
    status, out = exit_of(body)
    check(status == expected, f"{what}: exit {status}, expected {expected}", out)
status, out = exit_of("p = run(['sh', '-c', 'echo out; echo err >&2; exit 3'])\n"
                      "check(p.returncode == 3 and 'out' in said(p) and 'err' in said(p), 'run, said')")
check(status == 0, "run() captures the exit status and both streams, said() shows them", out)
status, out = exit_of("check(False, 'the check', 'THE DETAIL')\ncheck(True, 'passes', 'HIDDEN')")
check(status == 1 and "FAIL the check\nTHE DETAIL" in out and "HIDDEN" not in out,
      "a check's detail is printed on failure only", out)

with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write("% a comment\n0 1.5\n1 2e-3\n2 7 extra\n3 unreachable\n")
try:
    got = numbers(f.name)
finally:
    os.unlink(f.name)
check(got == {"0": 1.5, "1": 0.002, "3": "unreachable"},
      f"numbers: the two-column lines, values as floats or words, the rest skipped: {got}")
check(same_numbers({"0": 1.0, "1": 1e6}, {"0": 1.0 + 1e-9, "1": 1e6 + 0.5}), "same_numbers within 1e-6 relative")
check(not same_numbers({"0": 1.0}, {"0": 1.001}), "same_numbers tells 1 from 1.001")
check(not same_numbers({"0": 1.0}, {"1": 1.0}), "same_numbers tells other vertices apart")
check(same_numbers({"0": "unreachable"}, {"0": "unreachable"}) and not same_numbers({"0": "unreachable"}, {"0": 1.0}),
      "same_numbers: a word equals only the same word")
finish()
