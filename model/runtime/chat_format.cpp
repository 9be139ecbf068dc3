#include "model/runtime/chat_format.h"

#include "jit/base/error.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Without leading and trailing white space, as Llama 3's template (`| trim`) writes it.
std::string trimmed(std::string_view text) {
  const std::string_view space = " \t\n\r\v\f";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(space) - first + 1));
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trimmed(m.content) +
           "<|eot_id|>";
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages)
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Llama 2: each user turn in [INST] ... [/INST], the system message folded into the
// first one, each answered turn closed with </s> and the next opened with <s>; contents
// stripped (`.strip()` in its template).
std::string render_llama2(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out, system;
  bool open_turn = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = m.content;
    } else if (m.role == "user") {
      if (open_turn) out += " [/INST]";
      if (!out.empty()) out += "<s>";
      out += "[INST] ";
      if (!system.empty()) out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      system.clear();
      out += trimmed(m.content);
      open_turn = true;
    } else {
      out += open_turn ? " [/INST] " : " ";
      out += trimmed(m.content) + " </s>";
      open_turn = false;
    }
  }
  if (open_turn) out += " [/INST]";
  (void)add_generation_prompt;  // the open [/INST] is the assistant's cue
  return out;
}

}  // namespace

std::string_view chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::Llama2:
      return "llama2";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::ChatMl:
      return "chatml";
  }
  return "?";
}

std::optional<ChatFormat> chat_format_named(std::string_view name) {
  for (ChatFormat f : {ChatFormat::Llama2, ChatFormat::Llama3, ChatFormat::ChatMl}) {
    if (name == chat_format_name(f)) return f;
  }
  return std::nullopt;
}

std::optional<ChatFormat> recognise_chat_template(std::string_view jinja) {
  if (contains(jinja, "<|start_header_id|>")) return ChatFormat::Llama3;
  if (contains(jinja, "<|im_start|>")) return ChatFormat::ChatMl;
  if (contains(jinja, "[INST]")) return ChatFormat::Llama2;
  return std::nullopt;
}

ChatFormat chat_format_for(const std::optional<std::string>& chat_template,
                           const Tokenizer& tokenizer) {
  if (chat_template) {
    if (const std::optional<ChatFormat> f = recognise_chat_template(*chat_template)) return *f;
  }
  const auto has_special = [&](std::string_view piece) {
    for (int id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.type(id) == TokenType::Control && tokenizer.piece(id) == piece) return true;
    }
    return false;
  };
  if (has_special("<|start_header_id|>")) return ChatFormat::Llama3;
  if (has_special("<|im_start|>")) return ChatFormat::ChatMl;
  return ChatFormat::Llama2;
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      fail("chat message ", i, ": role \"", role, "\" is not system, user or assistant");
  }
  switch (format) {
    case ChatFormat::Llama3:
      return render_llama3(messages, add_generation_prompt);
    case ChatFormat::ChatMl:
      return render_chatml(messages, add_generation_prompt);
    case ChatFormat::Llama2:
      break;
  }
  return render_llama2(messages, add_generation_prompt);
}

}  // namespace qforge
