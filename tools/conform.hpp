// `rig conform`: the conformance suite (tests/conformance/) on the devices present.
#pragma once

#include <string>
#include <vector>

namespace rig::tool {

struct ConformOptions {
  std::string device;  // the target to run on ("CPU", "FAKE/own_word", "CUDA:0"); empty: every one
  std::string junit;   // a file to write JUnit XML into; empty: none
  std::vector<std::string> laws;  // the laws to run: names, or patterns with * and ?; empty: every one
  int law_timeout = 60;           // seconds a law may run before it counts as a hang
  bool list = false;              // print each target's laws instead of running them
};

// Runs every law on every target (or the one named), printing a table of the outcomes as they
// come and a summary. With laws given, runs only the laws whose names equal one of them or
// match it as a pattern (fnmatch: * and ?), and leaves out a target none of whose laws match.
// A law that runs past law_timeout seconds fails as a hang, and the target's later laws are
// skipped. Writes JUnit XML (a testsuite per target, a testcase per law) when asked. With list,
// prints a line "TARGET<tab>LAW" for each law that would run, and runs none. Returns 0 if no
// law failed, 1 if one did, 2 if no target has the name given, a pattern matches no law of the
// targets chosen, or the XML could not be written.
int conform(const ConformOptions& options);

}  // namespace rig::tool
