// The oneDNN baseline: u8 x s8 -> f32 matmul with per-output-channel scales (the int8
// linear layer oneDNN users run), weights in oneDNN's preferred blocked format, with
// `copies` independent weight buffers so decode-size calls can stream from DRAM.
#pragma once

#include <cstdint>
#include <memory>

namespace qforge::bench {

class OnednnInt8Matmul {
 public:
  OnednnInt8Matmul(std::int64_t m, std::int64_t n, std::int64_t k, int copies);
  ~OnednnInt8Matmul();
  // dst (M x N f32) = (src (M x K u8) x weights[copy]^T) * scales
  void run(int copy, const std::uint8_t* src, float* dst);
  std::int64_t weight_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// oneDNN's OpenMP thread count.
void set_onednn_threads(int threads);

}  // namespace qforge::bench
