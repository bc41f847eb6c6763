// The loader's promises: what it exposes of a module, and what it refuses.
#include "harness.hpp"

using rig::ptx::Module;

namespace {

std::string wrap(const std::string& body, const std::string& decls = "") {
  return ".version 9.0\n.target sm_90\n.address_size 64\n" + decls +
         ".visible .entry k(.param .u64 p)\n{\n.reg .pred %p<3>;\n.reg .b32 %r<9>;\n.reg .f32 %f<4>;\n"
         ".reg .b64 %rd<5>;\n" + body + "\nret;\n}\n";
}

std::string refusal(const std::string& text) {
  auto m = Module::load(text, "t.ptx");
  REQUIRE_FALSE(m.has_value());
  return m.error();
}

}  // namespace

TEST_CASE("an unknown instruction is refused with its line and mnemonic") {
  const auto e = refusal(wrap("mov.u32 %r1, 1;\nfrobnicate.b32 %r1, %r2;"));
  CHECK(e.find("t.ptx:11:") != std::string::npos);
  CHECK(e.find("frobnicate.b32") != std::string::npos);
}

TEST_CASE("an unknown modifier is refused with the mnemonic") {
  const auto e = refusal(wrap("add.wobbly.u32 %r1, %r2, %r3;"));
  CHECK(e.find(":10:") != std::string::npos);
  CHECK(e.find("'.wobbly' in 'add.wobbly.u32'") != std::string::npos);
}

TEST_CASE("an unknown directive is refused") {
  CHECK(refusal(wrap("", ".frob 3;\n")).find("unsupported directive '.frob'") != std::string::npos);
  CHECK(refusal(wrap(".frob;")).find("'.frob' in a function body") != std::string::npos);
}

TEST_CASE("an undeclared register, a missing label and a range overrun are refused") {
  CHECK(refusal(wrap("mov.u32 %q1, 1;")).find("unknown register '%q1'") != std::string::npos);
  CHECK(refusal(wrap("bra $L__nowhere;")).find("no label '$L__nowhere'") != std::string::npos);
  CHECK(refusal(wrap("mov.u32 %r9, 1;")).find("unknown register '%r9'") != std::string::npos);
}

TEST_CASE("a wrong operand count is refused") {
  CHECK(refusal(wrap("add.u32 %r1, %r2;")).find("takes 3 operands, not 2") != std::string::npos);
}

TEST_CASE("recursion and calls to functions without bodies are refused") {
  const std::string rec = ".version 9.0\n.target sm_90\n.address_size 64\n.func f()\n{\ncall.uni f, ();\nret;\n}\n";
  CHECK(refusal(rec).find("recursive") != std::string::npos);
  const std::string ext = ".version 9.0\n.target sm_90\n.address_size 64\n.extern .func g();\n.func f()\n{\ncall.uni g, ();\nret;\n}\n";
  CHECK(refusal(ext).find("'f' calls 'g', which has no body here") != std::string::npos);
}

TEST_CASE("text that is not PTX gives an error, never a crash") {
  CHECK_FALSE(Module::load("", "e").has_value());
  CHECK_FALSE(Module::load("\x01\x02", "e").has_value());
  CHECK_FALSE(Module::load(".version 9.0\n.entry k(", "e").has_value());
  CHECK_FALSE(Module::load(".version 9.0\n.address_size 32\n", "e").has_value());
  CHECK_FALSE(Module::load(wrap("mov.u32 %r1, 0x1ffffffffffffffffff;"), "e").has_value());
}

TEST_CASE("module variables expose their sizes and initial bytes, and take the embedder's addresses") {
  ptx_test::Arena arena;
  auto l = ptx_test::load(arena, "misc");
  const auto vars = l.module.variables();
  REQUIRE(vars.size() == 3);
  CHECK(vars[0].name == "coeffs");
  CHECK(vars[0].space == rig::ptx::Space::constant);
  CHECK(vars[0].size == 32);
  REQUIRE(vars[0].init.size() == 29);
  CHECK(vars[0].init[4] == std::byte{255});
  CHECK(vars[1].name == "counter");
  CHECK(vars[1].space == rig::ptx::Space::global);
  CHECK(vars[1].init.empty());
  CHECK(vars[2].size == 16);
  CHECK_THROWS_AS(l.module.place("nothing", 0x1000), std::invalid_argument);
}

