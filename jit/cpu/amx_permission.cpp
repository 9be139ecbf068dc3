#include "jit/cpu/amx_permission.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace qforge {
namespace {

// From the Linux UAPI (asm/prctl.h) and the XSAVE feature numbering.
constexpr int kArchGetXcompSupp = 0x1021;
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;
constexpr std::uint64_t kXtileDataMask = std::uint64_t{1} << kXfeatureXtileData;

struct Answer {
  bool usable = false;
  std::string reason;
};

std::string errno_text(const char* call) {
  return std::string(call) + " failed: " + std::strerror(errno);
}

Answer ask_kernel() {
  std::uint64_t features = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompSupp, &features) != 0)
    return {false, errno_text("arch_prctl(ARCH_GET_XCOMP_SUPP)")};
  if (!(features & kXtileDataMask))
    return {false, "the kernel does not support XTILEDATA (ARCH_GET_XCOMP_SUPP)"};
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0)
    return {false, errno_text("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)")};
  features = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) != 0)
    return {false, errno_text("arch_prctl(ARCH_GET_XCOMP_PERM)")};
  if (!(features & kXtileDataMask))
    return {false, "XTILEDATA still not permitted after ARCH_REQ_XCOMP_PERM"};
  return {true, "ok"};
}

}  // namespace

bool request_amx_permission(std::string* reason) {
  static std::once_flag once;
  static Answer answer;
  std::call_once(once, [] { answer = ask_kernel(); });
  if (reason) *reason = answer.reason;
  return answer.usable;
}

}  // namespace qforge
