#include "jit/tune/dot_peak_kernel.h"

#include "jit/core/jit_generator.h"

namespace qforge {

using DotLoopFn = std::int64_t (*)(std::int64_t iterations);

// Register use (vector index v: zmm v, or ymm v):
//   VNNI:  v0 = x (u8 5), v1 = w (s8 3), v2 .. v13 = 12 accumulators
//   AVX2:  v0 = x (s8 5), v1 = w, v2 = |w|, v3 = ones16, v4 .. v7 = step temps,
//          v8 .. v15 = 8 accumulators (the sequence needs a temp per step in flight)
struct DotPeakKernel::Code : JitGenerator {
  DotLoopFn fn = nullptr;

  Code(DotKind kind, int accumulators) : JitGenerator(4096) {
    using namespace Xbyak;
    const bool zmm = kind == DotKind::zmm;
    auto vec = [&](int v) -> Xmm {
      if (zmm) return Zmm(v);
      return Ymm(v);
    };
    if (kind == DotKind::ymm_vnni) setDefaultEncoding(VexEncoding);
    const int first_acc = kind == DotKind::avx2 ? 8 : 2;

    // constants through a general register: x, w (and |w|, ones16 for AVX2)
    mov(eax, 0x05050505);
    vmovd(Xmm(0), eax);
    mov(eax, 0x03030303);
    vmovd(Xmm(1), eax);
    if (zmm) {
      vpbroadcastd(Zmm(0), Xmm(0));
      vpbroadcastd(Zmm(1), Xmm(1));
    } else {
      vpbroadcastd(Ymm(0), Xmm(0));
      vpbroadcastd(Ymm(1), Xmm(1));
    }
    if (kind == DotKind::avx2) {
      vpabsb(Ymm(2), Ymm(1));
      mov(eax, 0x00010001);
      vmovd(Xmm(3), eax);
      vpbroadcastd(Ymm(3), Xmm(3));
    }
    for (int a = 0; a < accumulators; ++a) {
      const Xmm acc = vec(first_acc + a);
      if (zmm)
        vpxord(acc, acc, acc);
      else
        vpxor(acc, acc, acc);
    }

    Label loop, done;
    test(rdi, rdi);
    jle(done, T_NEAR);
    L(loop);
    for (int a = 0; a < accumulators; ++a) {
      const Xmm acc = vec(first_acc + a);
      if (kind == DotKind::avx2) {
        const Ymm t(4 + a % 4);
        vpsignb(t, Ymm(0), Ymm(1));  // x * sign(w)
        vpmaddubsw(t, Ymm(2), t);    // |w| * (x * sign(w)), pairs to int16
        vpmaddwd(t, t, Ymm(3));      // pairs to int32
        vpaddd(Ymm(acc.getIdx()), Ymm(acc.getIdx()), t);
      } else {
        vpdpbusd(acc, vec(0), vec(1));
      }
    }
    dec(rdi);
    jnz(loop, T_NEAR);
    L(done);

    // sum lane 0 of every accumulator into rax
    xor_(eax, eax);
    for (int a = 0; a < accumulators; ++a) {
      vmovd(edx, Xmm(first_acc + a));
      movsxd(rdx, edx);
      add(rax, rdx);
    }
    vzeroupper();
    ret();
    fn = reinterpret_cast<DotLoopFn>(const_cast<std::uint8_t*>(finalize()));
  }
};

DotPeakKernel::DotPeakKernel(DotKind kind)
    : kind_(kind),
      accumulators_(kind == DotKind::avx2 ? 8 : 12),
      code_(std::make_unique<Code>(kind, accumulators_)) {}

DotPeakKernel::~DotPeakKernel() = default;

std::int64_t DotPeakKernel::run(std::int64_t iterations) const {
  return code_->fn(iterations);
}

}  // namespace qforge
