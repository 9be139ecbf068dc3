// The SIGILL handler: decode the faulting instruction, find its emulation, run it, step
// over it; or pass the signal on. Everything reachable from on_sigill is async-signal-
// safe: no allocation, no locks, no stdio, no exceptions; state is on the stack, in the
// signal frame or thread-local (initial-exec TLS).
#include <Zydis/Zydis.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "jit/emulate/emulator.h"
#include "jit/emulate/float_env.h"
#include "jit/emulate/host_cpu.h"
#include "jit/emulate/op_table.h"
#include "jit/emulate/operation.h"
#include "jit/emulate/register_file.h"

namespace qforge::emulate {
namespace {

std::atomic<unsigned> g_features{0};
std::atomic<std::uint64_t> g_emulated{0};

// Written by install()/uninstall() under g_install_mutex while the handler is not yet (or
// no longer) in place; read-only for the handler.
std::mutex g_install_mutex;
bool g_installed = false;
struct sigaction g_previous;
ZydisDecoder g_decoder;
EmulateFn g_emulate[ZYDIS_MNEMONIC_MAX_VALUE + 1];

using FamilyFn = std::span<const OpEntry> (*)();
constexpr FamilyFn kFamilies[] = {vnni_ops,  move_ops,    integer_ops, permute_ops,
                                  float_ops, convert_ops, opmask_ops,  amx_ops};

void build_dispatch_table() {
  for (FamilyFn family : kFamilies)
    for (const OpEntry& entry : family()) g_emulate[entry.mnemonic] = entry.emulate;
}

// The feature an instruction that raised #UD belongs to, 0 if none of ours.
unsigned feature_of(const ZydisDecodedInstruction& instruction) {
  if (instruction.encoding == ZYDIS_INSTRUCTION_ENCODING_EVEX) return kAvx512;
  switch (instruction.meta.isa_ext) {
    case ZYDIS_ISA_EXT_AVX512VEX:
      return kAvx512;
    case ZYDIS_ISA_EXT_AVX_VNNI:
      return kAvxVnni;
    case ZYDIS_ISA_EXT_AMX_TILE:
    case ZYDIS_ISA_EXT_AMX_INT8:
    case ZYDIS_ISA_EXT_AMX_BF16:
      return kAmx;
    default:
      return 0;
  }
}

// "qforge emulate: <what> <mnemonic> at 0x<rip>\n" through write(2).
void report(const char* what, ZydisMnemonic mnemonic, std::uint64_t rip) {
  char line[160];
  std::size_t n = 0;
  auto append = [&](const char* text) {
    while (*text && n < sizeof line - 1) line[n++] = *text++;
  };
  append("qforge emulate: ");
  append(what);
  append(" ");
  const char* name = ZydisMnemonicGetString(mnemonic);
  append(name ? name : "?");
  append(" at 0x");
  for (int shift = 60; shift >= 0; shift -= 4) {
    if (n < sizeof line - 1) line[n++] = "0123456789abcdef"[(rip >> shift) & 0xF];
  }
  append("\n");
  const ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
}

// Hands the signal to whoever had SIGILL before us. With the default disposition, the
// default is restored and the faulting instruction, run again on return, ends the process.
void pass_on(int signal_number, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(signal_number, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    struct sigaction default_action;
    std::memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGILL, &default_action, nullptr);
    return;
  }
  g_previous.sa_handler(signal_number);
}

void handle(int signal_number, siginfo_t* info, void* raw_context) {
  // Only a fault raised by an instruction (not kill/raise/sigqueue) is ours to look at.
  if (info->si_code <= 0) return pass_on(signal_number, info, raw_context);
  ucontext_t* context = static_cast<ucontext_t*>(raw_context);
  RegisterFile registers(context);
  const std::uint64_t rip = registers.rip();
  ZydisDecodedInstruction instruction;
  ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
  const ZyanStatus decoded =
      ZydisDecoderDecodeFull(&g_decoder, reinterpret_cast<const void*>(rip),
                             ZYDIS_MAX_INSTRUCTION_LENGTH, &instruction, operands);
  const unsigned feature = ZYAN_SUCCESS(decoded) ? feature_of(instruction) : 0;
  if (feature == 0 || !(g_features.load(std::memory_order_relaxed) & feature))
    return pass_on(signal_number, info, raw_context);

  const EmulateFn emulate = g_emulate[instruction.mnemonic];
  if (!emulate) {
    report("not emulated:", instruction.mnemonic, rip);
    return pass_on(signal_number, info, raw_context);
  }
  if (!registers.valid()) {
    report("no XSAVE signal frame for", instruction.mnemonic, rip);
    return pass_on(signal_number, info, raw_context);
  }
  Operation op(instruction, operands, registers);
  Status status = Status::kUnsupported;
  if (op.decodable()) {
    set_host_mxcsr(host_mxcsr_for(op));
    status = emulate(op);
  }
  if (status != Status::kDone) {
    report(
        status == Status::kInvalid ? "faults on hardware (#UD/#GP):" : "operand form not emulated:",
        instruction.mnemonic, rip);
    return pass_on(signal_number, info, raw_context);
  }
  if (op.reports_float_flags())
    registers.set_mxcsr(registers.mxcsr() | (host_mxcsr() & kMxcsrFlags));
  registers.set_rip(rip + instruction.length);
  g_emulated.fetch_add(1, std::memory_order_relaxed);
}

void on_sigill(int signal_number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  handle(signal_number, info, context);
  errno = saved_errno;
}

std::string feature_names(unsigned features) {
  std::string names;
  if (features & kAvx512) names += "AVX-512 ";
  if (features & kAvxVnni) names += "AVX-VNNI ";
  if (features & kAmx) names += "AMX ";
  if (!names.empty()) names.pop_back();
  return names;
}

}  // namespace

