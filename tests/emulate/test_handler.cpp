// The handler itself: install/uninstall rules, SIGILLs that are not ours reach the
// previous handler (or kill the process as before), the diagnostic line, the untouched
// registers around an emulated instruction, per-thread zmm state, MXCSR flags, the
// instruction count, and the measured rate of emulated instructions.
#include <signal.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "jit/emulate/emulator.h"
#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

namespace reg = Xbyak::util;

class HandlerTest : public EmulatorTest {};

TEST(EmulatorInstall, RefusesNativeAndUnknownFeatures) {
  std::string why;
  EXPECT_FALSE(install(0, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(install(8, &why));
  for (unsigned feature : {unsigned{kAvx512}, unsigned{kAvxVnni}, unsigned{kAmx}}) {
    if (native_features() & feature) {
      why.clear();
      EXPECT_FALSE(install(feature, &why)) << "feature " << feature << " is native";
      EXPECT_NE(why.find("natively"), std::string::npos) << why;
    }
  }
  EXPECT_EQ(installed_features(), 0u);
  const unsigned missing = kAllFeatures & ~native_features();
  if (missing) {
    ASSERT_TRUE(install(missing, &why)) << why;
    EXPECT_EQ(installed_features(), missing);
    uninstall();
  }
  EXPECT_EQ(installed_features(), 0u);
}

TEST_F(HandlerTest, UnrelatedSigillReachesThePreviousHandler) {
  Jit jit;
  jit.ud2();
  const std::uint64_t before = emulated_instruction_count();
  EXPECT_TRUE(passes_sigill_on(emulated(), [&] { jit.run(); }));
  EXPECT_TRUE(passes_sigill_on(emulated(), [] { raise(SIGILL); }))
      << "a SIGILL sent, not raised by an instruction";
  EXPECT_EQ(emulated_instruction_count(), before);
}

TEST_F(HandlerTest, FeatureNotInstalledIsNotEmulated) {
  if (!(emulated() & kAvx512)) GTEST_SKIP() << "AVX-512 runs natively";
  Jit jit;
  jit.vpaddd(reg::zmm1, reg::zmm2, reg::zmm3);
  EXPECT_TRUE(passes_sigill_on(emulated() & ~kAvx512, [&] { jit.run(); }));
  EXPECT_FALSE(passes_sigill_on(kAvx512, [&] { jit.run(); }));
}

// Reads what the handler writes to stderr while `body` runs.
std::string capture_stderr(const std::function<void()>& body) {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(pipe_fds[1], STDERR_FILENO);
  body();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(pipe_fds[1]);
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  return text;
}

TEST_F(HandlerTest, UnemulatedInstructionOfAnInstalledFeatureIsNamed) {
  if (!(emulated() & kAvx512)) GTEST_SKIP() << "AVX-512 runs natively";
  Jit jit;
  jit.vpconflictd(reg::zmm1, reg::zmm2);  // AVX512CD: not emulated
  bool passed_on = false;
  const std::string text =
      capture_stderr([&] { passed_on = passes_sigill_on(kAvx512, [&] { jit.run(); }); });
  EXPECT_TRUE(passed_on);
  EXPECT_NE(text.find("vpconflictd"), std::string::npos) << text;
  char address[32];
  std::snprintf(address, sizeof address, "0x%016lx",
                reinterpret_cast<unsigned long>(jit.getCode()));
  EXPECT_NE(text.find(address), std::string::npos) << text << " (expected " << address << ")";
}

// With the default disposition underneath, a foreign SIGILL still ends the process.
TEST_F(HandlerTest, DefaultDispositionStillKillsTheProcess) {
  Jit jit;
  jit.ud2();
  EXPECT_EXIT(jit.run(), ::testing::KilledBySignal(SIGILL), "");
}

// Every GPR, ymm0-15 other than the destination, and RFLAGS keep their values across
// emulated instructions.
TEST_F(HandlerTest, OnlyTheDestinationChanges) {
  using namespace reg;
  if (!emulated()) GTEST_SKIP() << "nothing is emulated on this CPU";
  const Xbyak::Reg64 gprs[] = {rax, rbx, rcx, rdx, rsi, rdi, rbp, r8,
                               r9,  r10, r11, r12, r13, r14, r15};
  Jit jit;  // rdi = inputs (ymm0..15 then gpr values), rsi = outputs
  for (auto r : {rbx, rbp, r12, r13, r14, r15}) jit.push(r);
  jit.push(rsi);
  for (int i = 0; i < 16; ++i) jit.vmovdqu(Xbyak::Ymm(i), jit.ptr[rdi + 32 * i]);
  jit.mov(rax, rdi);
  for (int i = 14; i >= 0; --i) jit.mov(gprs[i], jit.qword[rax + 512 + 8 * i]);
  jit.kxnorw(k1, k1, k1);  // all ones: {k1} below only forces the EVEX encoding
  jit.stc();
  jit.vpaddd(zmm20, zmm21, zmm22);
  jit.vpaddd(xmm5 | k1, xmm6, xmm7);
  jit.vpdpbusd(ymm9, ymm10, ymm11, Xbyak::VexEncoding);
  jit.pushfq();
  jit.pop(jit.qword[rsp - 64]);
  jit.mov(jit.qword[rsp - 72], rax);
  jit.mov(rax, jit.qword[rsp]);  // outputs
  for (int i = 0; i < 16; ++i) jit.vmovdqu(jit.ptr[rax + 32 * i], Xbyak::Ymm(i));
  for (int i = 1; i < 15; ++i) jit.mov(jit.qword[rax + 512 + 8 * i], gprs[i]);
  jit.mov(rcx, jit.qword[rsp - 72]);
  jit.mov(jit.qword[rax + 512], rcx);
  jit.mov(rcx, jit.qword[rsp - 64]);
  jit.mov(jit.qword[rax + 512 + 8 * 15], rcx);
  jit.vzeroupper();
  jit.pop(rsi);
  for (auto r : {r15, r14, r13, r12, rbp, rbx}) jit.pop(r);

  Random random(1);
  std::vector<std::uint64_t> in(64 + 15), out(64 + 16, 0);
  for (auto& x : in) x = random.next();
  in[64 + 5] = reinterpret_cast<std::uint64_t>(in.data());  // rdi stays the input pointer
  jit.run(in.data(), out.data());
  // ymm5 (vpaddd xmm5 zeroes 255:128) and ymm9 (vpdpbusd) change; nothing else.
  for (int i = 0; i < 16; ++i) {
    if (i == 5 || i == 9) continue;
    for (int q = 0; q < 4; ++q)
      EXPECT_EQ(out[4 * i + q], in[4 * i + q]) << "ymm" << i << " quadword " << q;
  }
  for (int i = 0; i < 15; ++i) {
    if (gprs[i] == rsi) continue;  // used for the output pointer
    EXPECT_EQ(out[64 + i], in[64 + i]) << gprs[i].toString();
  }
  EXPECT_EQ(out[64 + 15] & 1, 1u) << "CF set by stc survives emulated instructions";
}

// zmm bits 511:256, zmm16-31 and k0-7 are per-thread state.
TEST_F(HandlerTest, VectorStateIsPerThread) {
  using namespace reg;
  Jit load, store;
  load.vmovdqu32(zmm3, load.ptr[rdi]);
  load.vmovdqu32(zmm25, load.ptr[rdi + 64]);
  load.kmovq(k5, load.ptr[rdi + 128]);
  store.vmovdqu32(store.ptr[rsi], zmm3);
  store.vmovdqu32(store.ptr[rsi + 64], zmm25);
  store.kmovq(store.ptr[rsi + 128], k5);
  load.finalize();
  store.finalize();
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Random random(t + 50);
      for (int round = 0; round < 50; ++round) {
        alignas(64) Vec512 in[3] = {random.bytes(), random.bytes(), random.bytes()};
        alignas(64) Vec512 out[3];
        load.run(in);
        std::this_thread::yield();
        store.run(nullptr, out);
        if (!(out[0] == in[0]) || !(out[1] == in[1]) ||
            out[2].get<std::uint64_t>(0) != in[2].get<std::uint64_t>(0))
          ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST_F(HandlerTest, FloatExceptionFlagsReachMxcsr) {
  using namespace reg;
  Jit jit;
  jit.vmovups(zmm17, jit.ptr[rdi]);
  jit.vdivps(zmm16, zmm17, jit.ptr[rdi + 64]);
  Vec512 in[2];
  for (unsigned i = 0; i < 16; ++i)
    in[0].set<float>(i, 1.0f), in[1].set<float>(i, i < 15 ? 3.0f : 0.0f);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved & ~0x3Fu);
  jit.run(in);
  const unsigned flags = _mm_getcsr() & 0x3F;
  _mm_setcsr(saved);
  EXPECT_TRUE(flags & 0x04) << "ZE after 1/0, MXCSR flags " << flags;
  EXPECT_TRUE(flags & 0x20) << "PE after 1/3, MXCSR flags " << flags;
}

// Not an assertion: how many instructions per second a trap-and-emulate costs here.
TEST_F(HandlerTest, MeasureEmulatedInstructionsPerSecond) {
  using namespace reg;
  if (!emulated()) GTEST_SKIP() << "nothing is emulated on this CPU";
  constexpr int kIterations = 100000;
  struct Kernel {
    const char* name;
    unsigned feature;
    int per_iteration;
    void (*emit)(Jit&);
  };
  const Kernel kernels[] = {
      {"vpdpbusd zmm (EVEX)", kAvx512, 2,
       [](Jit& j) { j.vpdpbusd(zmm1, zmm2, zmm3), j.vpdpbusd(zmm4, zmm5, j.ptr_b[rdi]); }},
      {"vpdpbusd ymm (VEX)", kAvxVnni, 2,
       [](Jit& j) {
         j.vpdpbusd(ymm1, ymm2, ymm3, Xbyak::VexEncoding),
             j.vpdpbusd(ymm4, ymm5, ymm6, Xbyak::VexEncoding);
       }},
      {"tdpbusd 16x64x16", kAmx, 1,
       [](Jit& j) { j.tdpbusd(Xbyak::Tmm(0), Xbyak::Tmm(1), Xbyak::Tmm(2)); }},
  };
  for (const Kernel& k : kernels) {
    if (!(emulated() & k.feature)) continue;
    Jit jit;
    Xbyak::Label loop;
    alignas(64) std::uint8_t config[64] = {1};
    for (int t = 0; t < 3; ++t) config[16 + 2 * t] = 64, config[48 + t] = 16;
    if (k.feature == kAmx) jit.ldtilecfg(jit.ptr[rsi]);
    jit.mov(ecx, kIterations / k.per_iteration);
    jit.L(loop);
    k.emit(jit);
    jit.dec(ecx);
    jit.jnz(loop);
    if (k.feature == kAmx) jit.tilerelease();
    alignas(64) std::uint32_t data[16] = {};
    const std::uint64_t before = emulated_instruction_count();
    const auto start = std::chrono::steady_clock::now();
    jit.run(data, config);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::uint64_t count = emulated_instruction_count() - before;
    EXPECT_EQ(count, std::uint64_t{kIterations} + (k.feature == kAmx ? 2 : 0));
    std::printf("[ MEASURE  ] %-22s %9.0f emulated instructions/s (%.2f us each)\n", k.name,
                count / seconds, 1e6 * seconds / count);
    RecordProperty(std::string("per_second ") + k.name, static_cast<int>(count / seconds));
  }
}

TEST(EmulatorInstall, MnemonicListIsSortedAndComplete) {
  const std::vector<std::string_view> names = emulated_mnemonics();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "listed twice";
  for (std::string_view must :
       {"vpdpbusd", "vpdpwssds", "vmovdqu8", "vpternlogd", "vpermt2ps", "vcvtps2ph", "vdpbf16ps",
        "kortestw", "kunpckbw", "ldtilecfg", "tileloaddt1", "tdpbf16ps"})
    EXPECT_NE(std::find(names.begin(), names.end(), must), names.end()) << must;
}

}  // namespace
}  // namespace qforge::emulate::test
