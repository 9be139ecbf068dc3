// test_jit runs every kernel ISA: natively where the CPU has it, else under the
// instruction emulator. QFORGE_MAX_ISA pins the highest path as everywhere else.
#include <gtest/gtest.h>

#include "tests/support/emulated_isas.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  qforge::test::enable_emulated_isas();
  return RUN_ALL_TESTS();
}
