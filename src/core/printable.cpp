#include "fusebench/printable.hpp"

#include <cstddef>

namespace fusebench {
namespace {

// The length of the valid UTF-8 sequence at text[i] (1 to 4), or 0 when the bytes there are not
// one: a stray continuation byte, a truncated sequence, an overlong form, a surrogate or a code
// point past U+10FFFF.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the valid range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(k) < 0x80 || b(k) > 0xbf) return 0;
  }
  return n;
}

void hex_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

std::string escaped(std::string_view text, bool quoted) {
  constexpr std::size_t kMaxShown = 300;
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && i < kMaxShown) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    // U+0080..U+009F (C1 controls, 0xc2 0x80..0x9f) act on terminals as control bytes do.
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (n == 0 || c < 0x20 || c == 0x7f || (quoted && (c == '\'' || c == '\\'))) {
      hex_escape(out, c);
      ++i;
    } else if (c1) {
      hex_escape(out, c);
      hex_escape(out, static_cast<unsigned char>(text[i + 1]));
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (text.size() > i) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view text) { return escaped(text, false); }

std::string quote_name(std::string_view name) {
  std::string out = "'";  // appended, not "'" + ...: GCC 12's -Wrestrict misfires on that
  out += escaped(name, true);
  return out + "'";
}

}  // namespace fusebench
