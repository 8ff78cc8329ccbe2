// The one reader of a report's entries, for the gate and the advisor
// (include/fusebench/report_entry.hpp). Every rejection names the file, the field and the value:
// a malformed interval must not pass or fail the gate, nor decide a dispatch.
#include "fusebench/report_entry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace fusebench::advise {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string json_type(const nlohmann::json& v) {
  if (v.is_string()) return "a string \"" + v.get<std::string>() + "\"";
  return std::string(v.type_name());
}

// The fields of one JSON object (an element, or an entry of its speedup_over), each named
// "AT.KEY" in a message.
struct Reader {
  const std::string& file;
  const nlohmann::json& b;
  std::string at;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    fail_field(file, at + "." + key, what);
  }
  std::optional<std::string> text(const char* key) const {
    const auto it = b.find(key);
    if (it == b.end()) return std::nullopt;
    if (!it->is_string()) fail(key, "expected a string, got " + shown(*it));
    return it->get<std::string>();
  }
  std::optional<double> num(const char* key) const {
    const auto it = b.find(key);
    if (it == b.end()) return std::nullopt;
    if (!it->is_number()) fail(key, "expected a number, got " + shown(*it));
    const double v = it->get<double>();
    if (!std::isfinite(v)) fail(key, "not a finite number");
    return v;
  }
};

// Google Benchmark's structural numeric fields: not counters.
bool is_structural(const std::string& key) {
  static const std::set<std::string> keys = {"family_index", "per_family_instance_index",
                                             "repetitions",  "repetition_index",
                                             "threads",      "iterations",
                                             "real_time",    "cpu_time"};
  return keys.count(key) > 0;
}

double unit_to_ns(const Reader& r) {
  const std::string unit = r.text("time_unit").value_or("ns");
  if (unit == "ns") return 1.0;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  r.fail("time_unit", "unknown time unit \"" + unit + "\" (expected ns, us, ms or s)");
}

// The keys of a ratio: an element's own, or an entry of its speedup_over.
struct RatioKeys {
  const char *speedup, *low, *high, *pairs;
};
constexpr RatioKeys kSpeedupKeys{"speedup", "speedup_ci_low", "speedup_ci_high", "speedup_pairs"};
constexpr RatioKeys kOverKeys{"speedup", "ci_low", "ci_high", "pairs"};

// A ratio and its interval, nullopt where none of them is there. One bound without the other is
// unusable input, and so are bounds without the ratio on an iteration (an aggregate's are read as
// no ratio). `checked` (an iteration's or a mean's: a stddev or cv of the bounds is no interval)
// also refuses a value that is not positive and low > high; an iteration's pairs are a count.
std::optional<Ratio> read_ratio(const Reader& r, const RatioKeys& k, bool checked, bool iteration) {
  const auto speedup = r.num(k.speedup), low = r.num(k.low), high = r.num(k.high);
  if (!speedup && !low && !high) return std::nullopt;
  if (low.has_value() != high.has_value())
    r.fail(low ? k.high : k.low,
           std::string("missing while ") + (low ? k.low : k.high) + " is present");
  if (!speedup && iteration)
    r.fail(k.speedup, std::string("missing while ") + k.low + " is present");
  if (checked) {
    const std::pair<const char*, std::optional<double>> values[] = {
        {k.speedup, speedup}, {k.low, low}, {k.high, high}};
    for (const auto& [key, v] : values) {
      if (v && !(*v > 0)) r.fail(key, number(*v) + " is not positive (a ratio of two times)");
    }
    if (low && *low > *high)
      r.fail(k.low, number(*low) + " is greater than " + k.high + " " + number(*high));
  }
  if (!speedup) return std::nullopt;
  Ratio out{*speedup, low, high, std::nullopt};
  if (const auto pairs = iteration ? r.num(k.pairs) : std::nullopt) {
    if (*pairs < 0 || *pairs != std::floor(*pairs))
      r.fail(k.pairs, number(*pairs) + " is not a count of pairs");
    out.pairs = static_cast<int>(std::min(*pairs, 1e9));
  }
  return out;
}

// The speedup over the baseline and over every other variant measured with it.
void read_speedups(const Reader& r, bool checked, bool iteration, ReportEntry& e) {
  e.speedup = read_ratio(r, kSpeedupKeys, checked, iteration);
  if (!iteration) return;
  e.speedup_baseline = r.text("speedup_baseline").value_or("");
  e.speedup_ci_note = r.text("speedup_ci_note").value_or("");
  const auto it = r.b.find("speedup_over");
  if (it == r.b.end()) return;
  if (!it->is_object()) r.fail("speedup_over", "expected an object, got " + shown(*it));
  for (const auto& [other, v] : it->items()) {
    const Reader o{r.file, v, r.at + ".speedup_over." + other};
    if (!v.is_object()) fail_field(r.file, o.at, "expected an object, got " + shown(v));
    const auto ratio = read_ratio(o, kOverKeys, true, true);
    if (!ratio) o.fail("speedup", "missing");
    e.over[other] = *ratio;
  }
}

