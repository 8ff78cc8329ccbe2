// The gate's rules (docs/gate.md): exact counters must match, byte counters within a tolerance,
// time fails only when the ratio current / baseline and its whole 95% interval lie above
// 1 + threshold, and a speedup fails when its interval lies wholly below the baseline report's.
#include <cmath>
#include <cstdio>
#include <set>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"

namespace fusebench::gate {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", 100.0 * fraction);
  return buf;
}

std::string plain_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * fraction);
  return buf;
}

std::string format_value(const std::string& metric, std::optional<double> v) {
  if (!v) return "-";
  char buf[48];
  if (metric == "time") {
    // Times are held in ns; microseconds read best for GEMMs of 1 us .. 10 ms.
    std::snprintf(buf, sizeof(buf), "%.3f us", *v / 1e3);
  } else if (metric == "speedup") {
    std::snprintf(buf, sizeof(buf), "%.3fx", *v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.6g", *v);
  }
  return buf;
}

std::string interval(const advise::Ratio& s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%.3f, %.3f]", s.low.value_or(0), s.high.value_or(0));
  return buf;
}

std::string ratio_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

// The spread of one entry's central time on a log scale, below and above it (a 95% interval is
// exp(-below) .. exp(+above) times the time), and where it came from.
struct LogSpread {
  double below = 0, above = 0;
  std::string source;
};

LogSpread log_spread(const Entry& e, double noise_sigmas) {
  if (e.time_interval && e.time_ns > 0 && e.time_interval->low > 0) {
    return {std::log(e.time_ns / e.time_interval->low), std::log(e.time_interval->high / e.time_ns),
            "median 95% interval"};
  }
  if (e.rel_noise) {
    // No interval of the median: K CVs of the values, over sqrt(n) when n is known (the standard
    // error of a median of n values is sqrt(pi/2) CV / sqrt(n) for normal noise); with n unknown
    // the CV of one value, which is conservative.
    char buf[96];
    double h = noise_sigmas * *e.rel_noise;
    if (e.noise_values && *e.noise_values > 0) {
      h *= std::sqrt(std::acos(-1.0) / 2) / std::sqrt(static_cast<double>(*e.noise_values));
      std::snprintf(buf, sizeof(buf), "%g x %s %.1f%% x 1.25 / sqrt(%d)", noise_sigmas,
                    e.noise_source.c_str(), 100 * *e.rel_noise, *e.noise_values);
    } else {
      std::snprintf(buf, sizeof(buf), "%g x %s %.1f%%", noise_sigmas, e.noise_source.c_str(),
                    100 * *e.rel_noise);
    }
    return {h, h, buf};
  }
  return {0, 0, "noise unmeasured"};
}

// The time rule: the ratio current / baseline with its 95% interval (the two entries' spreads
// added in quadrature on the log scale); a change is reported only when the whole interval lies
// beyond the threshold, so neither run's noise nor the allowance for drift between runs (the
// threshold, which no interval within one run sees) makes a verdict.
Finding time_finding(const Entry& base, const Entry& cur, double threshold, double noise_sigmas) {
  const double ratio = cur.time_ns / base.time_ns;
  const LogSpread b = log_spread(base, noise_sigmas), c = log_spread(cur, noise_sigmas);
  const double low = ratio * std::exp(-std::hypot(c.below, b.above));
  const double high = ratio * std::exp(std::hypot(c.above, b.below));
  Status s = Status::kPass;
  std::string verdict;
  if (low > 1 + threshold) {
    s = Status::kSlower;
    verdict = "wholly above ";
  } else if (high < 1 / (1 + threshold)) {
    s = Status::kFaster;
    verdict = "wholly below ";
  } else {
    verdict = "overlaps ";
  }
  std::string detail = percent(ratio - 1) + ": ratio " + ratio_text(ratio) + " [" +
                       ratio_text(low) + ", " + ratio_text(high) + "] " + verdict + "[" +
                       ratio_text(1 / (1 + threshold)) + ", " + ratio_text(1 + threshold) +
                       "] (threshold " + plain_percent(threshold) + "; baseline " + b.source +
                       ", current " + c.source + ")";
  return {s, base.name, "time", base.time_ns, cur.time_ns, detail};
}

