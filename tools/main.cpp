// The `rig` command-line tool.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>

#include "conform.hpp"
#include "prof.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  CLI::App app{"rig: a driver stack that talks to GPUs directly"};
  app.require_subcommand(1);

  rig::tool::DevicesOptions devices;
  auto* devices_cmd = app.add_subcommand(
      "devices", "list the devices this machine can open, with their facts, and the GPUs on its PCI bus");
  devices_cmd->add_flag("--json", devices.json, "print JSON: the array of opened devices");
  devices_cmd->add_flag("--pci", devices.pci,
                        "with --json, print an object: the opened devices, and the GPUs on the PCI bus with "
                        "why rig can or cannot open each");

  rig::tool::DemoOptions demo;
  auto* demo_cmd = app.add_subcommand("demo", "run saxpy and a sum reduction on the host device and verify them");
  demo_cmd->add_option("--elements", demo.elements, "floats per array")->check(CLI::PositiveNumber);
  demo_cmd->add_option("--groups", demo.groups, "groups per launch")->check(CLI::Range(1, 1 << 20));

  rig::tool::BenchOptions bench;
  auto* bench_cmd = app.add_subcommand("bench", "run benchmarks, each beside a floor measured in the same run");
  bench_cmd->add_option("names", bench.names,
                        "benches to run: submit, roundtrip, grid, batch, load, copy, alloc, disk (default: all)");
  bench_cmd->add_flag("--json", bench.json, "print a JSON array of figures");
  bench_cmd->add_option("--device", bench.device,
                        "the device to run on (CPU, MEM..., DISK, AMD:N, CUDA:N), where a bench allows a choice");
  bench_cmd->add_option("--repeats", bench.repeats, "repetitions; figures are medians")->check(CLI::Range(1, 1000));
  bench_cmd->add_option("--compare", bench.compare,
                        "a baseline (rig bench --json): mark figures more than 10% worse, and fail if one is")
      ->check(CLI::ExistingFile);

  rig::tool::ProfOptions prof;
  auto* prof_cmd = app.add_subcommand("prof", "run a program with a profile taken, then sum up its launches");
  prof_cmd->add_option("-o,--output", prof.trace, "where the program writes its Chrome trace (RIG_PROFILE)");
  prof_cmd->add_option("--csv", prof.csv, "also write one CSV row per launch here (RIG_PROFILE_CSV)");
  prof_cmd->add_option("--top", prof.top, "rows of the summary")->check(CLI::PositiveNumber);
  prof_cmd->add_option("command", prof.command, "-- then the program and its arguments");

  rig::tool::ConformOptions conform;
  auto* conform_cmd =
      app.add_subcommand("conform", "run the conformance laws on every device present, or one, as a table");
  conform_cmd->add_option("--device", conform.device, "the device to run on, as the table names it (default: every one)");
  conform_cmd->add_option("--junit", conform.junit, "also write the outcomes as JUnit XML to this file");
  conform_cmd->add_option("--law", conform.laws,
                          "run only this law: its name, or a pattern with * and ? (repeatable; default: every one)");
  conform_cmd->add_option("--law-timeout", conform.law_timeout,
                          "seconds a law may run before it counts as a hang (default: 60)")
      ->check(CLI::Range(1, 86400));
  conform_cmd->add_flag("--list", conform.list, "print a line TARGET<tab>LAW for each law chosen, and run none");

  rig::tool::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand(
      "serve", "serve this machine's devices to rig clients over UCX; prints \"listening HOST:PORT\" once listening");
  serve_cmd->add_option("--listen", serve.listen, "HOST:PORT to listen on (default 127.0.0.1:0: loopback, any port)");
  serve_cmd->add_option("--devices", serve.devices, "the devices to serve (default: CPU and MEM), GPUs by their names (AMD:0)")->delimiter(',');
  serve_cmd->add_option("--token-file", serve.token_file,
                        "the file of the token clients must prove, readable by its owner only (default: RIG_TOKEN, "
                        "or the file RIG_TOKEN_FILE names)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices_cmd) return rig::tool::devices(devices);
    if (*demo_cmd) return rig::tool::demo(demo);
    if (*bench_cmd) return rig::tool::bench(bench);
    if (*prof_cmd) return rig::tool::prof(prof);
    if (*conform_cmd) return rig::tool::conform(conform);
    if (*serve_cmd) return rig::tool::serve(serve);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rig: {}\n", e.what());
    return 1;
  }
  return 0;
}
