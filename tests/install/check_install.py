#!/usr/bin/env python3
"""rig as a program outside this repository gets it: installs the build into a temporary
prefix (meson install --destdir), compiles each installed header alone, builds the examples
against the installed files only (examples/saxpy with pkg-config and make,
examples/two_devices and examples/driver with CMake's find_package) and runs them, and
configures a Meson project that takes rig as a subproject (configured only: building rig
again would cost minutes).

usage: check_install.py SOURCE_ROOT BUILD_ROOT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish, run, saxpy_against  # noqa: E402


def option(build, name):
    out = subprocess.run(["meson", "introspect", "--buildoptions", build], capture_output=True, text=True,
                         check=True).stdout
    return next(o["value"] for o in json.loads(out) if o["name"] == name)


def main():
    source, build = (os.path.abspath(p) for p in sys.argv[1:3])
    prefix, libdir, includedir = (option(build, n) for n in ("prefix", "libdir", "includedir"))
    with tempfile.TemporaryDirectory(prefix="rig-install-") as work:
        stage = os.path.join(work, "stage")
        status, out = run(["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", stage])
        check("meson install --destdir", status == 0, out[-2000:])
        if status != 0:
            finish()
        root = stage + prefix
        lib = os.path.join(root, libdir)
        include = os.path.join(root, includedir)
        for name in ("librig.so", "librig.a", "pkgconfig/rig.pc", "cmake/rig/rigConfig.cmake",
                     "cmake/rig/rigConfigVersion.cmake"):
            check(f"installs {libdir}/{name}", os.path.exists(os.path.join(lib, name)))
        check("installs bin/rig", os.access(os.path.join(root, "bin", "rig"), os.X_OK))
        status, out = run(["readelf", "-d", os.path.join(lib, "librig.so")])
        check("librig.so's soname is librig.so.0", "[librig.so.0]" in out, out)

        # Each public header compiles alone, from the installed folder only.
        headers = sorted(os.listdir(os.path.join(include, "rig")))
        check("the headers include each driver's opener that rig.pc lists",
              {"rig.hpp", "edge.hpp", "rig_edge.h", "config.h"} <= set(headers), str(headers))
        for header in headers:
            probe = os.path.join(work, "probe.cpp")
            with open(probe, "w") as f:
                f.write(f"#include <rig/{header}>\n#include <rig/{header}>\n")
            status, out = run(["c++", "-std=c++23", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                               "-I" + include, probe])
            check(f"<rig/{header}> compiles alone (C++)", status == 0, out[-1500:])
            if header.endswith(".h"):
                probe_c = os.path.join(work, "probe.c")
                shutil.copy(probe, probe_c)
                status, out = run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                                   "-I" + include, probe_c])
                check(f"<rig/{header}> compiles alone (C)", status == 0, out[-1500:])

        runtime = {"LD_LIBRARY_PATH": lib}
        # pkg-config and make.
        pkg = {"PKG_CONFIG_PATH": os.path.join(lib, "pkgconfig"), "PKG_CONFIG_SYSROOT_DIR": stage}
        status, out = run(["pkg-config", "--modversion", "rig"], env=pkg)
        check("pkg-config --modversion rig", status == 0 and out.strip() == "0.1.0", out)
        status, drivers = run(["pkg-config", "--variable=drivers", "rig"], env=pkg)
        status, out = run(["pkg-config", "--cflags", "--libs", "rig"], env=pkg)
        check("pkg-config --cflags --libs rig names the staged prefix", status == 0 and stage in out, out)
        saxpy_against(source, work, stage, lib, "examples/saxpy builds with pkg-config and make",
                      "examples/saxpy runs and checks its result")

        # CMake's find_package.
        cmake_env = {"CMAKE_PREFIX_PATH": root}
        for example, programs in (("two_devices", ["two_devices", "two_devices_static"]), ("driver", ["driver_demo"])):
            out_dir = os.path.join(work, "cmake-" + example)
            status, out = run(["cmake", "-S", os.path.join(source, "examples", example), "-B", out_dir,
                               "-DCMAKE_BUILD_TYPE=Release"], env=cmake_env)
            check(f"examples/{example} configures with find_package(rig)", status == 0, out[-3000:])
            if status != 0:
                continue
            status, out = run(["cmake", "--build", out_dir, "-j2"], env=cmake_env)
            check(f"examples/{example} builds", status == 0, out[-3000:])
            if status != 0:
                continue
            for program in programs:
                args = [os.path.join(out_dir, program)]
                if example == "two_devices":
                    args.append(os.path.join(out_dir, "scale_kernel.o"))
                status, out = run(args, env=runtime)
                check(f"examples/{example}: {program} runs and checks its result",
                      status == 0 and ", 0 wrong" in out, out[-2000:])
                if program == "two_devices":
                    check("... rig::drivers() names the drivers rig.pc lists",
                          "drivers: " + " ".join(drivers.strip().split(",")) + "\n" in out, f"{out!r} vs {drivers!r}")

        # find_package refuses another minor version, and EXACT another patch version.
        probe_dir = os.path.join(work, "cmake-version")
        os.makedirs(probe_dir)
        for request, wanted in (("0.1", True), ("0.1.0 EXACT", True), ("0.2", False), ("0.1.1 EXACT", False),
                                ("1.0", False)):
            with open(os.path.join(probe_dir, "CMakeLists.txt"), "w") as f:
                f.write("cmake_minimum_required(VERSION 3.20)\nproject(probe CXX)\n"
                        f"find_package(rig {request} REQUIRED)\n")
            status, out = run(["cmake", "-S", probe_dir, "-B", os.path.join(probe_dir, "b")], env=cmake_env)
            check(f"find_package(rig {request}) {'finds' if wanted else 'refuses'} rig 0.1.0",
                  (status == 0) == wanted, out[-1500:])
            shutil.rmtree(os.path.join(probe_dir, "b"), ignore_errors=True)

        # A Meson project with rig as a subproject gets it by dependency('rig').
        parent = os.path.join(work, "parent")
        os.makedirs(os.path.join(parent, "subprojects"))
        os.symlink(source, os.path.join(parent, "subprojects", "rig"))
        with open(os.path.join(parent, "meson.build"), "w") as f:
            f.write("project('parent', 'cpp', default_options : ['rig:tests=false'])\n"
                    "rig = dependency('rig', fallback : ['rig'])\n"
                    "assert(rig.version() == '0.1.0', 'rig\\'s version')\n")
        status, out = run(["meson", "setup", os.path.join(parent, "b"), parent,
                           "--wrap-mode=forcefallback"])
        check("a Meson project takes rig as a subproject (dependency('rig'))",
              status == 0 and "Dependency rig found: YES 0.1.0 (overridden)" in out, out[-3000:])
    finish()


if __name__ == "__main__":
    main()
