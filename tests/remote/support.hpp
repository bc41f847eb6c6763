// What the remote tests share: polling for a condition, and the rig tool as a process of its
// own (an agent, `rig serve`, or a client), which RIG_TOOL names.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace rig::remote::test {

// True once f() is, polled every millisecond; false if it is not within `limit`.
template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A process of the rig tool with `args`, and `env` beside this process's environment,
// killed at the end if still running; its stdout is a pipe.
class Tool {
 public:
  Tool(std::vector<std::string> args, std::vector<std::string> env) {
    const char* tool = std::getenv("RIG_TOOL");
    REQUIRE_MESSAGE(tool != nullptr, "RIG_TOOL names the rig tool");
    args.insert(args.begin(), tool);
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    REQUIRE(posix_spawn(&pid_, tool, &actions, nullptr, argv.data(), envp.data()) == 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
  }
  ~Tool() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_) std::fclose(out_);
  }
  Tool(const Tool&) = delete;
  // The next line it printed, without its end; "" at its end.
  std::string line() {
    char buffer[512];
    if (!std::fgets(buffer, sizeof buffer, out_)) return "";
    std::string s = buffer;
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Its exit status, once it ends.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

}  // namespace rig::remote::test
