// Calibration files (qforge calibrate): any bytes either open (header JSON, every site's
// statistics inside the file, checksums right) or throw qforge::Error naming the field.
// What opens is read through (every statistic of every site, each site found by name),
// and written again by CalibrationWriter: the copy opens to the same header and the same
// bits of every statistic.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "calib/calibration_file.h"
#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"

namespace {

template <typename T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// The file as CalibrationWriter writes it (sites of one token count only), reopened.
void check_rewrite(const qforge::CalibrationFile& file) {
  const auto& sites = file.sites();
  if (sites.empty()) return;
  for (const qforge::CalibrationSite& s : sites)
    if (s.count != sites[0].count) return;
  std::vector<qforge::CalibrationSiteSpec> specs;
  for (const qforge::CalibrationSite& s : sites) specs.push_back({s.name, s.k});
  const std::string copy = qforge::fuzz::input_path("copy.qfcal");
  {
    qforge::CalibrationWriter writer(copy, file.config(), file.source(), specs, sites[0].count);
    for (const qforge::CalibrationSite& s : sites) {
      qforge::SiteStatistics stats;
      stats.name = s.name;
      stats.k = s.k;
      stats.count = s.count;
      stats.absmax.assign(s.absmax.begin(), s.absmax.end());
      stats.mean_abs.assign(s.mean_abs.begin(), s.mean_abs.end());
      stats.mean_sq.assign(s.mean_sq.begin(), s.mean_sq.end());
      stats.gram.assign(s.gram.begin(), s.gram.end());
      writer.add(stats);
    }
    writer.commit();
  }
  const qforge::CalibrationFile again = qforge::CalibrationFile::open(copy);
  const qforge::CalibrationSource &a = file.source(), &b = again.source();
  if (a.model_file != b.model_file || a.text != b.text || a.samples != b.samples ||
      a.ctx != b.ctx || a.precision != b.precision || a.gram != b.gram ||
      again.sites().size() != sites.size())
    qforge::fuzz::property_failed("a rewritten calibration file has another header");
  bool fits = true;  // a file made for its own model's shape stays so
  try {
    file.check_model(file.config(), "the model");
  } catch (const qforge::Error&) {
    fits = false;
  }
  if (fits) try {
      again.check_model(file.config(), "the model");
    } catch (const qforge::Error&) {
      qforge::fuzz::property_failed("a rewritten calibration file fits another model");
    }
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const qforge::CalibrationSite &x = sites[i], &y = again.sites()[i];
    if (x.name != y.name || x.k != y.k || x.count != y.count || !same_bits(x.absmax, y.absmax) ||
        !same_bits(x.mean_abs, y.mean_abs) || !same_bits(x.mean_sq, y.mean_sq) ||
        !same_bits(x.gram, y.gram))
      qforge::fuzz::property_failed("a rewritten calibration file has other statistics");
  }
  std::filesystem::remove(copy);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = qforge::fuzz::write_input("input.qfcal", data, size);
  try {
    const qforge::CalibrationFile file = qforge::CalibrationFile::open(path);
    double sum = 0;
    for (const qforge::CalibrationSite& site : file.sites()) {
      if (file.site(site.name).name != site.name)
        qforge::fuzz::property_failed("a site is not found by its name");
      for (float v : site.absmax) sum += v;
      for (double v : site.mean_abs) sum += v;
      for (double v : site.mean_sq) sum += v;
      for (double v : site.gram) sum += v;
      sum += site.outlier_ratio();
    }
    volatile double sink = sum;
    (void)sink;
    try {
      file.site("no such site");
      qforge::fuzz::property_failed("an absent site was found");
    } catch (const qforge::Error&) {
    }
    check_rewrite(file);
  } catch (const qforge::Error&) {
  }
  return 0;
}
