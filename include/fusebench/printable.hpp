#pragma once
// Untrusted text (names and values from config.json, checkpoint headers, file names) made safe
// to print in a message: a NUL would cut the message where what() ends, control bytes would move
// the terminal's cursor, and invalid UTF-8 would reach the terminal raw. One rule for every
// message that echoes such text.
#include <string>
#include <string_view>

namespace fusebench {

// `text` on one line: control bytes (NUL, newline, ESC, DEL, C1 controls) and every byte that is
// not part of valid UTF-8 as \xNN; valid UTF-8 as is. Text longer than 300 bytes is cut, saying
// its length.
std::string printable(std::string_view text);

// printable(name) in single quotes, with the quote and backslash escaped too ('a\x27b').
std::string quote_name(std::string_view name);

}  // namespace fusebench