// The report-wide time rule: the geometric mean of the judged entries' time ratios, its 95%
// interval the entries' log half-widths added in quadrature over their count (entries measured
// apart are independent), SLOWER when wholly above 1 + report threshold. A uniform slowdown is
// caught here although each entry's own interval is too wide to show it.
void add_report_wide(const std::vector<double>& logs, const std::vector<double>& widths,
                     Result& r) {
  double sum = 0, squares = 0;
  for (std::size_t i = 0; i < logs.size(); ++i) sum += logs[i], squares += widths[i] * widths[i];
  const double n = static_cast<double>(logs.size());
  const double mean = sum / n, half = std::sqrt(squares) / n;
  const double ratio = std::exp(mean), low = std::exp(mean - half), high = std::exp(mean + half);
  const double t = r.report_threshold;
  Status s = Status::kPass;
  std::string verdict = "overlaps ";
  if (low > 1 + t) {
    s = Status::kSlower;
    verdict = "wholly above ";
  } else if (high < 1 / (1 + t)) {
    s = Status::kFaster;
    verdict = "wholly below ";
  }
  r.findings.push_back({s, "(all " + std::to_string(logs.size()) + " judged entries)", "time",
                        std::nullopt, std::nullopt,
                        percent(ratio - 1) + ": geometric mean ratio " + ratio_text(ratio) + " [" +
                            ratio_text(low) + ", " + ratio_text(high) + "] " + verdict + "[" +
                            ratio_text(1 / (1 + t)) + ", " + ratio_text(1 + t) +
                            "] (report-wide threshold " + plain_percent(t) + ")"});
}

// What one side of a comparison offers the speedup rule, for the summary's "why not".
std::string speedup_state(const Entry& e) {
  if (e.speedup_interval()) return "an interval";
  if (e.fields.counters.count("speedup")) return "a speedup without speedup_ci_low/high";
  return "no speedup";
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::kPass:
      return "ok";
    case Status::kFaster:
      return "FASTER";
    case Status::kSlower:
      return "SLOWER";
    case Status::kChanged:
      return "CHANGED";
    case Status::kMissing:
      return "MISSING";
    case Status::kNew:
      return "new";
    case Status::kError:
      return "ERROR";
    case Status::kNote:
      return "note";
    case Status::kLost:
      return "LOST";
    case Status::kFlipped:
      return "FLIPPED";
    case Status::kUncovered:
      return "NEW";
    case Status::kLessAccurate:
      return "ACCURACY";
  }
  return "?";
}

bool is_failure(Status s) {
  return s == Status::kSlower || s == Status::kChanged || s == Status::kMissing ||
         s == Status::kError || s == Status::kLost || s == Status::kFlipped ||
         s == Status::kUncovered || s == Status::kLessAccurate;
}

bool Result::failed() const {
  for (const auto& f : findings) {
    if (is_failure(f.status)) return true;
  }
  return false;
}

bool is_exact_counter(const std::string& key) {
  // Counts of things that ran, and the cost model's deterministic figures: any change means the
  // benchmark or the library changed, so the baseline must be updated on purpose.
  static const std::set<std::string> exact = {"kernels", "memcpys", "memsets", "model_flops",
                                              "model_bytes"};
  return exact.count(key) > 0 || ends_with(key, "launches");
}

bool is_bytes_counter(const std::string& key) {
  return ends_with(key, "_bytes") && key.rfind("model_", 0) != 0;
}

std::string device_identity(const Report& report) {
  // One definition for the gate and the advisor: they must agree on what one device is.
  return advise::device_identity(report.context);
}

std::optional<int> cpu_threads(const Report& report) {
  const auto policy = report.context.find("cpu_threads");
  if (policy == report.context.end() || !policy->is_object()) return std::nullopt;
  const auto threads = policy->find("threads");
  if (threads == policy->end() || !threads->is_number_integer()) return std::nullopt;
  return threads->get<int>();
}

double default_time_threshold(const Report& baseline, const Report& current) {
  for (const Report* r : {&baseline, &current}) {
    const auto backend = r->context.find("backend");
    if (backend != r->context.end() && backend->is_string() && *backend == "cpu")
      return kCpuTimeThreshold;
  }
  return kGpuTimeThreshold;
}

