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

        # --list: a line TARGET<tab>LAW per law, the table's laws in its order, none run.
        r = run([exe, "--device", "FAKE", "--list"])
        listed = [line.split("\t") for line in r.stdout.splitlines()]
        check(r.returncode == 0, f"--list exited {r.returncode}:\n{r.stderr}")
        check([law for _, law in listed] == [c.get("name") for c in cases],
              f"--list names other laws than the run:\n{r.stdout}")
        check(all(target == "FAKE" for target, _ in listed), f"--list names other targets:\n{r.stdout}")
        check("pass" not in r.stdout, "--list ran the laws")

        # --law: by name, by pattern, repeated; a target none of whose laws match is left out.
        first, second = cases[0].get("name"), cases[1].get("name")
        junit = os.path.join(tmp, "one.xml")
        r = run([exe, "--device", "FAKE", "--law", first, "--junit", junit])
        ran = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
        check(r.returncode == 0 and ran == [first], f"--law NAME ran {ran}:\n{r.stderr}")
        r = run([exe, "--device", "FAKE", "--law", first, "--law", second, "--junit", junit])
        ran = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
        check(ran == [first, second], f"two --law ran {ran}")
        r = run([exe, "--law", "io: *", "--list"])
        targets = {line.split("\t")[0] for line in r.stdout.splitlines()}
        check(r.returncode == 0 and targets and not any(t.startswith("FAKE") or t == "CPU" for t in targets) and
              all(line.split("\t")[1].startswith("io: ") for line in r.stdout.splitlines()),
              f"--law 'io: *' listed {sorted(targets)}:\n{r.stdout[:400]}")
        r = run([exe, "--device", "FAKE", "--law", "no such law*"])
        check(r.returncode == 2 and "no law of FAKE matches" in r.stderr,
              f"a pattern that matches nothing exited {r.returncode}:\n{r.stderr}")

        # --law-timeout: a stall longer than it fails as a hang and skips the target's later laws.
        r = run([exe, "--device", "FAKE/hang_ms=60", "--law-timeout", "0"])
        check(r.returncode == 2, f"--law-timeout 0 exited {r.returncode}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
