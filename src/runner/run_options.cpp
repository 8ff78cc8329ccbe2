#include "run_options.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace fusebench::bench {

DtypeChoice::DtypeChoice(std::string value) : text(std::move(value)) {
  if (is_quant_spec(text)) {
    quant = parse_quant_spec(text);
    return;
  }
  try {
    plain = parse_dtype(text);
  } catch (const std::invalid_argument&) {
    // parse_dtype lists the plain dtypes only (fusebench-region's --dtype takes no others).
    throw std::invalid_argument("unknown dtype '" + text +
                                "' (valid: bf16, fp16, fp32, fp8, int8; fp8 and int8 take a "
                                "granularity, e.g. fp8:channel, docs/quant.md)");
  }
}

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
