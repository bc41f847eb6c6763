#!/usr/bin/env python3
"""rig's Debian packages, built as Debian builds them: `dpkg-buildpackage -b -us -uc` on a
copy of the tree makes librig0, librig-dev and rig-tools; `dpkg -c` shows each file where
Debian's conventions put it (and in no other package); lintian reports no error; and
examples/saxpy builds and runs against the unpacked packages.

usage: check_package.py SOURCE_ROOT"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish, run, saxpy_against  # noqa: E402

ARCH_LIB = "usr/lib/" + subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                                       text=True).stdout.strip()

# Per package: paths it must hold (regular expressions over `dpkg -c`'s paths, without "./").
EXPECTED = {
    "librig0": [rf"{ARCH_LIB}/librig\.so\.0", rf"{ARCH_LIB}/librig\.so\.0\.1\.0",
                r"usr/share/doc/librig0/copyright", r"usr/share/doc/librig0/changelog\.gz"],
    "librig-dev": [r"usr/include/rig/rig\.hpp", r"usr/include/rig/edge\.hpp", r"usr/include/rig/rig_edge\.h",
                   r"usr/include/rig/config\.h", r"usr/include/rig/amd\.hpp", r"usr/include/rig/cuda\.hpp",
                   r"usr/include/rig/disk\.hpp", r"usr/include/rig/remote\.hpp", rf"{ARCH_LIB}/librig\.so", rf"{ARCH_LIB}/librig\.a",
                   rf"{ARCH_LIB}/pkgconfig/rig\.pc", rf"{ARCH_LIB}/cmake/rig/rigConfig\.cmake",
                   rf"{ARCH_LIB}/cmake/rig/rigConfigVersion\.cmake"],
    "rig-tools": [r"usr/bin/rig", r"usr/share/man/man1/rig\.1\.gz"],
}
# Per package: what it must not hold.
FORBIDDEN = {
    "librig0": [r"usr/include/", r"\.a$", rf"{ARCH_LIB}/librig\.so$", r"usr/bin/"],
    "librig-dev": [r"librig\.so\.0", r"usr/bin/"],
    "rig-tools": [r"usr/include/", r"usr/lib/"],
}


def main():
    source = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="rig-deb-") as work:
        tree = os.path.join(work, "rig-0.1.0")
        status, listed = run(["git", "-C", source, "ls-files", "--cached", "--others", "--exclude-standard", "-z"])
        check("the tree's files are listed by git", status == 0, listed[-1000:])
        for path in filter(None, listed.split("\0")):
            if not os.path.lexists(os.path.join(source, path)):
                continue  # deleted in the work tree, not yet committed
            os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
            shutil.copy2(os.path.join(source, path), os.path.join(tree, path), follow_symlinks=False)
        # noopt: this checks the packaging, and builds at -O0 in less time.
        env = {"DEB_BUILD_OPTIONS": f"nocheck noopt noautodbgsym parallel={os.cpu_count() or 1}",
               "DEB_CFLAGS_STRIP": "-g", "DEB_CXXFLAGS_STRIP": "-g"}
        status, out = run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=tree, env=env)
        check("dpkg-buildpackage -b -us -uc", status == 0, out[-4000:])
        if status != 0:
            finish()
        debs = {os.path.basename(d).split("_")[0]: d for d in glob.glob(os.path.join(work, "*.deb"))}
        check("it makes librig0, librig-dev and rig-tools", set(EXPECTED) <= set(debs), str(sorted(debs)))
        for package, deb in sorted(debs.items()):
            if package not in EXPECTED:
                continue
            status, out = run(["dpkg", "-c", deb])
            paths = [line.split()[5].removeprefix("./") for line in out.splitlines() if len(line.split()) >= 6]
            for pattern in EXPECTED[package]:
                check(f"{package} holds {pattern}", any(re.fullmatch(pattern, p) for p in paths), "\n".join(paths))
            for pattern in FORBIDDEN[package]:
                stray = [p for p in paths if re.search(pattern, p) and not p.endswith("/")]
                check(f"{package} holds nothing matching {pattern}", not stray, str(stray))
        status, out = run(["dpkg-deb", "-f", debs["librig-dev"], "Depends"])
        check("librig-dev depends on librig0 of its own version", re.search(r"librig0 \(= 0\.1\.0\)", out), out)

        changes = glob.glob(os.path.join(work, "*.changes"))
        status, out = run(["lintian", "--fail-on", "error", *changes])
        errors = [line for line in out.splitlines() if line.startswith("E:")]
        check("lintian reports no error", status == 0 and not errors, out[-3000:])
        print("lintian:\n" + out.strip())

        # The unpacked packages are enough to build and run a program.
        root = os.path.join(work, "root")
        for package in EXPECTED:
            run(["dpkg-deb", "-x", debs[package], root])
        saxpy_against(source, work, root, os.path.join(root, ARCH_LIB),
                      "examples/saxpy builds against the unpacked librig-dev", "... and runs against librig0")
        status, out = run([os.path.join(root, "usr/bin/rig"), "devices"])
        check("rig-tools' rig lists the devices", status == 0 and "CPU" in out, out[-2000:])
    finish()


if __name__ == "__main__":
    main()