unsigned native_features() {
  const HostCpu host = probe_host_cpu();
  return (host.avx512f ? kAvx512 : 0u) | (host.avx_vnni ? kAvxVnni : 0u) | (host.amx ? kAmx : 0u);
}

bool install(unsigned features, std::string* reason) {
  auto refuse = [reason](const std::string& why) {
    if (reason) *reason = why;
    return false;
  };
  if (features == 0 || (features & ~kAllFeatures))
    return refuse("feature mask must be a nonempty combination of kAvx512, kAvxVnni, kAmx");
  const HostCpu host = probe_host_cpu();
  if (!host.avx_state)
    return refuse("the OS does not enable AVX state (XSAVE), which the emulator works on");
  const unsigned native = native_features() & features;
  if (native) return refuse(feature_names(native) + " runs natively on this CPU");

  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_installed) {
    build_dispatch_table();
    if (!ZYAN_SUCCESS(
            ZydisDecoderInit(&g_decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
      return refuse("Zydis decoder initialisation failed");
    configure_register_file(host);
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigill;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGILL, &action, &g_previous) != 0)
      return refuse(std::string("sigaction(SIGILL) failed: ") + std::strerror(errno));
    g_installed = true;
  }
  g_features.store(features, std::memory_order_relaxed);
  return true;
}

void uninstall() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_installed) return;
  g_features.store(0, std::memory_order_relaxed);
  sigaction(SIGILL, &g_previous, nullptr);
  g_installed = false;
}

unsigned installed_features() {
  return g_features.load(std::memory_order_relaxed);
}

std::uint64_t emulated_instruction_count() {
  return g_emulated.load(std::memory_order_relaxed);
}

std::vector<std::string_view> emulated_mnemonics() {
  std::vector<std::string_view> names;
  for (FamilyFn family : kFamilies)
    for (const OpEntry& entry : family())
      names.emplace_back(ZydisMnemonicGetString(entry.mnemonic));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace qforge::emulate