namespace {

// The CPU thread counts of the two reports: a note when they differ or only one records its
// count; when they differ, the timing rules are off unless allowed (docs/gate.md, "Context").
void compare_threads(const Report& baseline, const Report& current, const Options& o, Result& r) {
  const auto b = cpu_threads(baseline), c = cpu_threads(current);
  auto reason = [](const Report& report) {
    const auto policy = report.context.find("cpu_threads");
    const auto why = policy->find("reason");
    return why != policy->end() && why->is_string() ? " (" + why->get<std::string>() + ")"
                                                    : std::string();
  };
  if (b && c && *b != *c) {
    r.context_notes.push_back("CPU threads differ: baseline " + std::to_string(*b) +
                              reason(baseline) + ", current " + std::to_string(*c) +
                              reason(current) + " (context.cpu_threads, --cpu-threads)");
    if (!o.allow_thread_mismatch && r.timing_off.empty()) {
      r.timing_off = "the reports ran with different CPU thread counts (baseline " +
                     std::to_string(*b) + ", current " + std::to_string(*c) +
                     "): times are not comparable; rerun with the same --cpu-threads=N, or pass "
                     "--allow-thread-mismatch";
    }
  } else if (b.has_value() != c.has_value()) {
    r.context_notes.push_back(std::string(b ? "current" : "baseline") +
                              " records no CPU thread count (context.cpu_threads.threads), " +
                              (b ? "baseline " : "current ") + std::to_string(b ? *b : *c) +
                              ": the thread counts could not be compared");
  }
}

// A report written by a run that did not finish (context.interrupted, src/runner/interrupt.hpp):
// its entries are measurements like any other, but the run is partial, which the gate says
// (a current report's absent entries fail as missing).
void note_interrupted(const Report& report, const char* which, Result& r) {
  const auto it = report.context.find("interrupted");
  if (it == report.context.end() || !it->is_boolean() || !it->get<bool>()) return;
  const auto note = report.context.find("interrupted_note");
  const std::string text =
      std::string(which) + " report is partial (context.interrupted" +
      (note != report.context.end() && note->is_string() ? ": " + note->get<std::string>()
                                                         : std::string()) +
      ")";
  r.context_notes.push_back(text);
  // A partial run never passes as a complete one (docs/gate.md).
  r.unjudged.push_back(text);
}

// The run-wide settings of a comparison: identity, thresholds, threads, interrupted runs.
Result start_result(const Report& baseline, const Report& current, const Options& o) {
  Result r;
  r.baseline_device = device_identity(baseline);
  r.current_device = device_identity(current);
  r.allow_unjudged = o.allow_unjudged;
  r.identity = check_identity(baseline, current, o);
  if (o.time_threshold) {
    r.time_threshold = *o.time_threshold;
    r.time_threshold_source = "--time-threshold";
  } else {
    r.time_threshold = default_time_threshold(baseline, current);
    r.time_threshold_source =
        r.time_threshold == kCpuTimeThreshold ? "the CPU default" : "the GPU default";
  }
  r.report_threshold = r.time_threshold;
  if (!o.time_threshold && r.time_threshold == kCpuTimeThreshold) {
    r.report_threshold = kCpuReportThreshold;
  }
  if (o.ignore_time) r.timing_off = "--ignore-time (counters only)";
  compare_threads(baseline, current, o, r);
  note_interrupted(baseline, "the baseline", r);
  note_interrupted(current, "the current", r);
  if (!r.timing_off.empty())
    r.unjudged.push_back("time, speedup and advice rules off: " + r.timing_off);
  return r;
}

void add_finding(Result& r, Status s, const std::string& bench, const std::string& metric,
                 std::optional<double> b, std::optional<double> c, std::string detail) {
  r.findings.push_back({s, bench, metric, b, c, std::move(detail)});
}

// A failed fixture on either side: a finding, and nothing else of the entry is compared.
bool compare_errors(const Entry& base, const Entry& cur, Result& r) {
  if (!base.error && !cur.error) return false;
  if (base.error && cur.error) {
    add_finding(r, Status::kNote, base.name, "", std::nullopt, std::nullopt,
                "error in both: " + cur.error_message);
  } else if (cur.error) {
    add_finding(r, Status::kError, base.name, "", std::nullopt, std::nullopt,
                "current run failed: " + cur.error_message);
  } else {
    add_finding(r, Status::kNote, base.name, "", std::nullopt, std::nullopt,
                "failed in baseline, runs now");
  }
  return true;
}

// Why an entry's time and speedup are not judged ("" when they are): contended or few samples
// on either side, or (a multi-process CPU run records its threads per entry, each rank's share)
// the threads per rank differ, the same rule as the context's count, entry by entry.
std::string unjudged_reason(const Entry& base, const Entry& cur, const Options& o) {
  if (cur.fields.not_judged) return cur.fields.not_judged.text() + " (current)";
  if (base.fields.not_judged) return base.fields.not_judged.text() + " (baseline)";
  const auto bt = base.fields.counters.find("cpu_threads_per_rank"),
             ct = cur.fields.counters.find("cpu_threads_per_rank");
  if (!o.allow_thread_mismatch && bt != base.fields.counters.end() &&
      ct != cur.fields.counters.end() && bt->second != ct->second) {
    return "CPU threads per rank differ (baseline " + format_value("", bt->second) + ", current " +
           format_value("", ct->second) + "; --allow-thread-mismatch)";
  }
  return {};
}

// The fusion benefit: a speedup is paired within one run, so drift between the two runs
// cancels; only intervals that do not overlap say it changed.
void compare_speedup(const Entry& base, const Entry& cur, Result& r) {
  if (base.speedup_interval() && cur.speedup_interval()) {
    ++r.speedup.applied;
    const advise::Ratio &b = *base.speedup_interval(), &c = *cur.speedup_interval();
    std::string detail = interval(c) + " vs baseline " + interval(b);
    Status s = Status::kPass;
    if (*c.high < *b.low) {
      s = Status::kLost;
      detail += ": wholly below (the speedup was lost)";
    } else if (*c.low > *b.high) {
      s = Status::kFaster;
      detail += ": wholly above";
    } else {
      detail += ": overlap";
    }
    add_finding(r, s, base.name, "speedup", b.speedup, c.speedup, detail);
  } else if (base.fields.counters.count("speedup") || cur.fields.counters.count("speedup")) {
    r.speedup
        .not_applied["baseline has " + speedup_state(base) + ", current has " + speedup_state(cur)]
        .push_back(base.name);
  }
}

// Time rows of the judged entries, kept for the report-wide rule.
struct TimeRows {
  std::vector<double> log_ratios, log_widths;
  std::string first_unjudged;
};

void compare_time(const Entry& base, const Entry& cur, const Options& o, Result& r,
                  TimeRows& rows) {
  if (const std::string unjudged = unjudged_reason(base, cur, o); !unjudged.empty()) {
    // A contended or few-sample figure is what the scheduler did, or no evidence at all:
    // neither its time nor its speedup may fail (or pass) the gate.
    add_finding(r, Status::kNote, base.name, "time", base.time_ns, cur.time_ns,
                "not judged: " + unjudged);
    if (r.not_judged++ == 0) rows.first_unjudged = base.name + " (" + unjudged + ")";
    return;
  }
  if (base.time_ns <= 0) {
    add_finding(r, Status::kNote, base.name, "time", base.time_ns, cur.time_ns,
                "baseline time is 0: not compared");
  } else {
    r.findings.push_back(time_finding(base, cur, r.time_threshold, o.noise_sigmas));
    const LogSpread b = log_spread(base, o.noise_sigmas), c = log_spread(cur, o.noise_sigmas);
    rows.log_ratios.push_back(std::log(cur.time_ns / base.time_ns));
    rows.log_widths.push_back(std::max(std::hypot(c.below, b.above), std::hypot(c.above, b.below)));
  }
  compare_speedup(base, cur, r);
}

// Exact counters (launches) and bytes, within their tolerances; a counter that vanished could
// hide a regression (e.g. CUPTI unavailable on this run).
void compare_counters(const Entry& base, const Entry& cur, const Options& o, Result& r) {
  for (const auto& [key, bv] : base.fields.counters) {
    const bool exact = is_exact_counter(key), bytes = is_bytes_counter(key);
    if (!exact && !bytes) continue;
    auto it = cur.fields.counters.find(key);
    if (it == cur.fields.counters.end()) {
      const auto why = cur.fields.counters_unavailable.find(key);
      add_finding(r, o.allow_missing_counters ? Status::kNote : Status::kMissing, base.name, key,
                  bv, std::nullopt,
                  why != cur.fields.counters_unavailable.end()
                      ? "counter absent from current: unavailable: " + why->second
                      : "counter absent from current (the entry gives no reason in "
                        "counters_unavailable)");
      continue;
    }
    const double cv = it->second;
    const double tol = exact ? o.exact_tolerance : o.bytes_tolerance;
    const double diff = std::fabs(cv - bv);
    const bool changed = bv == 0 ? diff > 0 : diff > tol * std::fabs(bv);
    const std::string rule =
        (exact ? "exact" : "bytes") + std::string(", tolerance ") + plain_percent(tol);
    const std::string change = bv != 0 ? percent(cv / bv - 1.0) : (diff > 0 ? "from 0" : "+0.0%");
    add_finding(r, changed ? Status::kChanged : Status::kPass, base.name, key, bv, cv,
                change + " (" + rule + ")");
  }
  for (const auto& [key, cv] : cur.fields.counters) {
    if ((is_exact_counter(key) || is_bytes_counter(key)) && !base.fields.counters.count(key)) {
      add_finding(r, Status::kNote, base.name, key, std::nullopt, cv, "counter new in current");
    }
  }
}

// Coverage: an entry the baseline lacks is gated by nothing; the baseline must cover the sweep
// (scripts/update-baseline.sh), or the run says it accepts that (--allow-new).
void note_new_entries(const Report& baseline, const Report& current, const Options& o, Result& r) {
  for (const Entry& cur : current.entries) {
    if (baseline.find(cur.name)) continue;
    if (o.allow_new) {
      add_finding(r, Status::kNew, cur.name, "", std::nullopt, std::nullopt,
                  "not in baseline (--allow-new)");
    } else {
      add_finding(r, Status::kUncovered, cur.name, "", std::nullopt, std::nullopt,
                  "not in baseline: ungated; update the baseline to the CI sweep "
                  "(scripts/update-baseline.sh) or pass --allow-new");
    }
  }
}

// What the whole comparison could not judge, and why the speedup rule was off.
void finish_result(const Report& baseline, const Report& current, bool judge_time,
                   const TimeRows& rows, Result& r) {
  if (rows.log_ratios.size() >= 2) add_report_wide(rows.log_ratios, rows.log_widths, r);
  if (r.not_judged > 0) {
    r.unjudged.push_back(std::to_string(r.not_judged) + " entr" +
                         (r.not_judged == 1 ? "y" : "ies") +
                         " not judged on time or speedup, e.g. " + rows.first_unjudged);
  }
  if (r.compared == 0) {
    r.unjudged.push_back("no entry of the baseline is in the current report");
  }
  r.hints = naming_hints(baseline, current, r);
  if (!judge_time) {
    r.speedup.off = r.timing_off;
  } else if (r.compared == 0) {
    r.speedup.off = "no entry is in both reports (see MISSING and NEW)";
  } else if (r.speedup.applied == 0 && r.speedup.not_applied.empty()) {
    r.speedup.off =
        "no entry of either report has a speedup interval (speedup_ci_low, speedup_ci_high)";
  }
}

}  // namespace

