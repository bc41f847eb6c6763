#!/usr/bin/env python3
"""Checks tools/conform.cpp through conform_check: its table, exit status and JUnit XML.

check_conform.py CONFORM_CHECK
"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def main() -> int:
    exe = sys.argv[1]
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "conformance.xml")
        r = run([exe, "--device", "FAKE", "--junit", junit])
        check(r.returncode == 0, f"conform on FAKE exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        check("FAKE" in r.stdout and "passed" in r.stdout, f"no table or summary:\n{r.stdout}")
        root = ET.parse(junit).getroot()
        check(root.tag == "testsuites", f"the root is {root.tag}")
        suites = root.findall("testsuite")
        check([s.get("name") for s in suites] == ["FAKE"], "not one testsuite named FAKE")
        cases = suites[0].findall("testcase") if suites else []
        check(len(cases) >= 20, f"{len(cases)} testcases")
        check(int(suites[0].get("tests")) == len(cases), "tests= differs from the testcases")
        skipped = [c for c in cases if c.find("skipped") is not None]
        check(int(suites[0].get("skipped")) == len(skipped), "skipped= differs from the skipped testcases")
        check(all(c.find("skipped").get("message") for c in skipped), "a skip without a message")
        check(not any(c.find("failure") is not None for c in cases), "a law failed on FAKE")
        check(all(c.get("classname") == "FAKE" and c.get("name") for c in cases), "a testcase without its names")

        r = run([exe, "--device", "NO-SUCH-DEVICE"])
        check(r.returncode == 2, f"an unknown device exited {r.returncode}")
        check("CPU" in r.stderr and "FAKE/own_word" in r.stderr, f"the devices were not listed:\n{r.stderr}")

        r = run([exe, "--device", "FAKE", "--junit", os.path.join(tmp, "no", "such", "dir.xml")])
        check(r.returncode == 2, f"an unwritable JUnit file exited {r.returncode}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
