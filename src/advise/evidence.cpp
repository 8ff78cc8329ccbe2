// The "not judged" contract (include/fusebench/evidence.hpp).
#include "fusebench/evidence.hpp"

#include <cstdio>

namespace fusebench::advise {

std::string NotJudged::label() const {
  switch (kind) {
    case Kind::kJudged:
      return "";
    case Kind::kContended:
      return "contended";
    case Kind::kFewValues:
      return "n < " + std::to_string(kMinIntervalValues);
  }
  return "";
}

std::string NotJudged::text() const {
  if (kind != Kind::kFewValues) return label();
  char value_text[32];
  std::snprintf(value_text, sizeof(value_text), "%.6g", value);
  return label() + " (" + key + " " + value_text + ")";
}

NotJudged not_judged(std::string_view timing_stop,
                     const std::vector<std::pair<std::string, std::optional<double>>>& counts) {
  NotJudged why;
  if (timing_stop == "contended") {
    why.kind = NotJudged::Kind::kContended;
    return why;
  }
  for (const auto& [key, count] : counts) {
    if (count && *count < kMinIntervalValues) {
      why.kind = NotJudged::Kind::kFewValues;
      why.key = key;
      why.value = *count;
      return why;
    }
  }
  return why;
}

}  // namespace fusebench::advise
