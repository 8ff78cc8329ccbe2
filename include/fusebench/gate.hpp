#pragma once
// The regression gate: compares two fusebench reports (Google Benchmark JSON) and decides
// pass / regression / unusable input. Depends on nlohmann_json only, so the fuzz targets and the
// gate binary link it without Google Benchmark or a BLAS. Rules are documented in docs/gate.md.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/advise.hpp"
#include "fusebench/identity.hpp"

namespace fusebench::gate {

// Thrown for input the gate cannot judge: malformed JSON, wrong schema, non-finite numbers,
// reports from different devices. what() names the file and the field. The advisor's type: the
// gate and the advisor share one report reader (fusebench/report_document.hpp).
using InputError = advise::InputError;

// The 95% interval of an entry's central time, in ns (report fields time_median_ci_low/high).
struct TimeInterval {
  double low = 0, high = 0;
};

// One benchmark of a report: its repetitions and aggregates (read by the shared reader,
// fusebench/report_entry.hpp) folded into one central time and its noise.
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
  // The fields the rules judge, as the shared reader read them: the first repetition that ran's
  // (counters, speedup, counters_unavailable, not_judged, accuracy, setup), with the mean
  // aggregate's counters and speedup where it has no counter (or there is no repetition).
  advise::ReportEntry fields;
  // The paired speedup with its 95% interval (speedup, speedup_ci_low/high), when it has both:
  // the speedup rule's input; nullptr otherwise.
  const advise::Ratio* speedup_interval() const;
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
// kCpuTimeThreshold when either report was measured on the CPU backend. The CPU figure is
// grounded in same-binary pairs measured on the suite's CPU host (docs/gate.md, "Thresholds"):
// above the largest drift seen beyond the ratio's own interval, below what a 1.3x slowdown of
// every entry leaves after its interval.
inline constexpr double kGpuTimeThreshold = 0.05;
inline constexpr double kCpuTimeThreshold = 0.15;
// The report-wide time rule (docs/gate.md, "Thresholds"): the geometric mean of every judged
// entry's time ratio, with the entries' intervals combined, against this threshold. On the CPU a
// uniform slowdown hides inside each entry's wide interval but not inside their mean; same-binary
// pairs there moved the mean by up to 6.5% beyond its interval.
inline constexpr double kCpuReportThreshold = 0.07;
double default_time_threshold(const Report& baseline, const Report& current);

// The gate's exit codes (docs/gate.md, "Verdicts"): PASS, FAIL (a regression), unusable input or
// a refused comparison (identity mismatch, an output that is an input), NOT JUDGED.
inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUnusable = 2;
inline constexpr int kExitNotJudged = 3;

struct Options {
  // Relative change the time rule reports (5%); unset: default_time_threshold of the reports.
  std::optional<double> time_threshold;
  double noise_sigmas = 2.0;  // entries without a median interval: CVs per side of their interval
  double bytes_tolerance = 0.02;  // relative tolerance for measured byte counters (2%)
  double exact_tolerance =
      0.0;  // relative tolerance for exact counters (launches, kernels, model_*)
  bool allow_device_mismatch = false;    // the device and backend identity fields may differ
  std::set<std::string> allow_identity;  // identity fields that may differ (timing fields)
  bool allow_unjudged = false;           // NOT JUDGED exits 0 (said in the summary)
  bool allow_new = false;                // entries the baseline lacks are notes, not failures
  bool allow_missing_counters = false;   // a counter in BASELINE absent in CURRENT: note, not fail
  bool ignore_time = false;  // counters only: no time or speedup rule (e.g. a shared, noisy runner)
  // Judge time, speedup and advice although the reports ran with different CPU thread counts.
  bool allow_thread_mismatch = false;
  double advice_margin = 0.03;  // the advice rule's margin (fusebench-advise --margin)
  // The accuracy rule: a quant_error (or quant_error_vs_split) of a shard that grew by more than
  // this fraction of the baseline's, and by more than kQuantErrorFloor, fails.
  double quant_error_threshold = 0.10;
};

// The accuracy rule's absolute floor: a growth this small is rounding of the fp32 accumulation
// (about 1e-7 relative), not a change of quantization (errors of 1e-3 .. 1e-1); it lets an exact
// fusion's quant_error_vs_split of 0 move to 1e-6 without failing.
inline constexpr double kQuantErrorFloor = 1e-4;

// The entry identity fields beyond the name, grouped as --allow-identity-mismatch names them:
// "routing" (moe.routing.*), "quant" (quant.spec, emulated).
const std::vector<std::string>& entry_setup_groups();

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
  kFlipped,
  kUncovered,    // an entry the baseline lacks: ungated, fails unless --allow-new ("NEW")
  kLessAccurate  // a quant_error that grew beyond the accuracy threshold ("ACCURACY")
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

// What the accuracy rule compared (docs/gate.md, "The accuracy rule").
struct AccuracyCoverage {
  int entries = 0;  // entries with quant_error in both reports
  int values = 0;   // shard values compared (quant_error and quant_error_vs_split)
  int grew = 0;     // of which failed
  double threshold = 0.10;
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

enum class Verdict { kPass, kFail, kNotJudged };
const char* to_string(Verdict v);

struct Result {
  std::vector<Finding> findings;
  std::vector<advise::IdentityField> identity;  // the two reports' machine and build
  // Why the gate did not judge everything (thread mismatch, partial run, no baseline, entries
  // contended or with fewer than 6 values, --ignore-time): a verdict of NOT JUDGED when non-empty.
  std::vector<std::string> unjudged;
  bool allow_unjudged = false;     // --allow-unjudged: NOT JUDGED exits 0
  std::vector<std::string> hints;  // e.g. why names are missing (naming versions differ)
  std::string baseline_device, current_device;
  double time_threshold = kGpuTimeThreshold;  // the threshold the time rule used
  std::string time_threshold_source;  // "--time-threshold", "the GPU default", "the CPU default"
  double report_threshold = kGpuTimeThreshold;  // the report-wide time rule's
  // Non-empty when the time, speedup and advice rules did not run: why (--ignore-time, or the
  // reports' CPU thread counts differ).
  std::string timing_off;
  std::vector<std::string> context_notes;  // how the reports' contexts differ (thread counts)
  int compared = 0;
  int not_judged = 0;  // benchmarks whose time and speedup were not judged (Entry::not_judged)
  SpeedupCoverage speedup;
  AdviceCoverage advice;
  AccuracyCoverage accuracy;
  bool failed() const;
  Verdict verdict() const;
  int exit_code() const;             // kExitPass, kExitFail or kExitNotJudged (0 when allowed)
  std::string verdict_text() const;  // "PASS", "FAIL", "NOT JUDGED (...)"
};

// The verdict of a run without a baseline (no --require-baseline): NOT JUDGED, saying where the
// baseline was looked for.
Result no_baseline_result(const std::string& baseline_path, const Report& current,
                          const Options& options);

// Kinds of counters. Everything else numeric (rates, ratios, tokens, tp, timing statistics) is
// informational and not gated.
bool is_exact_counter(const std::string& key);
bool is_bytes_counter(const std::string& key);

// Throws InputError naming the field on an identity mismatch that changes timing (device,
// backend, cores, driver, CUDA, cuBLAS, NCCL, oneDNN, OpenBLAS, build type) unless allowed.
Result compare(const Report& baseline, const Report& current, const Options& options);

// The identity rule: every field of advise::compare_identity; throws InputError
// "FIELD mismatch: ..." for a timing field that differs unless allowed; returns the fields.
std::vector<advise::IdentityField> check_identity(const Report& baseline, const Report& current,
                                                  const Options& options);

// Names: " (renamed? ...)" naming the current entry that has the missing one's op, variant,
// model, tokens, dtype and tp, when exactly one does; "" otherwise.
std::string rename_hint(const std::string& missing, const Report& baseline, const Report& current);
// Why entries are MISSING and NEW together: the naming and suite versions of the two reports.
std::vector<std::string> naming_hints(const Report& baseline, const Report& current,
                                      const Result& result);

// The advice rule: the two reports' dispatch tables (fusebench-advise, one report each) compared
// point by point; a `use:` that became another `use:` fails, any other change is a note.
void compare_advice(const advise::Table& baseline, const advise::Table& current, Result& result);
std::string advice_rule_summary(const Result& result);

// The accuracy rule for one entry in both reports: each shard's quant_error and
// quant_error_vs_split against the baseline's (docs/gate.md); findings and coverage into result.
void compare_accuracy(const Entry& baseline, const Entry& current, const Options& options,
                      Result& result);
std::string accuracy_rule_summary(const Result& result);
// The identity of one entry beyond its name (moe routing, quant spec): throws InputError naming
// the entry and the field when they differ, unless the field's group is allowed
// (--allow-identity-mismatch=routing|quant), then a note.
void check_entry_setup(const Entry& baseline, const Entry& current, const Report& baseline_report,
                       const Report& current_report, const Options& options, Result& result);

// The threshold the time rule used and where it came from, or why it did not run.
std::string time_rule_summary(const Result& result);

// Where the speedup rule applied and why not elsewhere, e.g. "applied to 3 entries." (console
// and Markdown).
std::string speedup_rule_summary(const Result& result);

void print_table(const Result& result, std::ostream& out, bool verbose);
void write_markdown(const Result& result, const Options& options, std::ostream& out);

// The whole command line; returns the exit status (kExitPass, kExitFail, kExitUnusable,
// kExitNotJudged).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace fusebench::gate
