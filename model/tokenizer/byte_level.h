// GPT-2's byte-level alphabet: every byte value is one printable code point, so a
// byte-level BPE vocabulary stores any byte string as text.
//
//   byte 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF  ->  the code point of the same value
//   the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in order  ->  U+0100, U+0101, ...
//   e.g. ' ' (0x20) -> U+0120 'Ġ', '\n' (0x0A) -> U+010A 'Ċ'
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qforge {

// Each byte of `bytes` as its code point, UTF-8 encoded.
std::string to_byte_level(std::string_view bytes);
// The inverse; nullopt when `text` holds a character outside the alphabet (or malformed
// UTF-8).
std::optional<std::string> from_byte_level(std::string_view text);

}  // namespace qforge
