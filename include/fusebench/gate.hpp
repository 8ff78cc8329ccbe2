#pragma once
// The regression gate: compares two fusebench reports (Google Benchmark JSON) and decides
// pass / regression / unusable input. Depends on nlohmann_json only, so the fuzz targets and the
// gate binary link it without Google Benchmark or a BLAS. Rules are documented in docs/gate.md.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench::advise {
struct Table;
}

namespace fusebench::gate {

// Thrown for input the gate cannot judge: malformed JSON, wrong schema, non-finite numbers,
// reports from different devices. what() names the file and the field.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A speedup over the op's baseline variant with its 95% confidence interval (report fields
// `speedup`, `speedup_ci_low`, `speedup_ci_high`; the interleaved timing writes them).
struct SpeedupInterval {
  std::optional<double> speedup;  // the point estimate, when the entry has one
  double low = 0, high = 0;
};

// One benchmark of a report, after folding repetitions and aggregates together.
struct Entry {
  std::string name;                 // run_name (name without aggregate suffix)
  double time_ns = 0;               // central time: median aggregate, else median of reps
  std::optional<double> rel_noise;  // relative spread (CV) of the time, when measured
  std::string noise_source;         // where rel_noise came from, for the table
  int samples = 0;                  // iteration entries (repetitions) seen
  bool error = false;               // every repetition reported error_occurred
  std::string error_message;
  std::map<std::string, double> counters;  // numeric top-level keys of the first repetition
  std::optional<SpeedupInterval> speedup;  // of the first repetition, when it has an interval
  std::map<std::string, std::string> counters_unavailable;  // counter -> why, as the report says
  // Why its time and speedup are no evidence (the time and speedup rules skip it, saying so):
  // "contended" (timing_stop: contended), "n < 6" (a speedup on fewer than 6 pairs, or a
  // median of fewer than 6 samples: no 95% interval exists); empty when it may be judged.
  std::string not_judged;
};

// The fewest values a 95% interval of a median exists for (the order-statistic interval).
inline constexpr double kMinIntervalValues = 6;

struct Report {
  std::string file;            // for messages
  nlohmann::json context;      // as read
  std::vector<Entry> entries;  // in first-seen order
  const Entry* find(const std::string& name) const;
};

// Parses and validates a report; throws InputError naming `file` and the offending field.
Report parse_report(std::string_view text, const std::string& file);
Report load_report(const std::string& path);

// What identifies the measuring device: "cuda: NVIDIA H200" or "cpu: <cpu model>".
std::string device_identity(const Report& report);

struct Options {
  double time_threshold = 0.05;   // relative slowdown that may fail (5%)
  double noise_sigmas = 2.0;      // how many combined CVs a slowdown must also exceed
  double bytes_tolerance = 0.02;  // relative tolerance for measured byte counters (2%)
  double exact_tolerance =
      0.0;  // relative tolerance for exact counters (launches, kernels, model_*)
  bool allow_device_mismatch = false;
  bool allow_missing_counters = false;  // a counter in BASELINE absent in CURRENT: note, not fail
  bool ignore_time = false;  // counters only: no time or speedup rule (e.g. a shared, noisy runner)
  double advice_margin = 0.03;  // the advice rule's margin (fusebench-advise --margin)
};

// kLost: a speedup whose interval lies wholly below the baseline report's (the benefit was lost).
// kFlipped: the advice said `use: X` in the baseline and `use: Y` now at a token count both
// measured.
enum class Status {
  kPass,
  kFaster,
  kSlower,
  kChanged,
  kMissing,
  kNew,
  kError,
  kNote,
  kLost,
  kFlipped
};
const char* to_string(Status s);
bool is_failure(Status s);

struct Finding {
  Status status;
  std::string benchmark;
  std::string metric;  // "time", a counter name, or "" for whole-benchmark findings
  std::optional<double> baseline, current;
  std::string detail;  // the rule applied, e.g. "+7.1% > max(5%, noise 2.3%)"
};

// Where the speedup-interval rule applied and, where it could not, why (for the summaries).
struct SpeedupCoverage {
  int applied = 0;  // entries with an interval in both reports
  std::map<std::string, std::vector<std::string>> not_applied;  // why -> benchmarks
  std::string off;  // non-empty when the rule did not run at all: why
};

// What the advice rule compared (docs/gate.md, "The advice rule").
struct AdviceCoverage {
  int comparisons = 0;  // comparisons in both reports
  int points = 0;       // token counts both measured
  int flipped = 0, changed = 0;
  std::string off;  // non-empty when the rule did not run: why
};

struct Result {
  std::vector<Finding> findings;
  std::string baseline_device, current_device;
  int compared = 0;
  int not_judged = 0;  // benchmarks whose time and speedup were not judged (Entry::not_judged)
  SpeedupCoverage speedup;
  AdviceCoverage advice;
  bool failed() const;
};

// Kinds of counters. Everything else numeric (rates, ratios, tokens, tp, timing statistics) is
// informational and not gated.
bool is_exact_counter(const std::string& key);
bool is_bytes_counter(const std::string& key);

// Throws InputError on a device mismatch unless allowed.
Result compare(const Report& baseline, const Report& current, const Options& options);

// The advice rule: the two reports' dispatch tables (fusebench-advise, one report each) compared
// point by point; a `use:` that became another `use:` fails, any other change is a note.
void compare_advice(const advise::Table& baseline, const advise::Table& current, Result& result);
std::string advice_rule_summary(const Result& result);

// Where the speedup rule applied and why not elsewhere, e.g. "applied to 3 entries." (console
// and Markdown).
std::string speedup_rule_summary(const Result& result);

void print_table(const Result& result, std::ostream& out, bool verbose);
void write_markdown(const Result& result, const Options& options, std::ostream& out);

// The whole command line; returns the exit status (0 pass, 1 regression, 2 unusable input).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace fusebench::gate