using Segments = std::map<std::string, std::string>;

// A positive integer field of the element, else of its name's segments, else `fallback` (none
// when it is not positive).
std::optional<std::int64_t> positive_integer(const Reader& r, const Segments& seg, const char* key,
                                             std::int64_t fallback) {
  if (const auto v = r.num(key)) {
    if (*v < 1 || *v != std::floor(*v) || *v > 9.0e15)
      r.fail(key, number(*v) + " is not a positive integer");
    return static_cast<std::int64_t>(*v);
  }
  const auto s = seg.find(key);
  if (s == seg.end()) return fallback > 0 ? std::optional<std::int64_t>(fallback) : std::nullopt;
  char* endp = nullptr;
  const long long v = std::strtoll(s->second.c_str(), &endp, 10);
  if (endp == s->second.c_str() || *endp != '\0' || v < 1)
    r.fail("name", key + std::string(":") + s->second + " is not a positive integer");
  return v;
}

// The fixture's axes: the element's fields, else its name's segments.
void read_axes(const Reader& r, const std::string& context_backend, ReportEntry& e) {
  const Segments seg = name_segments(e.name);
  auto field = [&](const char* key, const std::string& fallback) {
    if (auto v = r.text(key)) return *v;
    const auto s = seg.find(key);
    return s != seg.end() ? s->second : fallback;
  };
  e.op = field("op", "");
  e.variant = field("variant", "");
  e.model = field("model", "");
  e.layer = field("layer", "");
  e.dtype = field("dtype", "");
  e.timing = field("timing", "");
  e.weights = field("weights", "");
  e.comm = field("comm", "");
  e.backend = field("backend", context_backend);
  e.tokens = positive_integer(r, seg, "tokens", 0).value_or(0);
  e.tp = static_cast<int>(
      std::min<std::int64_t>(positive_integer(r, seg, "tp", 1).value_or(1), 1 << 20));
}

std::map<std::string, std::map<std::string, double>> read_accuracy(const Reader& r) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const char* key : {"quant_error", "quant_error_vs_split"}) {
    const auto it = r.b.find(key);
    if (it == r.b.end()) continue;
    if (!it->is_object())
      r.fail(key, "expected an object of shard -> error, got " + json_type(*it));
    auto& shards = out[key];
    for (const auto& [shard, v] : it->items()) {
      const std::string field = key + ("." + shard);
      if (!v.is_number()) r.fail(field, "expected a number, got " + json_type(v));
      const double d = v.get<double>();
      if (!std::isfinite(d) || d < 0)
        r.fail(field, number(d) + " is not a relative error (a number >= 0)");
      shards[shard] = d;
    }
  }
  return out;
}

// What the entry measured that its name does not say (ReportEntry::setup), and what follows.
void read_setup(const nlohmann::json& b, ReportEntry& e) {
  auto& out = e.setup;
  auto text = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  if (const auto moe = b.find("moe"); moe != b.end() && moe->is_object()) {
    if (const auto r = moe->find("routing"); r != moe->end() && r->is_object()) {
      for (const char* key : {"routing", "seed", "experts", "top_k"}) {
        if (const auto v = r->find(key); v != r->end())
          out[std::string("moe.routing.") + key] = text(*v);
      }
    }
  }
  if (const auto q = b.find("quant"); q != b.end() && q->is_object()) {
    if (const auto v = q->find("spec"); v != q->end()) out["quant.spec"] = text(*v);
  }
  if (const auto v = b.find("emulated"); v != b.end()) out["emulated"] = text(*v);
  // The dtype too: an entry of the same name in another dtype matches no comparison of the
  // gate's advice rule, which would then compare nothing and pass (issue 37).
  if (const auto v = b.find("dtype"); v != b.end()) out["dtype"] = text(*v);
  // The moe op's routing source and seed, as one text (entries of two routings are two
  // experiments); the quant spec; whether the times are an emulation.
  for (const char* key : {"routing", "seed"}) {
    if (const auto v = out.find(std::string("moe.routing.") + key); v != out.end())
      e.routing += (e.routing.empty() ? "" : ", ") + std::string(key) + " " + v->second;
  }
  if (const auto q = out.find("quant.spec"); q != out.end()) e.quant_spec = q->second;
  if (const auto em = out.find("emulated"); em != out.end()) e.emulated = em->second == "true";
}

std::map<std::string, std::string> read_unavailable(const nlohmann::json& b) {
  // Informational: only well-formed reasons are kept; no reader fails on this field.
  std::map<std::string, std::string> why;
  const auto it = b.find("counters_unavailable");
  if (it == b.end() || !it->is_object()) return why;
  for (const auto& [counter, reason] : it->items()) {
    if (reason.is_string()) why[counter] = reason.get<std::string>();
  }
  return why;
}