Result compare(const Report& baseline, const Report& current, const Options& o) {
  Result r = start_result(baseline, current, o);
  const bool judge_time = r.timing_off.empty();
  TimeRows rows;
  for (const Entry& base : baseline.entries) {
    const Entry* cur = current.find(base.name);
    if (!cur) {
      add_finding(r, Status::kMissing, base.name, "", std::nullopt, std::nullopt,
                  "in baseline, absent from current" + rename_hint(base.name, baseline, current));
      continue;
    }
    ++r.compared;
    // Another routing or quant spec under the same name is another experiment: refused (exit 2).
    check_entry_setup(base, *cur, baseline, current, o, r);
    if (compare_errors(base, *cur, r)) continue;
    if (judge_time) compare_time(base, *cur, o, r, rows);
    compare_counters(base, *cur, o, r);
    // Accuracy is computed, not timed: judged whatever the timing rules did (contended entries,
    // thread counts, --ignore-time).
    compare_accuracy(base, *cur, o, r);
  }
  note_new_entries(baseline, current, o, r);
  finish_result(baseline, current, judge_time, rows, r);
  return r;
}

namespace {

// One line per identity field either report records: "same" or both values, and what a
// difference means (a timing field was allowed, or it is shown only).
std::vector<std::string> identity_lines(const Result& r) {
  std::vector<std::string> lines;
  for (const auto& f : r.identity) {
    if (f.baseline.empty() && f.current.empty()) continue;
    std::string s = f.name + ": ";
    if (f.baseline == f.current) {
      s += f.baseline + " (both)";
    } else {
      s += "baseline " + (f.baseline.empty() ? "not recorded" : f.baseline) + ", current " +
           (f.current.empty() ? "not recorded" : f.current);
      if (f.differs()) s += f.timing ? " (DIFFERS: changes timing; allowed)" : " (differs)";
    }
    lines.push_back(s);
  }
  return lines;
}

int count_differing(const Result& r) {
  int n = 0;
  for (const auto& f : r.identity) n += f.differs();
  return n;
}

}  // namespace

