// Installs a tuning database for the process before a model is loaded (kernels are
// generated at load time, with the blockings installed then):
//
//   file ""  -> the default one for this CPU ($XDG_CACHE_HOME/qforge/tuning/<signature>.json),
//               silently nothing when it does not exist
//   disabled -> analytic default blockings only
//
// An unreadable, foreign (another CPU signature), old (another format or generator version)
// or corrupt database is ignored with one warning line on stderr. Tuning changes which
// kernel blocking runs, never the results.
#pragma once

#include <cstddef>
#include <string>

namespace qforge {

struct TuningStatus {
  bool active = false;      // a database is installed
  std::string path;         // the database read or looked for ("" when disabled)
  std::size_t entries = 0;  // entries in it (all thread counts)
  std::string warning;      // the line printed on stderr, if one was
  int amx_min_m = 0;        // the AMX row threshold the database set (0: the default)
};

TuningStatus install_tuning_file(const std::string& file, bool disabled, int threads);

}  // namespace qforge
