// llama2.c tokenizer.bin loader: any bytes either load or throw qforge::Error. A loaded
// vocabulary encodes and decodes text (with byte fallback) without failing: every id it
// gives is inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = qforge::fuzz::write_input("tokenizer.bin", data, size);
  try {
    const qforge::Tokenizer tokenizer = qforge::Tokenizer::from_llama2c_file(path);
    for (const char* text : {"", "Once upon a time", " \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80 <s>"}) {
      const auto ids = tokenizer.encode(text, true, true, true);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= tokenizer.vocab_size())
          qforge::fuzz::property_failed("token id outside the vocabulary");
        tokenizer.decode(i > 0 ? ids[i - 1] : -1, ids[i]);
      }
    }
  } catch (const qforge::Error&) {
  }
  return 0;
}
