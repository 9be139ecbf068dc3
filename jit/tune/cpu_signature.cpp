#include "jit/tune/cpu_signature.h"

#include <cstdlib>
#include <string>

#include "jit/cpu/isa.h"

namespace qforge {
namespace {

// Anything outside [A-Za-z0-9._-] becomes '_' (vendor strings are CPUID bytes).
std::string filename_safe(std::string text) {
  for (char& c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return text;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes % (1u << 20) == 0 && bytes > 0) return std::to_string(bytes >> 20) + "m";
  return std::to_string(bytes >> 10) + "k";
}

}  // namespace

std::string cpu_signature(const CpuInfo& cpu) {
  std::string isas;
  const IsaMask mask = hardware_isa_mask(cpu);
  for (int level = 1; level < kIsaCount; ++level)
    if (mask & isa_bit(static_cast<Isa>(level))) {
      if (!isas.empty()) isas += '.';
      isas += isa_name(static_cast<Isa>(level));
    }
  if (isas.empty()) isas = "scalar";
  return filename_safe(cpu.vendor.empty() ? std::string("unknown") : cpu.vendor) + "-" +
         std::to_string(cpu.family) + "-" + std::to_string(cpu.model) + "-" +
         std::to_string(cpu.stepping) + "_" + filename_safe(isas) + "_c" +
         std::to_string(cpu.cores) + "_l2-" + size_text(cpu.l2_bytes);
}

const std::string& cpu_signature() {
  static const std::string signature = cpu_signature(cpu_info());
  return signature;
}

std::filesystem::path default_tuning_path(const std::string& signature) {
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = std::filesystem::path(home) / ".cache";
  else
    base = std::filesystem::temp_directory_path();
  return base / "qforge" / "tuning" / (signature + ".json");
}

}  // namespace qforge
