// `rig conform`: the conformance suite (tests/conformance/) on the devices present.
#pragma once

#include <string>

namespace rig::tool {

struct ConformOptions {
  std::string device;  // the target to run on ("CPU", "FAKE/own_word", "CUDA:0"); empty: every one
  std::string junit;   // a file to write JUnit XML into; empty: none
};

// Runs every law on every target (or the one named), printing a table of the outcomes as they
// come and a summary. Writes JUnit XML (a testsuite per target, a testcase per law) when
// asked. Returns 0 if no law failed, 1 if one did, 2 if no target has the name given or the
// XML could not be written.
int conform(const ConformOptions& options);

}  // namespace rig::tool