std::string time_rule_summary(const Result& r) {
  if (!r.timing_off.empty()) return "not applied: " + r.timing_off + ".";
  return "threshold " + plain_percent(r.time_threshold) + " per entry, " +
         plain_percent(r.report_threshold) + " for the geometric mean of all (" +
         r.time_threshold_source + "; --time-threshold sets it).";
}

std::string speedup_rule_summary(const Result& r) {
  if (!r.speedup.off.empty()) return "not applied: " + r.speedup.off + ".";
  std::string s = "applied to " + std::to_string(r.speedup.applied) + " entr" +
                  (r.speedup.applied == 1 ? "y" : "ies");
  if (r.speedup.not_applied.empty()) return s + ".";
  int skipped = 0;
  for (const auto& [why, names] : r.speedup.not_applied) skipped += static_cast<int>(names.size());
  s += "; could not apply to " + std::to_string(skipped) + ":";
  const char* sep = " ";
  for (const auto& [why, names] : r.speedup.not_applied) {
    s += sep + why + " (" + std::to_string(names.size()) + ", e.g. " + names.front() + ")";
    sep = "; ";
  }
  return s + ".";
}

void print_table(const Result& r, std::ostream& out, bool verbose) {
  std::size_t width = 9;
  for (const auto& f : r.findings) width = std::max(width, f.benchmark.size());
  width = std::min<std::size_t>(width, 90);
  char line[512];
  std::snprintf(line, sizeof(line), "%-8s %-*s %-18s %14s %14s  %s\n", "status",
                static_cast<int>(width), "benchmark", "metric", "baseline", "current",
                "change / rule");
  out << line;
  int failures = 0, faster = 0, added = 0, notes = 0;
  for (const auto& f : r.findings) {
    failures += is_failure(f.status);
    faster += f.status == Status::kFaster;
    added += f.status == Status::kNew || f.status == Status::kUncovered;
    notes += f.status == Status::kNote;
    // Passing counters are many and dull: shown with --verbose only. Time rows always show.
    if (f.status == Status::kPass && f.metric != "time" && f.metric != "speedup" && !verbose)
      continue;
    std::snprintf(line, sizeof(line), "%-8s %-*s %-18s %14s %14s  %s\n", to_string(f.status),
                  static_cast<int>(width), f.benchmark.c_str(),
                  f.metric.empty() ? "-" : f.metric.c_str(),
                  format_value(f.metric, f.baseline).c_str(),
                  format_value(f.metric, f.current).c_str(), f.detail.c_str());
    out << line;
  }
  out << "\n";
  if (!r.identity.empty()) {
    out << "fusebench-gate: identity (context; docs/gate.md, \"Identity\"):\n";
    for (const auto& shown : identity_lines(r)) out << "  " << shown << "\n";
  }
  for (const auto& note : r.context_notes) out << "fusebench-gate: context: " << note << "\n";
  for (const auto& hint : r.hints) out << "fusebench-gate: names: " << hint << "\n";
  out << "fusebench-gate: time rule (the ratio's 95% interval wholly beyond the threshold): "
      << time_rule_summary(r) << "\n";
  out << "fusebench-gate: speedup rule (a current interval wholly below the baseline's fails): "
      << speedup_rule_summary(r) << "\n";
  if (r.not_judged > 0)
    out << "fusebench-gate: " << r.not_judged
        << " benchmark(s) not judged on time or speedup (contended, fewer than 6 samples or "
           "pairs: no 95% interval, or different CPU threads per rank: see the rows)\n";
  out << "fusebench-gate: advice rule (a `use:` decision that flipped fails): "
      << advice_rule_summary(r) << "\n";
  out << "fusebench-gate: accuracy rule (a quant_error that grew fails): "
      << accuracy_rule_summary(r) << "\n";
  out << "fusebench-gate: " << r.compared << " benchmarks compared (" << r.baseline_device << " vs "
      << r.current_device << "): " << failures << " regression(s), " << faster << " faster, "
      << added << " new, " << notes << " note(s): " << r.verdict_text() << "\n";
}

