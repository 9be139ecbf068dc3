#include "serve/request_channel.h"

namespace qforge::serve {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "error";
}

void RequestChannel::push_text(std::string_view text) {
  if (text.empty()) return;
  {
    const std::lock_guard lock(mutex_);
    text_.append(text);
  }
  changed_.notify_all();
}

void RequestChannel::finish(const GenerationResult& result) {
  {
    const std::lock_guard lock(mutex_);
    result_ = result;
  }
  changed_.notify_all();
}

ChannelRead RequestChannel::wait_next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !text_.empty() || result_.has_value(); });
  ChannelRead read;
  read.text.swap(text_);
  read.result = result_;
  return read;
}

ChannelRead RequestChannel::wait_all() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return result_.has_value(); });
  ChannelRead read;
  read.text.swap(text_);
  read.result = result_;
  return read;
}

}  // namespace qforge::serve
