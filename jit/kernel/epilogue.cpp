#include "jit/kernel/epilogue.h"

namespace qforge {

std::string epilogue_name(const Epilogue& e) {
  std::string name = "deq";
  if (e.bias) name += "-bias";
  if (e.swiglu) name += "-swiglu";
  if (e.residual) name += "-res";
  switch (e.output) {
    case OutputKind::f32:
      return name + "-f32";
    case OutputKind::u8:
      return name + "-u8";
    case OutputKind::group_sums:
      return name + "-sums";
  }
  return name;
}

}  // namespace qforge
