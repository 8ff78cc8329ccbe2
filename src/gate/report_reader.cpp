// Reads a fusebench / Google Benchmark JSON report into gate::Report, validating as it goes so
// every rejection names the file and the field (the gate's exit status 2).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "fusebench/evidence.hpp"
#include "fusebench/gate.hpp"
#include "fusebench/report_document.hpp"

namespace fusebench::gate {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& what) {
  throw InputError(file + ": " + field + ": " + what);
}

// Google Benchmark's structural numeric fields: not counters.
bool is_structural(const std::string& key) {
  static const std::set<std::string> keys = {"family_index", "per_family_instance_index",
                                             "repetitions",  "repetition_index",
                                             "threads",      "iterations",
                                             "real_time",    "cpu_time"};
  return keys.count(key) > 0;
}

double unit_to_ns(const std::string& file, const std::string& field, const std::string& unit) {
  if (unit == "ns") return 1.0;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  fail(file, field, "unknown time unit \"" + unit + "\" (expected ns, us, ms or s)");
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string json_type(const nlohmann::json& v) {
  if (v.is_string()) return "a string \"" + v.get<std::string>() + "\"";
  return std::string(v.type_name());
}

// The speedup fields of one report element (COMMON contract 2). Malformed fields are unusable
// input: a wrong interval would pass or fail the gate for the wrong reason. `check_order` is off
// for aggregates other than the mean (a stddev or cv of the bounds is no interval).
std::optional<SpeedupInterval> read_speedup(const nlohmann::json& b, const std::string& file,
                                            const std::string& at, bool check_order) {
  std::optional<double> values[3];
  static const char* const keys[3] = {"speedup", "speedup_ci_low", "speedup_ci_high"};
  for (int i = 0; i < 3; ++i) {
    const auto it = b.find(keys[i]);
    if (it == b.end()) continue;
    if (!it->is_number())
      fail(file, at + "." + keys[i], "not a number (got " + json_type(*it) + ")");
    values[i] = it->get<double>();
  }
  const auto& [speedup, low, high] = values;
  if (low.has_value() != high.has_value()) {
    const char* present = low ? keys[1] : keys[2];
    const char* absent = low ? keys[2] : keys[1];
    fail(file, at + "." + absent, std::string("missing while ") + present + " is present");
  }
  if (!low) return std::nullopt;
  if (check_order) {
    for (int i = 0; i < 3; ++i) {
      if (values[i] && !(*values[i] > 0)) {
        fail(file, at + "." + keys[i],
             number(*values[i]) + " is not positive (a ratio of two times)");
      }
    }
    if (*low > *high) {
      fail(file, at + ".speedup_ci_low",
           number(*low) + " is greater than speedup_ci_high " + number(*high));
    }
  }
  return SpeedupInterval{speedup, *low, *high};
}

std::map<std::string, std::string> read_unavailable(const nlohmann::json& b) {
  // Informational: only well-formed reasons are kept; the gate never fails on this field.
  std::map<std::string, std::string> why;
  const auto it = b.find("counters_unavailable");
  if (it == b.end() || !it->is_object()) return why;
  for (const auto& [counter, reason] : it->items()) {
    if (reason.is_string()) why[counter] = reason.get<std::string>();
  }
  return why;
}

// The interval of time_median_ci_low/high in ns when it brackets time_ns: in seconds (fusebench
// writes time_median in seconds) or else in the entry's time unit (`scale` ns per unit).
std::optional<TimeInterval> median_interval(const std::map<std::string, double>& counters,
                                            double time_ns, double scale) {
  const auto lo = counters.find("time_median_ci_low"), hi = counters.find("time_median_ci_high");
  if (lo == counters.end() || hi == counters.end() || !(lo->second <= hi->second) || time_ns <= 0)
    return std::nullopt;
  auto brackets = [&](double factor) {
    const double l = lo->second * factor, h = hi->second * factor;
    return l > 0 && l <= time_ns * (1 + 1e-9) && time_ns <= h * (1 + 1e-9);
  };
  for (double factor : {1e9, scale}) {
    if (brackets(factor)) return TimeInterval{lo->second * factor, hi->second * factor};
  }
  return std::nullopt;
}

// Per-benchmark accumulation before folding into an Entry.
struct Pending {
  std::vector<double> rep_times_ns;
  std::map<std::string, double> aggregates_ns;  // mean, median, stddev (ns); cv (fraction)
  std::map<std::string, double> counters;
  std::map<std::string, double> aggregate_counters;  // from the mean aggregate, as a fallback
  std::optional<SpeedupInterval> speedup, aggregate_speedup;
  std::map<std::string, std::map<std::string, double>> accuracy;
  std::map<std::string, std::string> setup;
  std::map<std::string, std::string> unavailable;
  std::string not_judged;
  double scale = 1.0;  // ns per time unit of the first repetition
  int errors = 0;
  int runs = 0;
  std::string error_message;
};

}  // namespace

