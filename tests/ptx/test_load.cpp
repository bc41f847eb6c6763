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

TEST_CASE("hand-written PTX: rem, bfe, slct, set, generic shared access, redux and/or, match.all, lanemask, red, exit before a barrier") {
  // Instructions nvcc did not emit for the test kernels, each output checked per lane.
  const std::string text = R"(.version 9.0
.target sm_90
.address_size 64
.visible .entry h(.param .u64 out)
{
.reg .pred %p<4>;
.reg .b32 %r<40>;
.reg .f32 %f<4>;
.reg .b64 %rd<8>;
.shared .align 4 .b8 s[132];
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 48;
add.s64 %rd3, %rd1, %rd2;
sub.s32 %r2, %r1, 16;
rem.s32 %r3, %r2, 5;
st.global.u32 [%rd3], %r3;
bfe.s32 %r4, %r2, 2, 3;
st.global.u32 [%rd3+4], %r4;
slct.s32.s32 %r5, 100, 200, %r2;
st.global.u32 [%rd3+8], %r5;
set.lt.u32.s32 %r6, %r2, 0;
st.global.u32 [%rd3+12], %r6;
mov.u32 %r7, s;
shl.b32 %r8, %r1, 2;
add.s32 %r9, %r7, %r8;
cvt.u64.u32 %rd4, %r9;
cvta.shared.u64 %rd5, %rd4;
st.u32 [%rd5], %r2;
bar.warp.sync -1;
xor.b32 %r10, %r1, 1;
shl.b32 %r11, %r10, 2;
add.s32 %r12, %r7, %r11;
ld.shared.u32 %r13, [%r12];
st.global.u32 [%rd3+16], %r13;
redux.sync.or.b32 %r14, %r8, -1;
st.global.u32 [%rd3+20], %r14;
redux.sync.and.b32 %r15, %r2, -1;
st.global.u32 [%rd3+24], %r15;
match.all.sync.b32 %r16|%p1, %r6, -1;
selp.u32 %r17, 1, 0, %p1;
add.s32 %r18, %r16, %r17;
st.global.u32 [%rd3+28], %r18;
mov.u32 %r19, %lanemask_lt;
st.global.u32 [%rd3+32], %r19;
red.shared.add.u32 [s+128], 1;
bar.sync 0;
ld.shared.u32 %r20, [s+128];
st.global.u32 [%rd3+36], %r20;
tanh.approx.f32 %f1, 0f3F000000;
st.global.f32 [%rd3+40], %f1;
setp.eq.u32 %p2, %r1, 0;
@%p2 exit;
bar.sync 0;
mov.u32 %r21, 7;
st.global.u32 [%rd3+44], %r21;
ret;
}
)";
  auto m = Module::load(text, "h.ptx");
  REQUIRE_MESSAGE(m.has_value(), (m ? std::string() : m.error()));
  ptx_test::Arena arena;
  const auto out = arena.alloc(32 * 48);
  const auto p = ptx_test::params(*m, "h", {out});
  rig::ptx::Launch l;
  l.block = {32, 1, 1};
  l.params = p;
  auto r = m->run("h", l, arena);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error()));
  const auto o = arena.download<std::int32_t>(out, 32 * 12);
  for (int t = 0; t < 32; ++t) {
    CAPTURE(t);
    const int a = t - 16;
    int field = (a >> 2) & 7;
    if (field & 4) field -= 8;
    CHECK(o[t * 12 + 0] == a % 5);
    CHECK(o[t * 12 + 1] == field);
    CHECK(o[t * 12 + 2] == (a >= 0 ? 100 : 200));
    CHECK(o[t * 12 + 3] == (a < 0 ? -1 : 0));
    CHECK(o[t * 12 + 4] == (t ^ 1) - 16);
    CHECK(o[t * 12 + 5] == 124);
    CHECK(o[t * 12 + 6] == 0);
    CHECK(o[t * 12 + 7] == 0);
    CHECK(static_cast<std::uint32_t>(o[t * 12 + 8]) == (1u << t) - 1);
    CHECK(o[t * 12 + 9] == 32);
    float f;
    std::memcpy(&f, &o[t * 12 + 10], 4);
    CHECK(std::fabs(f - std::tanh(0.5f)) < 1e-6f);
    CHECK(o[t * 12 + 11] == (t == 0 ? 0 : 7));  // the barrier after lane 0 exited still completes
  }
}

TEST_CASE("a shuffle waiting for a lane completes when that lane exits") {
  // Lanes 0..15 reach the shuffle (full mask) first and wait; lanes 16..31 then exit, and
  // the last exit completes the shuffle among the lanes left.
  const auto body = R"(mov.u32 %r1, %tid.x;
setp.ge.u32 %p1, %r1, 16;
@%p1 exit;
shfl.sync.bfly.b32 %r2|%p2, %r1, 1, 31, -1;
ld.param.u64 %rd1, [p];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r2;)";
  auto m = Module::load(wrap(body), "t.ptx");
  REQUIRE_MESSAGE(m.has_value(), (m ? std::string() : m.error()));
  ptx_test::Arena arena;
  const auto out = arena.alloc(32 * 4);
  const auto p = ptx_test::params(*m, "k", {out});
  rig::ptx::Launch l;
  l.block = {32, 1, 1};
  l.params = p;
  auto r = m->run("k", l, arena);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error()));
  const auto o = arena.download<std::uint32_t>(out, 32);
  for (std::uint32_t t = 0; t < 16; ++t) CHECK(o[t] == (t ^ 1));
}