void write_markdown(const Result& r, const Options& o, std::ostream& out) {
  int failures = 0, faster = 0, added = 0;
  for (const auto& f : r.findings) {
    failures += is_failure(f.status);
    faster += f.status == Status::kFaster;
    added += f.status == Status::kNew || f.status == Status::kUncovered;
  }
  out << "## fusebench gate: " << to_string(r.verdict())
      << (r.verdict() == Verdict::kNotJudged && r.allow_unjudged ? " (passed by --allow-unjudged)"
                                                                 : "")
      << "\n\n";
  if (!r.unjudged.empty()) {
    out << "**Not judged** (exit " << kExitNotJudged << " unless --allow-unjudged):\n\n";
    for (const auto& why : r.unjudged) out << "- " << why << "\n";
    out << "\n";
  }
  out << r.compared << " benchmarks compared on `" << r.current_device << "` (baseline `"
      << r.baseline_device << "`): **" << failures << " regression(s)**, " << faster << " faster, "
      << added << " new.\n\n";
  for (const auto& note : r.context_notes) out << "Context: " << note << ".\n\n";
  for (const auto& hint : r.hints) out << "Names: " << hint << ".\n\n";
  if (!r.identity.empty()) {
    const int differing = count_differing(r);
    out << "<details><summary>Identity: "
        << (differing == 0 ? std::string("no recorded field differs")
                           : std::to_string(differing) + " field(s) differ")
        << "</summary>\n\n| field | baseline | current |\n|---|---|---|\n";
    for (const auto& f : r.identity) {
      if (f.baseline.empty() && f.current.empty()) continue;
      out << "| " << f.name << (f.differs() ? " (differs)" : "") << " | "
          << (f.baseline.empty() ? "-" : f.baseline) << " | "
          << (f.current.empty() ? "-" : f.current) << " |\n";
    }
    out << "\n</details>\n\n";
  }
  out << "Rules: time fails when the ratio current / baseline and its whole 95% interval lie above "
         "1 + "
      << plain_percent(r.time_threshold) << " (" << r.time_threshold_source << ")"
      << (r.timing_off.empty() ? "" : " (not applied: " + r.timing_off + ")")
      << "; a speedup fails when its interval lies wholly below the baseline's; byte counters "
         "within "
      << plain_percent(o.bytes_tolerance) << "; exact counters within "
      << plain_percent(o.exact_tolerance) << ".\n\n";
  out << "Speedup rule: " << speedup_rule_summary(r) << "\n\n";
  if (r.not_judged > 0)
    out << "Not judged: " << r.not_judged
        << " benchmark(s) on time and speedup (contended, fewer than 6 samples or pairs: no "
           "95% interval, or different CPU threads per rank: see the rows).\n\n";
  out << "Advice rule: " << advice_rule_summary(r) << "\n\n";
  out << "Accuracy rule: " << accuracy_rule_summary(r) << "\n\n";
  auto row = [&](const Finding& f) {
    std::string name = f.benchmark;
    for (auto& ch : name) {
      if (ch == '|') ch = '/';
    }
    out << "| " << to_string(f.status) << " | `" << name << "` | "
        << (f.metric.empty() ? "-" : f.metric) << " | " << format_value(f.metric, f.baseline)
        << " | " << format_value(f.metric, f.current) << " | " << f.detail << " |\n";
  };
  const char* header =
      "| status | benchmark | metric | baseline | current | change / rule "
      "|\n|---|---|---|---|---|---|\n";
  bool any = false;
  for (const auto& f : r.findings) {
    if (f.status == Status::kPass || f.status == Status::kNote) continue;
    if (!any) out << header;
    any = true;
    row(f);
  }
  if (!any) {
    out << (r.unjudged.empty() ? "No regressions, improvements or new benchmarks.\n"
                               : "Nothing failed, but the run was not judged (above).\n");
  }
  out << "\n<details><summary>All time and speedup comparisons</summary>\n\n" << header;
  for (const auto& f : r.findings) {
    if (f.metric == "time" || f.metric == "speedup") row(f);
  }
  out << "\n</details>\n";
}

}  // namespace fusebench::gate
