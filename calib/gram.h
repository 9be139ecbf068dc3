// The input Gram matrix of a linear layer, G = sum over rows of x^T x (k x k), what GPTQ's
// Hessian is made of. Each call adds one chunk of rows:
//
//   rows added  --buffered up to kBatchRows-->  X (batch x k)
//   --oneDNN f32 matmuls-->  X^T X (k x k, f32: <= kBatchRows terms per entry), only the
//                            blocks on and above the diagonal:
//
//        k columns in blocks of kBlock           each block (a, b), a <= b:
//        [ D  U  U  U ]                            X[:, a]^T X[:, b]   (kBlock x kBlock)
//        [    D  U  U ]
//        [       D  U ]    (about half the multiply-adds of the whole product)
//        [          D ]
//   --added to-->  G (k x k, double, upper blocks; sum() mirrors the rest)
//
// so the long sum over all calibration tokens is in double and one batch's in f32, and
// the k x k double matrix is read and written once per kBatchRows rows, not per chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace qforge {

class GramAccumulator {
 public:
  explicit GramAccumulator(int k);
  ~GramAccumulator();
  GramAccumulator(GramAccumulator&&) noexcept;
  GramAccumulator& operator=(GramAccumulator&&) noexcept;

  static constexpr int kBatchRows = 2048;
  static constexpr int kBlock = 256;  // columns per block of the product

  void add(const float* x, int rows);  // rows x k, row-major
  int k() const { return k_; }
  // Row-major k x k, exactly symmetric: every row added so far.
  std::span<const double> sum();

 private:
  struct Matmul;
  int k_;
  std::vector<double> sum_;
  void flush();

  std::vector<float> batch_;  // up to kBatchRows rows not yet in sum_
  int batch_rows_ = 0;
  std::vector<float> product_;  // k x k, one batch's X^T X
  std::unique_ptr<Matmul> matmul_;
};

}  // namespace qforge
