#include "jit/tune/amx_peak_kernel.h"

#include "jit/core/jit_generator.h"
#include "jit/gemm/amx_tile_plan.h"

namespace qforge {

using AmxLoopFn = std::int64_t (*)(std::int64_t iterations);

struct AmxPeakKernel::Code : JitGenerator {
  AmxLoopFn fn = nullptr;

  explicit Code(AmxPeakKind kind) : JitGenerator(8192) {
    const bool bf16 = kind == AmxPeakKind::bf16;
    using namespace Xbyak;
    Label config, a_data, b_data, loop, done;
    constexpr int kTileBytes = kAmxTileRows * kAmxTileBytes;  // one full tile, 1 KiB
    // rdi = iterations; the stage for the C tiles is below rsp (a leaf: no calls)
    lea(rax, ptr[rip + config]);
    ldtilecfg(ptr[rax]);
    mov(rcx, kAmxTileBytes);  // the stride, as the SIB index
    lea(rax, ptr[rip + a_data]);
    tileloadd(Tmm(amx_a_tile(0)), ptr[rax + rcx * 1]);
    tileloadd(Tmm(amx_a_tile(1)), ptr[rax + rcx * 1]);
    lea(rax, ptr[rip + b_data]);
    tileloadd(Tmm(amx_b_tile(0)), ptr[rax + rcx * 1]);
    tileloadd(Tmm(amx_b_tile(1)), ptr[rax + rcx * 1]);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) tilezero(Tmm(amx_c_tile(a, b)));
    test(rdi, rdi);
    jle(done, T_NEAR);
    L(loop);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        if (bf16)
          tdpbf16ps(Tmm(amx_c_tile(a, b)), Tmm(amx_a_tile(a)), Tmm(amx_b_tile(b)));
        else
          tdpbsud(Tmm(amx_c_tile(a, b)), Tmm(amx_a_tile(a)), Tmm(amx_b_tile(b)));
    dec(rdi);
    jnz(loop, T_NEAR);
    L(done);
    // lane 0 of each C tile, through a stage on the stack
    sub(rsp, kTileBytes);
    xor_(r8d, r8d);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        tilestored(ptr[rsp + rcx * 1], Tmm(amx_c_tile(a, b)));
        if (bf16)
          vcvttss2si(rdx, dword[rsp]);  // f32 lane
        else
          movsxd(rdx, dword[rsp]);
        add(r8, rdx);
      }
    add(rsp, kTileBytes);
    tilerelease();
    mov(rax, r8);
    ret();

    align(64);
    L(config);
    for (std::uint8_t byte : amx_tile_config(kAmxBlockRows)) db(byte);
    align(64);
    L(a_data);
    for (int i = 0; i < kTileBytes / 2; ++i)  // s8 activations 5, or bf16 1.0
      dw(bf16 ? 0x3f80 : 0x0505);
    L(b_data);
    for (int i = 0; i < kTileBytes / 2; ++i)  // u8 weights 3, or bf16 1.0
      dw(bf16 ? 0x3f80 : 0x0303);
    fn = reinterpret_cast<AmxLoopFn>(const_cast<std::uint8_t*>(finalize()));
  }
};

AmxPeakKernel::AmxPeakKernel(AmxPeakKind kind) : code_(std::make_unique<Code>(kind)) {}

AmxPeakKernel::~AmxPeakKernel() = default;

std::int64_t AmxPeakKernel::run(std::int64_t iterations) const {
  return code_->fn(iterations);
}

}  // namespace qforge
