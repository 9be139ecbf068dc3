// The server's request bodies: any bytes, for both endpoints, either parse or throw
// ApiError with status 400 and a message; never another exception or a crash. What
// parses has its values in range.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_input_file.h"
#include "serve/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const qforge::serve::Endpoint endpoint :
       {qforge::serve::Endpoint::completions, qforge::serve::Endpoint::chat}) {
    try {
      const qforge::serve::OpenAiRequest r = qforge::serve::parse_openai_request(body, endpoint);
      if (r.max_tokens < 0 || !(r.temperature >= 0) || !(r.top_p > 0 && r.top_p <= 1) ||
          r.top_k < 0)
        qforge::fuzz::property_failed("a value out of range was accepted");
    } catch (const qforge::serve::ApiError& e) {
      if (e.status != 400 || std::string_view(e.what()).empty())
        qforge::fuzz::property_failed("a refusal other than 400 with a message");
    }
  }
  return 0;
}