const Entry* Report::find(const std::string& name) const {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

namespace {

// An aggregate element (Google Benchmark's repetitions: mean, median, stddev, cv) of `p`'s run.
void add_aggregate(const nlohmann::json& b, const advise::ElementHeader& h, const std::string& file,
                   double scale, double real_time, Pending& p) {
  const std::string& at = h.at;
  if (!b.contains("aggregate_name") || !b["aggregate_name"].is_string()) {
    fail(file, at + ".aggregate_name", "missing or not a string on an aggregate entry");
  }
  const std::string agg = b["aggregate_name"].get<std::string>();
  const auto speedup = read_speedup(b, file, at, agg == "mean");
  if (h.error) return;
  // GBench writes cv as a fraction (aggregate_unit "percentage"); the others are times.
  const auto unit = b.find("aggregate_unit");
  const bool fraction =
      agg == "cv" || (unit != b.end() && unit->is_string() && *unit == "percentage");
  p.aggregates_ns[agg] = fraction ? real_time : real_time * scale;
  if (agg == "mean") {
    for (const auto& [key, value] : b.items()) {
      if (value.is_number() && !is_structural(key)) p.aggregate_counters[key] = value.get<double>();
    }
    p.aggregate_speedup = speedup;
  }
}

// One run (iteration element) of `p`: its time, and from the first its counters and fields.
void add_run(const nlohmann::json& b, const advise::ElementHeader& h, const std::string& file,
             double scale, double real_time, Pending& p) {
  const auto speedup = read_speedup(b, file, h.at, true);
  ++p.runs;
  if (h.error) {
    ++p.errors;
    p.error_message = h.error_message;
    return;
  }
  p.rep_times_ns.push_back(real_time * scale);
  if (p.rep_times_ns.size() != 1) return;
  for (const auto& [key, value] : b.items()) {
    if (value.is_number() && !is_structural(key)) p.counters[key] = value.get<double>();
  }
  p.speedup = speedup;
  p.scale = scale;
  p.unavailable = read_unavailable(b);
  p.not_judged = advise::not_judged(b).text();
  // The schema's accuracy and identity fields, read as the advisor reads them.
  advise::EntryRecord record = advise::read_entry_record(b, file, h.at);
  p.accuracy = std::move(record.accuracy);
  p.setup = std::move(record.setup);
}

double sample_cv(const std::vector<double>& times) {
  double mean = 0;
  for (double t : times) mean += t;
  mean /= static_cast<double>(times.size());
  double var = 0;
  for (double t : times) var += (t - mean) * (t - mean);
  var /= static_cast<double>(times.size() - 1);
  return mean > 0 ? std::sqrt(var) / mean : -1;
}

// Noise, most direct first: the entry's own sample CV (fusebench timing statistics), then GBench
// repetition aggregates, then the spread of the repetitions themselves.
void set_noise(Pending& p, Entry& e) {
  for (const char* key : {"cv", "time_cv"}) {
    if (e.counters.count(key) && e.counters[key] >= 0) {
      e.rel_noise = e.counters[key];
      e.noise_source = std::string("entry ") + key;
      break;
    }
  }
  if (e.rel_noise && e.counters.count("samples") && e.counters["samples"] >= 1)
    e.noise_values = static_cast<int>(std::min(e.counters["samples"], 1e9));
  // Repetitions of a run: their spread is over as many values as there are repetitions.
  const std::optional<int> reps = p.rep_times_ns.size() >= 2
                                      ? std::optional<int>(static_cast<int>(p.rep_times_ns.size()))
                                      : std::nullopt;
  if (!e.rel_noise && p.aggregates_ns.count("cv")) {
    e.rel_noise = p.aggregates_ns["cv"];
    e.noise_source = "repetitions cv";
    e.noise_values = reps;
  }
  if (!e.rel_noise && p.aggregates_ns.count("stddev") && p.aggregates_ns.count("mean") &&
      p.aggregates_ns["mean"] > 0) {
    e.rel_noise = p.aggregates_ns["stddev"] / p.aggregates_ns["mean"];
    e.noise_source = "repetitions stddev/mean";
    e.noise_values = reps;
  }
  if (!e.rel_noise && p.rep_times_ns.size() >= 2) {
    if (const double cv = sample_cv(p.rep_times_ns); cv >= 0) {
      e.rel_noise = cv;
      e.noise_source = "repetitions cv";
      e.noise_values = reps;
    }
  }
}

// The entry of one run name from its elements; nullopt when they hold only aggregates we do not
// understand, or nothing at all.
std::optional<Entry> entry_of(const std::string& name, Pending& p) {
  Entry e;
  e.name = name;
  e.samples = static_cast<int>(p.rep_times_ns.size());
  e.error = p.runs > 0 && p.errors == p.runs;
  e.error_message = p.error_message;
  e.counters = p.counters.empty() ? p.aggregate_counters : p.counters;
  e.speedup = p.counters.empty() ? p.aggregate_speedup : p.speedup;
  e.counters_unavailable = p.unavailable;
  e.not_judged = p.not_judged;
  e.accuracy = p.accuracy;
  e.setup = p.setup;
  if (p.aggregates_ns.count("median")) {
    e.time_ns = p.aggregates_ns["median"];
  } else if (!p.rep_times_ns.empty()) {
    e.time_ns = median_of(p.rep_times_ns);
  } else if (p.aggregates_ns.count("mean")) {
    e.time_ns = p.aggregates_ns["mean"];
  } else if (!e.error) {
    return std::nullopt;
  }
  set_noise(p, e);
  // One run only: its median's own 95% interval (time_median_ci_low/high, in seconds as
  // time_median, else in the entry's time unit), when it brackets the central time. Over
  // repetitions the central time is their median and their spread is the interval's basis.
  if (p.rep_times_ns.size() == 1 && !p.aggregates_ns.count("median"))
    e.time_interval = median_interval(e.counters, e.time_ns, p.scale);
  return e;
}

}  // namespace

Report parse_report(std::string_view text, const std::string& file) {
  const nlohmann::json root = advise::parse_report_document(text, file);
  Report report;
  report.file = file;
  report.context = root.at("context");
  std::vector<std::string> order;
  std::map<std::string, Pending> pending;
  const auto& benchmarks = root.at("benchmarks");
  // The shared rules (every number finite, every time positive, one element per name):
  // fusebench/report_document.hpp, the advisor's reader applies the same.
  const std::vector<advise::ElementHeader> headers = advise::read_elements(root, file);
  for (std::size_t i = 0; i < benchmarks.size(); ++i) {
    const auto& b = benchmarks[i];
    const advise::ElementHeader& h = headers[i];
    double scale = 1.0;
    if (b.contains("time_unit")) {
      if (!b["time_unit"].is_string()) fail(file, h.at + ".time_unit", "expected a string");
      scale = unit_to_ns(file, h.at + ".time_unit", b["time_unit"].get<std::string>());
    }
    const double real_time = h.error ? 0 : b["real_time"].get<double>();
    if (!pending.count(h.run_name)) order.push_back(h.run_name);
    Pending& p = pending[h.run_name];
    if (h.run_type == "aggregate") {
      add_aggregate(b, h, file, scale, real_time, p);
    } else {
      add_run(b, h, file, scale, real_time, p);
    }
  }
  for (const auto& name : order) {
    if (auto e = entry_of(name, pending[name])) report.entries.push_back(std::move(*e));
  }
  return report;
}

Report load_report(const std::string& path) {
  return parse_report(advise::read_report_file(path), path);
}

}  // namespace fusebench::gate
