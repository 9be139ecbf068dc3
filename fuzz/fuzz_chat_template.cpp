// Chat templates (a file's tokenizer.chat_template: any text) and conversations.
// Recognition takes any text; a conversation renders in every format, holding each
// message's content in order, or is refused (an unknown role) with a qforge::Error.
//
//   input = template \0 message \0 message ...     a message's first byte picks its role
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"
#include "model/runtime/chat_format.h"
#include "model/tokenizer/tokenizer.h"

namespace {

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\0', start)) != std::string_view::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

std::string trimmed(std::string_view text) {
  const std::string_view space = " \t\n\r\v\f";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(space) - first + 1));
}

// chat_format_for: a recognised template decides; otherwise the vocabulary's control
// tokens (here the messages' texts, distinct ones) do, Llama 2 when none is known.
void check_format_for(const std::vector<std::string_view>& parts,
                      const std::optional<qforge::ChatFormat>& recognised) {
  qforge::TokenizerVocabulary v;
  for (const char* piece : {"<unk>", "<s>", "</s>"}) {
    v.pieces.emplace_back(piece);
    v.types.push_back(qforge::TokenType::Control);
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string piece(parts[i]);
    if (piece.empty() || std::find(v.pieces.begin(), v.pieces.end(), piece) != v.pieces.end())
      continue;
    v.pieces.push_back(piece);
    v.types.push_back(qforge::TokenType::Control);
  }
  v.scores.assign(v.pieces.size(), 0.f);
  const auto has = [&](const char* piece) {
    return std::find(v.pieces.begin(), v.pieces.end(), piece) != v.pieces.end();
  };
  const qforge::ChatFormat want = recognised                   ? *recognised
                                  : has("<|start_header_id|>") ? qforge::ChatFormat::Llama3
                                  : has("<|im_start|>")        ? qforge::ChatFormat::ChatMl
                                                               : qforge::ChatFormat::Llama2;
  try {
    const qforge::Tokenizer tokenizer(std::move(v), "fuzz vocabulary");
    const std::optional<std::string> chat_template =
        parts[0].empty() ? std::nullopt : std::optional<std::string>(parts[0]);
    if (qforge::chat_format_for(chat_template, tokenizer) != want)
      qforge::fuzz::property_failed("chat_format_for chose another format");
  } catch (const qforge::Error&) {  // a vocabulary the tokenizer refuses
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using qforge::ChatFormat;
  const std::vector<std::string_view> parts =
      split(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::optional<ChatFormat> recognised = qforge::recognise_chat_template(parts[0]);
  if (recognised && qforge::chat_format_named(qforge::chat_format_name(*recognised)) != recognised)
    qforge::fuzz::property_failed("a recognised format's name does not name it");

  if (qforge::chat_format_named(parts[0]) &&
      qforge::chat_format_name(*qforge::chat_format_named(parts[0])) != parts[0])
    qforge::fuzz::property_failed("a format name names another format");
  check_format_for(parts, recognised);

  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  std::vector<qforge::ChatMessage> messages;
  bool unknown_role = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    const int role = part.empty() ? 1 : static_cast<unsigned char>(part[0]) % 4;
    unknown_role |= role == 3;
    messages.push_back({kRoles[role], std::string(part.empty() ? part : part.substr(1))});
  }
  for (const ChatFormat format : {ChatFormat::Llama2, ChatFormat::Llama3, ChatFormat::ChatMl}) {
    std::string text;
    try {
      text = qforge::render_chat(format, messages, true);
    } catch (const qforge::Error&) {
      if (!unknown_role) qforge::fuzz::property_failed("a conversation of known roles refused");
      continue;
    }
    if (unknown_role) qforge::fuzz::property_failed("an unknown role rendered");
    // Every content in order (Llama 2 folds a system message into the next user turn and
    // drops one no user turn follows; Llama 2 and 3 trim contents, as their templates do).
    std::size_t at = 0;
    for (const qforge::ChatMessage& m : messages) {
      if (format == ChatFormat::Llama2 && m.role == "system") continue;
      const std::string piece = format == ChatFormat::ChatMl ? m.content : trimmed(m.content);
      const std::size_t found = text.find(piece, at);
      if (found == std::string::npos)
        qforge::fuzz::property_failed("a message's content is missing");
      at = found + piece.size();
    }
  }
  return 0;
}
