// llama2.c checkpoint reader: any bytes either open as a model (header, shared or separate
// classifier, every tensor inside the file) or throw qforge::Error. What opens has rows
// that decode.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"
#include "model/format/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = qforge::fuzz::write_input("input.bin", data, size);
  try {
    const qforge::ModelFile model = qforge::ModelFile::from_llama2c(path);
    std::vector<float> row;
    for (const qforge::TensorView& t : model.tensors()) {
      if (t.columns <= 0 || t.columns > 4096 || t.rows <= 0) continue;
      row.resize(static_cast<std::size_t>(t.columns));
      t.row_to_f32(t.rows - 1, row);
    }
  } catch (const qforge::Error&) {
  }
  return 0;
}
