#include "run_options.hpp"

#include <algorithm>

namespace fusebench::bench {

std::optional<std::size_t> parse_timing_blocks(const std::string& text) {
  if (text.empty() || text.size() > 3 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int n = std::stoi(text);
  if (n < 1 || n > 100) return std::nullopt;
  return static_cast<std::size_t>(n);
}

std::optional<int> parse_cpu_threads(const std::string& text) {
  if (text.empty() || text.size() > 4 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int n = std::stoi(text);
  if (n < 1 || n > 1024) return std::nullopt;
  return n;
}

}  // namespace fusebench::bench
