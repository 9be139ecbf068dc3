#include "jit/tune/float_peak_kernel.h"

#include "jit/core/jit_generator.h"

namespace qforge {

using FloatLoopFn = std::int64_t (*)(std::int64_t iterations);

// Register use: v0 = x, v1 = w, v2 .. v13 = 12 accumulators (zmm v or ymm v).
struct FloatPeakKernel::Code : JitGenerator {
  FloatLoopFn fn = nullptr;

  Code(FloatPeakKind kind) : JitGenerator(4096) {
    using namespace Xbyak;
    const bool zmm = kind != FloatPeakKind::fma_ymm;
    auto vec = [&](int v) -> Xmm {
      if (zmm) return Zmm(v);
      return Ymm(v);
    };
    // 1.0f, or a pair of bf16 1.0 (0x3f80) in each dword
    mov(eax, kind == FloatPeakKind::bf16_zmm ? 0x3f803f80 : 0x3f800000);
    vmovd(Xmm(0), eax);
    if (zmm)
      vpbroadcastd(Zmm(0), Xmm(0));
    else
      vpbroadcastd(Ymm(0), Xmm(0));
    if (zmm)
      vmovaps(Zmm(1), Zmm(0));
    else
      vmovaps(Ymm(1), Ymm(0));
    for (int a = 0; a < kAccumulators; ++a) {
      const Xmm acc = vec(2 + a);
      if (zmm)
        vpxord(acc, acc, acc);
      else
        vpxor(acc, acc, acc);
    }
    Label loop, done;
    test(rdi, rdi);
    jle(done, T_NEAR);
    L(loop);
    for (int a = 0; a < kAccumulators; ++a) {
      if (kind == FloatPeakKind::bf16_zmm)
        vdpbf16ps(Zmm(2 + a), Zmm(0), Zmm(1));
      else
        vfmadd231ps(vec(2 + a), vec(0), vec(1));
    }
    dec(rdi);
    jnz(loop, T_NEAR);
    L(done);
    // sum lane 0 of every accumulator into rax
    xor_(eax, eax);
    for (int a = 0; a < kAccumulators; ++a) {
      vcvttss2si(rdx, Xmm(2 + a));
      add(rax, rdx);
    }
    vzeroupper();
    ret();
    fn = reinterpret_cast<FloatLoopFn>(const_cast<std::uint8_t*>(finalize()));
  }
};

FloatPeakKernel::FloatPeakKernel(FloatPeakKind kind)
    : kind_(kind), code_(std::make_unique<Code>(kind)) {}

FloatPeakKernel::~FloatPeakKernel() = default;

int FloatPeakKernel::multiply_adds_per_step() const {
  switch (kind_) {
    case FloatPeakKind::fma_ymm:
      return 8;
    case FloatPeakKind::fma_zmm:
      return 16;
    default:
      return 32;
  }
}

std::int64_t FloatPeakKernel::run(std::int64_t iterations) const {
  return code_->fn(iterations);
}

}  // namespace qforge
