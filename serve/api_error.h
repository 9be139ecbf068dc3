// An error the API answers with instead of a result: the HTTP status and OpenAI's error
// object, {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <stdexcept>
#include <string>

namespace qforge::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, const std::string& message, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, ...
  std::string param;  // the request field at fault, or ""
  std::string code;   // model_not_found, context_length_exceeded, ... or ""
};

// A 400 invalid_request_error about `param`.
inline ApiError invalid_request(const std::string& param, const std::string& message,
                                std::string code = "") {
  return ApiError(400, "invalid_request_error", message, param, std::move(code));
}

}  // namespace qforge::serve
