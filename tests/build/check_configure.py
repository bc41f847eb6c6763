#!/usr/bin/env python3
"""The build's driver options, configured as a user would: a driver `enabled` whose
dependency is missing fails the configure naming the Debian package to install; `disabled`
leaves the driver out of rig/config.h, the installed headers and rig.pc; `auto` builds what
the machine has.

usage: check_configure.py SOURCE_ROOT"""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402


def setup(source, work, name, *options, env=None):
    """(exit status, output, build folder) of `meson setup` of `source` in work/name."""
    build = os.path.join(work, name)
    result = subprocess.run(["meson", "setup", build, source, "-Dtests=false", *options],
                            capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    return result.returncode, result.stdout + result.stderr, build


def config(build):
    """rig/config.h's defines as {name: value}."""
    out = {}
    with open(os.path.join(build, "include", "rig", "config.h")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define":
                out[parts[1]] = parts[2]
    return out


def installed(build):
    """The paths `meson install` would write, relative to the prefix."""
    result = subprocess.run(["meson", "introspect", "--installed", build], capture_output=True, text=True,
                            check=True)
    return sorted(json.loads(result.stdout).values())


def main():
    source = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="rig-configure-") as work:
        # LLVM older than 19 where the AMD driver needs 19: a stand-in llvm-config-19.
        old_llvm = os.path.join(work, "llvm-config-15")
        with open(old_llvm, "w") as f:
            f.write("#!/bin/sh\necho 15.0.6\n")
        os.chmod(old_llvm, 0o755)
        native = os.path.join(work, "old-llvm.ini")
        with open(native, "w") as f:
            f.write(f"[binaries]\nllvm-config-19 = '{old_llvm}'\n")
        status, out, _ = setup(source, work, "amd-enabled", "-Damd=enabled", "--native-file", native)
        check("-Damd=enabled without LLVM 19 fails", status != 0, out[-800:])
        check("... naming llvm-19-dev", "llvm-19-dev" in out, out[-800:])
        status, out, build = setup(source, work, "amd-auto", "-Damd=auto", "--native-file", native)
        check("-Damd=auto without LLVM 19 configures", status == 0, out[-800:])
        check("... saying the AMD driver is not built", "amd: not built (llvm-19-dev missing)" in out, out[-800:])
        if status == 0:
            check("... and rig/config.h has RIG_DRIVER_AMD 0", config(build).get("RIG_DRIVER_AMD") == "0",
                  str(config(build)))

        # pkg-config's folders without liburing.pc, where the DISK device needs it.
        pcdir = os.path.join(work, "pkgconfig")
        os.makedirs(pcdir)
        for pc in glob.glob("/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc") + glob.glob("/usr/share/pkgconfig/*.pc") \
                + glob.glob("/usr/lib/pkgconfig/*.pc"):
            name = os.path.basename(pc)
            if name != "liburing.pc" and not os.path.exists(os.path.join(pcdir, name)):
                os.symlink(pc, os.path.join(pcdir, name))
        no_uring = {"PKG_CONFIG_LIBDIR": pcdir}
        status, out, _ = setup(source, work, "disk-enabled", "-Ddisk=enabled", env=no_uring)
        check("-Ddisk=enabled without liburing fails", status != 0, out[-800:])
        check("... naming liburing-dev", "liburing-dev" in out, out[-800:])

        status, out, build = setup(source, work, "none", "-Damd=disabled", "-Dnv=disabled", "-Dcuda=disabled",
                                   "-Ddisk=disabled", "-Dremote=disabled")
        check("every driver disabled configures", status == 0, out[-800:])
        if status == 0:
            defines = config(build)
            check("... rig/config.h has no driver",
                  [defines.get(f"RIG_DRIVER_{d}") for d in ("AMD", "NV", "CUDA", "DISK", "REMOTE")] == ["0"] * 5,
                  str(defines))
            files = installed(build)
            headers = [os.path.basename(f) for f in files if "/include/rig/" in f]
            check("... no driver's opener is installed", not {"amd.hpp", "nv.hpp", "cuda.hpp", "disk.hpp", "remote.hpp"} & set(headers),
                  str(headers))
            check("... the API and the contract are", {"rig.hpp", "edge.hpp", "rig_edge.h", "config.h"} <= set(headers),
                  str(headers))
            check("... librig.so, librig.a, rig.pc and rigConfig.cmake are installed",
                  all(any(f.endswith(end) for f in files)
                      for end in ("/librig.so.0.1.0", "/librig.a", "/pkgconfig/rig.pc", "/cmake/rig/rigConfig.cmake")),
                  str(files))
            with open(os.path.join(build, "meson-private", "rig.pc")) as f:
                pc = f.read()
            check("... rig.pc lists only the host and memory drivers", "drivers=host,memory\n" in pc, pc)
    finish()


if __name__ == "__main__":
    main()
