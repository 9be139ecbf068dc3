// OpenBLAS for the calibrated methods (GPTQ's Cholesky factors, AWQ's and SmoothQuant's
// matrix products), opened the first time one of them runs.
//
// It is not linked at start-up: OpenBLAS's constructor starts a thread per core, and each
// maps a 128 MiB buffer, retrying for ever when an address-space limit (ulimit -v) leaves
// no room, so every qforge process, also one that never calibrates, would pay for it and
// could hang in it.
#pragma once

#include <cblas.h>

#include <cstddef>

namespace qforge {

struct BlasLibrary {
  decltype(&cblas_dgemm) dgemm;
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_dsymv) dsymv;
  decltype(&cblas_ddot) ddot;
  decltype(&openblas_set_num_threads) set_num_threads;
  // LAPACK's Fortran interface: the hidden trailing argument is the length of `uplo`.
  using Factor = void (*)(const char* uplo, const int* n, double* a, const int* lda, int* info,
                          std::size_t uplo_length);
  Factor dpotrf;
  using Invert = void (*)(const char* uplo, const char* diag, const int* n, double* a,
                          const int* lda, int* info, std::size_t uplo_length,
                          std::size_t diag_length);
  Invert dtrtri;  // the inverse of a triangular matrix
};

// The library, opened and its functions found on the first call (thread-safe). Throws
// qforge::Error naming the library and the missing symbol if it cannot be used.
const BlasLibrary& blas();

}  // namespace qforge
