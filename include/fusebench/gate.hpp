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

#include "fusebench/advise.hpp"

namespace fusebench::gate {

// Thrown for input the gate cannot judge: malformed JSON, wrong schema, non-finite numbers,
// reports from different devices. what() names the file and the field. The advisor's type: the
// gate and the advisor share one report reader (fusebench/report_document.hpp).
using InputError = advise::InputError;

// A speedup over the op's baseline variant with its 95% confidence interval (report fields
// `speedup`, `speedup_ci_low`, `speedup_ci_high`; the interleaved timing writes them).
struct SpeedupInterval {
  std::optional<double> speedup;  // the point estimate, when the entry has one
  double low = 0, high = 0;
};

// The 95% interval of an entry's central time, in ns (report fields time_median_ci_low/high).
struct TimeInterval {
  double low = 0, high = 0;
};

// One benchmark of a report, after folding repetitions and aggregates together.
struct Entry {
  std::string name;                           // run_name (name without aggregate suffix)
  double time_ns = 0;                         // central time: median aggregate, else median of reps
  std::optional<TimeInterval> time_interval;  // the median's 95% interval, when it brackets it
  std::optional<double> rel_noise;            // relative spread (CV) of the time, when measured
  std::string noise_source;                   // where rel_noise came from, for the table
  std::optional<int> noise_values;  // how many values rel_noise was computed over, when known
  int samples = 0;                  // iteration entries (repetitions) seen
  bool error = false;               // every repetition reported error_occurred
  std::string error_message;
  std::map<std::string, double> counters;  // numeric top-level keys of the first repetition
  std::optional<SpeedupInterval> speedup;  // of the first repetition, when it has an interval
  std::map<std::string, std::string> counters_unavailable;  // counter -> why, as the report says
  // Why its time and speedup are no evidence (the time and speedup rules skip it, saying so):
  // "contended" or "n < 6 (samples 2)", the shared contract of fusebench/evidence.hpp; empty when
  // it may be judged.
  std::string not_judged;
};

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

// The CPU GEMM libraries' thread count the report ran with (context.cpu_threads.threads, written
// by --cpu-threads), or nullopt when the report does not record one (a GPU backend, an older
// report, a multi-process run that leaves it to each rank).
std::optional<int> cpu_threads(const Report& report);

// The time threshold when --time-threshold is not given: kGpuTimeThreshold, or
// kCpuTimeThreshold when either report was measured on the CPU backend (docs/gate.md: two runs of
// one build on a shared CPU drifted up to 1.49x, far beyond their own intervals).
inline constexpr double kGpuTimeThreshold = 0.05;
inline constexpr double kCpuTimeThreshold = 0.50;
double default_time_threshold(const Report& baseline, const Report& current);

struct Options {
  // Relative change the time rule reports (5%); unset: default_time_threshold of the reports.
  std::optional<double> time_threshold;
  double noise_sigmas = 2.0;  // entries without a median interval: CVs per side of their interval
  double bytes_tolerance = 0.02;  // relative tolerance for measured byte counters (2%)
  double exact_tolerance =
      0.0;  // relative tolerance for exact counters (launches, kernels, model_*)
  bool allow_device_mismatch = false;
  bool allow_missing_counters = false;  // a counter in BASELINE absent in CURRENT: note, not fail
  bool ignore_time = false;  // counters only: no time or speedup rule (e.g. a shared, noisy runner)
  // Judge time, speedup and advice although the reports ran with different CPU thread counts.
  bool allow_thread_mismatch = false;
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
  double time_threshold = kGpuTimeThreshold;  // the threshold the time rule used
  std::string time_threshold_source;  // "--time-threshold", "the GPU default", "the CPU default"
  // Non-empty when the time, speedup and advice rules did not run: why (--ignore-time, or the
  // reports' CPU thread counts differ).
  std::string timing_off;
  std::vector<std::string> context_notes;  // how the reports' contexts differ (thread counts)
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

// The threshold the time rule used and where it came from, or why it did not run.
std::string time_rule_summary(const Result& result);

// Where the speedup rule applied and why not elsewhere, e.g. "applied to 3 entries." (console
// and Markdown).
std::string speedup_rule_summary(const Result& result);

void print_table(const Result& result, std::ostream& out, bool verbose);
void write_markdown(const Result& result, const Options& options, std::ostream& out);

// The whole command line; returns the exit status (0 pass, 1 regression, 2 unusable input).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace fusebench::gate
