// Calibration files (qforge calibrate): any bytes either open (header JSON, every site's
// statistics inside the file, checksums right) or throw qforge::Error naming the field.
// What opens is read through: every statistic of every site.
#include <cstddef>
#include <cstdint>
#include <string>

#include "calib/calibration_file.h"
#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = qforge::fuzz::write_input("input.qfcal", data, size);
  try {
    const qforge::CalibrationFile file = qforge::CalibrationFile::open(path);
    double sum = 0;
    for (const qforge::CalibrationSite& site : file.sites()) {
      for (float v : site.absmax) sum += v;
      for (double v : site.mean_abs) sum += v;
      for (double v : site.mean_sq) sum += v;
      for (double v : site.gram) sum += v;
      sum += site.outlier_ratio();
    }
    volatile double sink = sum;
    (void)sink;
  } catch (const qforge::Error&) {
  }
  return 0;
}