// moe_ranks.predicted.pipeline_seconds (nullopt when absent); a value that is no finite number
// >= 0 is refused naming the field.
std::optional<double> read_predicted_pipeline_seconds(const Reader& r) {
  const auto ranks = r.b.find("moe_ranks");
  if (ranks == r.b.end() || !ranks->is_object()) return std::nullopt;
  const auto predicted = ranks->find("predicted");
  if (predicted == ranks->end() || !predicted->is_object()) return std::nullopt;
  const auto v = predicted->find("pipeline_seconds");
  if (v == predicted->end()) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0)
    r.fail("moe_ranks.predicted.pipeline_seconds", shown(*v) + " is not a number >= 0");
  return v->get<double>();
}

// The fields only an iteration has (an aggregate's would be statistics of them).
void read_iteration(const Reader& r, const std::string& context_backend, ReportEntry& e) {
  read_axes(r, context_backend, e);
  if (const auto rep = r.num("repetition_index")) e.repetition = static_cast<int>(*rep);
  e.timing_stop = r.text("timing_stop").value_or("");
  e.samples_dropped_preempted = r.num("samples_dropped_preempted");
  e.modelled = r.num("comm_modelled").value_or(0) == 1 || e.comm == "modelled" ||
               e.name.find("comm:modelled") != std::string::npos;
  // The cost model's counters: numbers where present (counters keeps every numeric field).
  for (const char* key : {"model_flops", "model_bytes", "model_launches", "comm_bytes"}) r.num(key);
  read_speedups(r, true, true, e);
  e.accuracy = read_accuracy(r);
  read_setup(r.b, e);
  e.counters_unavailable = read_unavailable(r.b);
  e.predicted_pipeline_seconds = read_predicted_pipeline_seconds(r);
  // A speedup_pairs that is not a number (without a speedup, which reads it as a count) decides
  // nothing, as in Python's not_judged_reason.
  const auto pairs = r.b.find("speedup_pairs");
  e.not_judged =
      not_judged(e.timing_stop, {{"speedup_pairs", pairs != r.b.end() && pairs->is_number()
                                                       ? std::optional(pairs->get<double>())
                                                       : std::nullopt},
                                 {"samples", e.counter("samples")}});
}

ReportEntry read_entry(const nlohmann::json& b, ElementHeader h, const std::string& file,
                       const std::string& context_backend) {
  const Reader r{file, b, h.at};
  ReportEntry e;
  e.name = h.run_name;
  e.ns_per_unit = unit_to_ns(r);
  e.real_time = h.error ? 0 : b.at("real_time").get<double>();  // read_elements: there
  const bool iteration = h.run_type != "aggregate";
  if (!iteration) {
    const auto agg = b.find("aggregate_name");
    if (agg == b.end() || !agg->is_string())
      r.fail("aggregate_name", "missing or not a string on an aggregate entry");
    e.aggregate = agg->get<std::string>();
    // Google Benchmark writes cv as a fraction (aggregate_unit "percentage"); the others are
    // times.
    const auto unit = b.find("aggregate_unit");
    e.fraction =
        e.aggregate == "cv" || (unit != b.end() && unit->is_string() && *unit == "percentage");
  }
  for (const auto& [key, value] : b.items()) {
    if (value.is_number() && !is_structural(key)) e.counters[key] = value.get<double>();
  }
  e.header = std::move(h);
  if (iteration) {
    read_iteration(r, context_backend, e);
  } else {
    read_speedups(r, e.aggregate == "mean", false, e);
  }
  return e;
}

}  // namespace

std::optional<double> ReportEntry::counter(const std::string& key) const {
  const auto it = counters.find(key);
  return it != counters.end() ? std::optional<double>(it->second) : std::nullopt;
}

const std::map<std::string, double>& ReportEntry::quant_error() const {
  static const std::map<std::string, double> none;
  const auto it = accuracy.find("quant_error");
  return it != accuracy.end() ? it->second : none;
}

const std::map<std::string, double>& ReportEntry::quant_error_vs_split() const {
  static const std::map<std::string, double> none;
  const auto it = accuracy.find("quant_error_vs_split");
  return it != accuracy.end() ? it->second : none;
}

// Name segments: op/variant/key:value/...; the entry's own fields win where both exist.
std::map<std::string, std::string> name_segments(const std::string& name) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  int index = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string seg = name.substr(start, end - start);
    if (index == 0) {
      out["op"] = seg;
    } else if (index == 1) {
      out["variant"] = seg;
    } else if (const auto colon = seg.find(':'); colon != std::string::npos) {
      out[seg.substr(0, colon)] = seg.substr(colon + 1);
    }
    ++index;
    start = end + 1;
  }
  return out;
}

std::vector<ReportEntry> read_report_entries(const nlohmann::json& root, const std::string& file) {
  std::vector<ElementHeader> headers = read_elements(root, file);
  const auto& context = root.at("context");
  const auto backend = context.find("backend");
  const std::string context_backend =
      backend != context.end() && backend->is_string() ? backend->get<std::string>() : "";
  const auto& benchmarks = root.at("benchmarks");
  std::vector<ReportEntry> entries;
  entries.reserve(headers.size());
  for (std::size_t i = 0; i < headers.size(); ++i)
    entries.push_back(read_entry(benchmarks[i], std::move(headers[i]), file, context_backend));
  return entries;
}

}  // namespace fusebench::advise
