// Reads a fusebench / Google Benchmark JSON report into gate::Report: the shared reader
// (fusebench/report_entry.hpp) reads and checks every element, so every rejection names the file
// and the field (the gate's exit status 2); here each run's repetitions and aggregates are folded
// into its central time and noise.
#include <algorithm>
#include <cmath>

#include "fusebench/gate.hpp"
#include "fusebench/report_document.hpp"
#include "fusebench/report_entry.hpp"

namespace fusebench::gate {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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

// The elements of one run name before they are folded into an Entry.
struct Pending {
  std::vector<double> rep_times_ns;
  std::map<std::string, double> aggregates_ns;  // mean, median, stddev (ns); cv (fraction)
  const advise::ReportEntry* first = nullptr;   // the first repetition that ran
  const advise::ReportEntry* mean = nullptr;    // the mean aggregate
  int errors = 0;
  int runs = 0;
  std::string error_message;
};

}  // namespace

const advise::Ratio* Entry::speedup_interval() const {
  return fields.speedup && fields.speedup->low && fields.speedup->high ? &*fields.speedup : nullptr;
}

const Entry* Report::find(const std::string& name) const {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

namespace {

// An aggregate element (Google Benchmark's repetitions: mean, median, stddev, cv) of `p`'s run.
void add_aggregate(const advise::ReportEntry& a, Pending& p) {
  if (a.header.error) return;
  p.aggregates_ns[a.aggregate] = a.fraction ? a.real_time : a.real_time * a.ns_per_unit;
  if (a.aggregate == "mean") p.mean = &a;
}

// One run (iteration element) of `p`: its time, and the first that ran for its fields.
void add_run(const advise::ReportEntry& r, Pending& p) {
  ++p.runs;
  if (r.header.error) {
    ++p.errors;
    p.error_message = r.header.error_message;
    return;
  }
  p.rep_times_ns.push_back(r.real_time * r.ns_per_unit);
  if (!p.first) p.first = &r;
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
    if (e.fields.counters.count(key) && e.fields.counters[key] >= 0) {
      e.rel_noise = e.fields.counters[key];
      e.noise_source = std::string("entry ") + key;
      break;
    }
  }
  if (e.rel_noise && e.fields.counters.count("samples") && e.fields.counters["samples"] >= 1)
    e.noise_values = static_cast<int>(std::min(e.fields.counters["samples"], 1e9));
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
  if (p.first) {
    e.fields = *p.first;
  } else if (p.mean) {
    e.fields = *p.mean;
  }
  if (p.first && p.first->counters.empty()) {
    e.fields.counters = p.mean ? p.mean->counters : std::map<std::string, double>();
    e.fields.speedup = p.mean ? p.mean->speedup : std::nullopt;
  }
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
    e.time_interval = median_interval(e.fields.counters, e.time_ns, p.first->ns_per_unit);
  return e;
}

}  // namespace

Report parse_report(std::string_view text, const std::string& file) {
  const nlohmann::json root = advise::parse_report_document(text, file);
  Report report;
  report.file = file;
  report.context = root.at("context");
  // Every element through the shared reader (fusebench/report_entry.hpp), as the advisor reads
  // them; then each run name's elements, in the order first seen.
  const std::vector<advise::ReportEntry> elements = advise::read_report_entries(root, file);
  std::vector<std::string> order;
  std::map<std::string, Pending> pending;
  for (const advise::ReportEntry& element : elements) {
    if (!pending.count(element.name)) order.push_back(element.name);
    Pending& p = pending[element.name];
    if (element.header.run_type == "aggregate") {
      add_aggregate(element, p);
    } else {
      add_run(element, p);
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
