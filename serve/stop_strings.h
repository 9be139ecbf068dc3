// OpenAI's `stop`: generation ends where the text first contains one of the stop strings,
// and neither the stop string nor anything after it is returned. Text that could still
// become a stop string is held back until it cannot:
//
//   stop {"\n\n"}:   push("Hi.\n") -> "Hi."   (held "\n")
//                    push("\nBye") -> ""      stopped: "\n\n" found; nothing after it
//   finish()         -> what is still held (generation ended another way)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qforge::serve {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // The text that is final now; after a stop string was found, nothing more.
  std::string push(std::string_view text);
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace qforge::serve
