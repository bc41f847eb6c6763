"""The reporting of the test scripts that drive the rig tool: a line per check, ok or FAIL
with what was seen, and an exit status that fails if any check did."""
import sys

failures = []


def check(name, condition, detail=""):
    """Prints `name` as ok or FAIL (with `detail` when it fails), and counts a failure."""
    print(("ok   " if condition else "FAIL ") + name + (f": {detail}" if detail and not condition else ""))
    if not condition:
        failures.append(name)


def finish():
    """Exits 1 if any check failed, else 0."""
    sys.exit(1 if failures else 0)
