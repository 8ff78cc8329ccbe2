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

namespace {

// "auto", or a whole number in [1, max] written in at most `digits` digits; else throws naming
// the flag, the value and the valid ones (`what`: "threads", "blocks").
AutoOrCount parse_auto_or_count(const char* flag, const std::string& text, int max,
                                std::size_t digits, const char* what) {
  AutoOrCount v;
  v.text = text;
  if (text == "auto") return v;
  const bool whole =
      !text.empty() && text.size() <= digits &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int n = whole ? std::stoi(text) : 0;
  if (n < 1 || n > max) {
    throw std::invalid_argument(std::string(flag) + ": '" + text +
                                "' is invalid (auto, or a whole number of " + what + " 1.." +
                                std::to_string(max) + ")");
  }
  v.count = n;
  return v;
}

}  // namespace

CommChoice parse_comm(const std::string& text) {
  for (CommChoice c : {CommChoice::automatic, CommChoice::nccl, CommChoice::modelled,
                       CommChoice::inprocess, CommChoice::mpi}) {
    if (text == to_string(c)) return c;
  }
  throw std::invalid_argument("--comm: '" + text +
                              "' is invalid (valid: auto, nccl, modelled, inprocess, mpi)");
}

const char* to_string(CommChoice comm) {
  switch (comm) {
    case CommChoice::nccl:
      return "nccl";
    case CommChoice::modelled:
      return "modelled";
    case CommChoice::inprocess:
      return "inprocess";
    case CommChoice::mpi:
      return "mpi";
    case CommChoice::automatic:
      break;
  }
  return "auto";
}

AutoOrCount parse_timing_blocks(const std::string& text) {
  return parse_auto_or_count("--timing-blocks", text, 100, 3, "blocks");
}

AutoOrCount parse_cpu_threads(const std::string& text) {
  return parse_auto_or_count("--cpu-threads", text, 1024, 4, "threads");
}

}  // namespace fusebench::bench