TEST_CASE("a kernel's parameters are laid out with their alignments") {
  auto m = Module::load(wrap(""), "t");
  REQUIRE(m.has_value());
  CHECK(m->kernels() == std::vector<std::string>{"k"});
  REQUIRE(m->params("k").has_value());
  CHECK(m->params("k")->at(0).size == 8);
  CHECK(*m->params_size("k") == 8);
  CHECK_FALSE(m->params("nope").has_value());
}

namespace {

std::string run_error(const std::string& body, rig::ptx::Dim3 block = {1, 1, 1}, std::uint64_t arg = 0,
                      const std::string& decls = "") {
  auto m = Module::load(wrap(body, decls), "t.ptx");
  REQUIRE_MESSAGE(m.has_value(), (m ? std::string() : m.error()));
  ptx_test::Arena arena;
  const auto p = ptx_test::params(*m, "k", {arg});
  rig::ptx::Launch l;
  l.block = block;
  l.params = p;
  auto r = m->run("k", l, arena);
  REQUIRE_FALSE(r.has_value());
  return r.error();
}

}  // namespace

TEST_CASE("an access outside mapped memory faults naming the address, the kernel and the instruction") {
  const auto e = run_error("ld.param.u64 %rd1, [p];\nld.global.u32 %r1, [%rd1+16];", {1, 1, 1}, 0x1230);
  CHECK(e.find("page fault at 0x1240") != std::string::npos);
  CHECK(e.find("kernel k") != std::string::npos);
  CHECK(e.find("line 11: 'ld.global.u32 %r1, [%rd1+16];'") != std::string::npos);
}

TEST_CASE("a misaligned access faults") {
  ptx_test::Arena arena;
  CHECK(run_error("mov.u64 %rd1, 2;\nld.global.u32 %r1, [%rd1];").find("misaligned address 0x2") != std::string::npos);
}

TEST_CASE("an access outside shared memory faults") {
  CHECK(run_error("mov.u32 %r1, 64;\nst.shared.u32 [%r1], %r1;", {1, 1, 1}, 0, ".shared .align 4 .b8 s[64];\n")
            .find("outside the block's 64 bytes") != std::string::npos);
}

TEST_CASE("a barrier some threads never reach is a deadlock fault") {
  const auto e = run_error("mov.u32 %r1, %tid.x;\nsetp.eq.u32 %p1, %r1, 0;\n@%p1 bra $L1;\nbar.sync 0;\n$L1:\nbar.sync 1;",
                           {64, 1, 1});
  CHECK(e.find("deadlock") != std::string::npos);
}

TEST_CASE("trap faults") { CHECK(run_error("trap;").find("trap") != std::string::npos); }

TEST_CASE("a kernel that never ends faults past max_instructions") {
  auto m = Module::load(wrap("$L1:\nbra.uni $L1;"), "t.ptx");
  REQUIRE(m.has_value());
  ptx_test::Arena arena;
  const auto p = ptx_test::params(*m, "k", {0});
  rig::ptx::Launch l;
  l.params = p;
  l.max_instructions = 1000;
  auto r = m->run("k", l, arena);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().find("ran past 1000 instructions") != std::string::npos);
}

TEST_CASE("a launch with too few parameter bytes or an unplaced variable is refused") {
  auto m = Module::load(wrap(""), "t");
  REQUIRE(m.has_value());
  ptx_test::Arena arena;
  rig::ptx::Launch l;
  CHECK(m->run("k", l, arena).error().find("takes 8 bytes of parameters, 0 were passed") != std::string::npos);
  CHECK(m->run("x", l, arena).error().find("no kernel named 'x'") != std::string::npos);
  auto g = Module::load(wrap("", ".global .align 4 .u32 g;\n"), "t");
  REQUIRE(g.has_value());
  std::vector<std::byte> p(8);
  l.params = p;
  CHECK(g->run("k", l, arena).error().find("variable 'g' has no address") != std::string::npos);
}
