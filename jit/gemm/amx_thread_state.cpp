#include "jit/gemm/amx_thread_state.h"

#include "jit/core/jit_generator.h"
#include "jit/cpu/isa.h"

namespace qforge {
namespace {

thread_local bool t_tiles_in_use = false;

// tilerelease; ret
class TileReleaseStub : public JitGenerator {
 public:
  TileReleaseStub() : JitGenerator(64) {
    tilerelease();
    ret();
    function_ = reinterpret_cast<void (*)()>(const_cast<std::uint8_t*>(finalize()));
  }
  void operator()() const { function_(); }

 private:
  void (*function_)() = nullptr;
};

// AMX present in hardware or in the emulator (whatever the user cap says now).
bool amx_present() {
  return ((hardware_isa_mask(cpu_info()) | emulated_isa_mask()) & isa_bit(Isa::amx)) != 0;
}

}  // namespace

void note_amx_tiles_in_use() {
  t_tiles_in_use = true;
}

void release_amx_tiles() {
  if (!t_tiles_in_use) return;
  t_tiles_in_use = false;
  if (!amx_present()) return;  // the emulator was withdrawn: no tile state to release
  static const TileReleaseStub release;
  release();
}

}  // namespace qforge
