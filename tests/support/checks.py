"""The reporting of the test scripts that drive the rig tool: a line per check, ok or FAIL
with what was seen, and an exit status that fails if any check did."""
import os
import shutil
import subprocess
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


def run(cmd, cwd=None, env=None):
    """(exit status, stdout and stderr together) of `cmd`, with `env` added to the environment."""
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    return result.returncode, result.stdout + result.stderr


def saxpy_against(source, work, sysroot, libdir, built, ran):
    """Builds examples/saxpy (pkg-config and make) in `work` against a rig laid out under
    `sysroot`, whose libraries lie in `libdir` (with pkgconfig/ in it), runs it, and checks
    both under the names `built` and `ran`."""
    saxpy = os.path.join(work, "saxpy")
    shutil.copytree(os.path.join(source, "examples", "saxpy"), saxpy)
    status, out = run(["make", "-C", saxpy], env={"PKG_CONFIG_PATH": os.path.join(libdir, "pkgconfig"),
                                                  "PKG_CONFIG_SYSROOT_DIR": sysroot})
    check(built, status == 0, out[-3000:])
    if status == 0:
        status, out = run([os.path.join(saxpy, "saxpy"), os.path.join(saxpy, "saxpy_kernel.o")],
                          env={"LD_LIBRARY_PATH": libdir})
        check(ran, status == 0 and ", 0 wrong" in out, out[-2000:])
