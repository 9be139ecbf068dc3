#include "calib/blas_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "jit/base/error.h"

namespace qforge {

namespace {

constexpr const char* kLibrary = "libopenblas.so.0";

template <typename Function>
void find(void* library, const char* name, Function& out) {
  void* symbol = ::dlsym(library, name);
  QF_REQUIRE(symbol != nullptr, kLibrary, ": has no function ", name,
             " (the calibrated methods need OpenBLAS with LAPACK)");
  out = reinterpret_cast<Function>(symbol);
}

BlasLibrary open_blas() {
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    fail(kLibrary, ": cannot be loaded (", why ? why : "unknown reason",
         "); GPTQ, AWQ and SmoothQuant need OpenBLAS (Debian: libopenblas0)");
  }
  // Kept open for the life of the process.
  BlasLibrary blas{};
  find(library, "cblas_dgemm", blas.dgemm);
  find(library, "cblas_sgemm", blas.sgemm);
  find(library, "cblas_dsymv", blas.dsymv);
  find(library, "cblas_ddot", blas.ddot);
  find(library, "openblas_set_num_threads", blas.set_num_threads);
  find(library, "dpotrf_", blas.dpotrf);
  find(library, "dtrtri_", blas.dtrtri);
  return blas;
}

}  // namespace

const BlasLibrary& blas() {
  static std::once_flag once;
  static BlasLibrary library;
  static std::string error;
  std::call_once(once, [] {
    try {
      library = open_blas();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  QF_REQUIRE(error.empty(), error);
  return library;
}

}  // namespace qforge
