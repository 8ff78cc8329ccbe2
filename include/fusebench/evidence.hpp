#pragma once
// The "not judged" contract, one implementation for the gate (time and speedup rules), the
// advisor (its evidence check) and, mirrored, scripts/fusebench_report.py's not_judged_reason
// (tests/advise/test_not_judged_contract.py runs both on the same entries): a figure is no
// evidence when its comparison group was contended (timing_stop "contended"), or when it rests on
// fewer values than a 95% interval of a median needs (the order-statistic interval).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusebench::advise {

// The fewest values (paired ratios, or samples of a time) a 95% interval of a median exists for.
inline constexpr int kMinIntervalValues = 6;

struct NotJudged {
  enum class Kind { kJudged, kContended, kFewValues };
  Kind kind = Kind::kJudged;
  std::string key;   // kFewValues: the count that is short ("speedup_pairs", "samples", "pairs")
  double value = 0;  // kFewValues: that count
  explicit operator bool() const { return kind != Kind::kJudged; }
  // The contract's label, as Python's not_judged_reason returns it: "contended", "n < 6", "".
  std::string label() const;
  // The label with the count that decided, e.g. "n < 6 (speedup_pairs 2)" (the gate's rows).
  std::string text() const;
};

// The first reason that applies: contended, then the first count below kMinIntervalValues.
// An absent count (nullopt) decides nothing.
NotJudged not_judged(std::string_view timing_stop,
                     const std::vector<std::pair<std::string, std::optional<double>>>& counts);

// A report entry's reason is ReportEntry::not_judged (fusebench/report_entry.hpp): its
// timing_stop, speedup_pairs and samples, as the shared reader read them.

}  // namespace fusebench::advise
