// The C API's error channel: every entry point runs its body through guarded(), which
// turns an exception into the function's error value and a message for qf_last_error()
// (kept per thread, so threads never see each other's errors).
#pragma once

#include <exception>
#include <new>
#include <string>

namespace qforge::capi {

void set_last_error(std::string message);
void clear_last_error();

template <typename Result, typename Body>
Result guarded(Result on_error, Body&& body) noexcept {
  try {
    clear_last_error();
    return body();
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
  } catch (const std::exception& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error("unknown error");
  }
  return on_error;
}

}  // namespace qforge::capi
