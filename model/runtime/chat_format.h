// Chat formats: a conversation written as the text a chat-tuned model was trained on.
// The format comes from the file's `tokenizer.chat_template` (a Jinja template, recognised
// by the markers it writes, not run), else from the special tokens the vocabulary has.
//
//   llama3  <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>
//           <|start_header_id|>assistant<|end_header_id|>\n\n
//   chatml  <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n
//   llama2  [INST] <<SYS>>\nsystem\n<</SYS>>\n\nHi [/INST] reply </s><s>[INST] next [/INST]
//
// BOS is not written: the tokenizer adds it as the vocabulary asks. The special tokens are
// written as text and taken as tokens by Tokenizer::encode_prompt.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qforge {

class Tokenizer;

enum class ChatFormat { Llama2, Llama3, ChatMl };

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

std::string_view chat_format_name(ChatFormat format);
// "llama2", "llama3", "chatml"; nullopt for anything else.
std::optional<ChatFormat> chat_format_named(std::string_view name);
// The format a Jinja chat template writes, or nullopt when it is none of the three.
std::optional<ChatFormat> recognise_chat_template(std::string_view jinja);
// The format for a model: its template's, else llama3 / chatml when the vocabulary has
// their header tokens, else llama2.
ChatFormat chat_format_for(const std::optional<std::string>& chat_template,
                           const Tokenizer& tokenizer);

// The conversation's text; with add_generation_prompt, followed by the opening of the
// assistant's turn. Throws naming the message for a role other than system, user and
// assistant.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt);

}  // namespace qforge
