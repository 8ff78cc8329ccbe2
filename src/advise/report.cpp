// Reads what the advisor needs from a fusebench report (Google Benchmark JSON). Every rejection
// names the file, the field and the value: a malformed interval must not decide a dispatch.
#include <cmath>
#include <cstdio>

#include "fusebench/advise.hpp"
#include "fusebench/ep_advice.hpp"
#include "fusebench/report_document.hpp"

namespace fusebench::advise {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& what) {
  throw InputError(file + ": " + field + ": " + what);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string context_string(const nlohmann::json& c, const char* key) {
  const auto it = c.find(key);
  return it != c.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct Reader {
  const std::string& file;
  const nlohmann::json& b;
  std::string at;

  std::optional<std::string> text(const char* key) const {
    const auto it = b.find(key);
    if (it == b.end()) return std::nullopt;
    if (!it->is_string()) fail(file, at + "." + key, "expected a string, got " + shown(*it));
    return it->get<std::string>();
  }
  std::optional<double> num(const char* key) const {
    const auto it = b.find(key);
    if (it == b.end()) return std::nullopt;
    if (!it->is_number()) fail(file, at + "." + key, "expected a number, got " + shown(*it));
    const double v = it->get<double>();
    if (!std::isfinite(v)) fail(file, at + "." + key, "not a finite number");
    return v;
  }
};

// A ratio and its interval; one bound without the other, a non-positive value or low > high is
// unusable input.
Ratio read_ratio(const std::string& file, const std::string& at, std::optional<double> speedup,
                 std::optional<double> low, std::optional<double> high, std::optional<double> pairs,
                 const char* low_key, const char* high_key, const char* speedup_key,
                 const char* pairs_key) {
  if (!speedup) fail(file, at + "." + speedup_key, "missing");
  if (low.has_value() != high.has_value()) {
    fail(file, at + "." + (low ? high_key : low_key),
         std::string("missing while ") + (low ? low_key : high_key) + " is present");
  }
  const std::pair<const char*, std::optional<double>> values[] = {
      {speedup_key, speedup}, {low_key, low}, {high_key, high}};
  for (const auto& [key, v] : values) {
    if (v && !(*v > 0))
      fail(file, at + "." + key, number(*v) + " is not positive (a ratio of two times)");
  }
  if (low && *low > *high) {
    fail(file, at + "." + low_key,
         number(*low) + " is greater than " + high_key + " " + number(*high));
  }
  Ratio r;
  r.speedup = *speedup;
  r.low = low;
  r.high = high;
  if (pairs) {
    if (*pairs < 0 || *pairs != std::floor(*pairs)) {
      fail(file, at + "." + pairs_key, number(*pairs) + " is not a count of pairs");
    }
    r.pairs = static_cast<int>(std::min(*pairs, 1e9));
  }
  return r;
}

}  // namespace

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

std::string device_identity(const nlohmann::json& c) {
  const std::string backend = context_string(c, "backend");
  const std::string gpu = context_string(c, "gpu_name");
  if (!gpu.empty() && backend != "cpu") return "gpu: " + gpu;
  const std::string cpu = context_string(c, "cpu_model");
  return (backend.empty() ? std::string("cpu") : backend) + ": " + (cpu.empty() ? "unknown" : cpu);
}

std::optional<Ceilings> Report::ceilings_for(const std::string& dtype) const {
  const auto it = context.find("ceilings");
  if (it == context.end() || !it->is_object()) return std::nullopt;
  auto positive = [](const nlohmann::json& o, const char* key) -> std::optional<double> {
    const auto v = o.find(key);
    if (v == o.end() || !v->is_number()) return std::nullopt;
    const double d = v->get<double>();
    return std::isfinite(d) && d > 0 ? std::optional<double>(d) : std::nullopt;
  };
  std::optional<double> peak;
  const auto by = it->find("peak_flops_by_dtype");
  if (by != it->end() && by->is_object()) peak = positive(*by, dtype.c_str());
  if (!peak) peak = positive(*it, "peak_flops");
  const auto bw = positive(*it, "bandwidth");
  if (!peak || !bw) return std::nullopt;
  const auto src = it->find("source");
  return Ceilings{*peak, *bw,
                  src != it->end() && src->is_string() ? src->get<std::string>() : "context"};
}

namespace {

using Segments = decltype(name_segments(std::string()));

// A positive integer field of the element, else of its name's segments, else `fallback` (none
// when it is not positive).
std::optional<std::int64_t> positive_integer(const Reader& r, const Segments& seg, const char* key,
                                             std::int64_t fallback) {
  if (const auto v = r.num(key)) {
    if (*v < 1 || *v != std::floor(*v) || *v > 9.0e15) {
      fail(r.file, r.at + "." + key, number(*v) + " is not a positive integer");
    }
    return static_cast<std::int64_t>(*v);
  }
  const auto s = seg.find(key);
  if (s == seg.end()) return fallback > 0 ? std::optional<std::int64_t>(fallback) : std::nullopt;
  char* endp = nullptr;
  const long long v = std::strtoll(s->second.c_str(), &endp, 10);
  if (endp == s->second.c_str() || *endp != '\0' || v < 1) {
    fail(r.file, r.at + ".name", key + std::string(":") + s->second + " is not a positive integer");
  }
  return v;
}

// The fixture's axes: the element's fields, else its name's segments.
void read_axes(const Reader& r, const Segments& seg, const std::string& backend, Entry& e) {
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
  e.backend = field("backend", backend);
}

// The speedup over the baseline and over every other variant measured with it.
void read_ratios(const Reader& r, const nlohmann::json& b, Entry& e) {
  const auto sp = r.num("speedup");
  const auto lo = r.num("speedup_ci_low"), hi = r.num("speedup_ci_high");
  if (sp || lo || hi) {
    e.speedup = read_ratio(r.file, r.at, sp, lo, hi, r.num("speedup_pairs"), "speedup_ci_low",
                           "speedup_ci_high", "speedup", "speedup_pairs");
  }
  const auto it = b.find("speedup_over");
  if (it == b.end()) return;
  if (!it->is_object())
    fail(r.file, r.at + ".speedup_over", "expected an object, got " + shown(*it));
  for (const auto& [other, v] : it->items()) {
    Reader o{r.file, v, r.at + ".speedup_over." + other};
    if (!v.is_object()) fail(r.file, o.at, "expected an object, got " + shown(v));
    e.over[other] = read_ratio(r.file, o.at, o.num("speedup"), o.num("ci_low"), o.num("ci_high"),
                               o.num("pairs"), "ci_low", "ci_high", "speedup", "pairs");
  }
}

// The moe op's routing source and seed, as one text (entries of two routings are two
// experiments), from the identity fields the shared reader read (report_document.hpp).
std::string routing_text(const std::map<std::string, std::string>& setup) {
  std::string out;
  for (const char* key : {"routing", "seed"}) {
    if (const auto v = setup.find(std::string("moe.routing.") + key); v != setup.end())
      out += (out.empty() ? "" : ", ") + std::string(key) + " " + v->second;
  }
  return out;
}

// One repetition element of a fixture; nullopt (and why, in `skipped`) for one that is not a
// fusebench fixture.
std::optional<Entry> read_entry(const std::string& file, const nlohmann::json& b,
                                const ElementHeader& h, const std::string& backend,
                                std::vector<std::string>& skipped) {
  Reader r{file, b, h.at};
  Entry e;
  e.name = h.run_name;
  e.error = h.error;
  e.error_message = h.error_message;
  const auto seg = name_segments(e.name);
  read_axes(r, seg, backend, e);
  const auto tokens = positive_integer(r, seg, "tokens", 0);
  e.tp = static_cast<int>(
      std::min<std::int64_t>(positive_integer(r, seg, "tp", 1).value_or(1), 1 << 20));
  if (const auto rep = r.num("repetition_index")) e.repetition = static_cast<int>(*rep);
  e.timing_stop = r.text("timing_stop").value_or("");
  e.samples_dropped_preempted = r.num("samples_dropped_preempted");
  e.modelled = r.num("comm_modelled").value_or(0) == 1 || e.comm == "modelled" ||
               e.name.find("comm:modelled") != std::string::npos;
  e.speedup_baseline = r.text("speedup_baseline").value_or("");
  e.speedup_ci_note = r.text("speedup_ci_note").value_or("");
  e.model_flops = r.num("model_flops");
  e.model_bytes = r.num("model_bytes");
  e.model_launches = r.num("model_launches");
  e.comm_bytes = r.num("comm_bytes");
  e.predicted_pipeline_seconds = read_predicted_pipeline_seconds(b, file, h.at);
  read_ratios(r, b, e);
  // The schema's accuracy and identity fields, read as the gate reads them.
  EntryRecord record = read_entry_record(b, file, h.at);
  e.quant_error = std::move(record.accuracy["quant_error"]);
  e.quant_error_vs_split = std::move(record.accuracy["quant_error_vs_split"]);
  const std::map<std::string, std::string>& setup = record.setup;
  if (const auto em = setup.find("emulated"); em != setup.end()) e.emulated = em->second == "true";
  e.routing = routing_text(setup);
  if (const auto q = setup.find("quant.spec"); q != setup.end()) e.quant_spec = q->second;
  if (e.op.empty() || e.variant.empty() || !tokens || e.model.empty()) {
    skipped.push_back(e.name + ": no op, variant, model or tokens (not a fusebench fixture)");
    return std::nullopt;
  }
  e.tokens = *tokens;
  return e;
}

}  // namespace

Report parse_report(std::string_view text, const std::string& file) {
  const nlohmann::json root = parse_report_document(text, file);
  const auto ctx = root.find("context");
  const auto benches = root.find("benchmarks");
  for (const char* key : {"git_revision", "date", "backend", "gpu_name", "cpu_model"}) {
    const auto it = ctx->find(key);
    if (it != ctx->end() && !it->is_string()) {
      fail(file, std::string("context.") + key, "expected a string, got " + shown(*it));
    }
  }

  Report report;
  report.file = file;
  report.context = *ctx;
  report.device = device_identity(*ctx);
  report.backend = context_string(*ctx, "backend");
  report.git_revision = context_string(*ctx, "git_revision");
  report.date = context_string(*ctx, "date");
  if (report.git_revision.empty()) report.git_revision = "unknown (the report has no git_revision)";

  // The shared rules (finite numbers, positive times, one element per name), as the gate reads.
  const std::vector<ElementHeader> headers = read_elements(root, file);
  for (std::size_t i = 0; i < benches->size(); ++i) {
    // Aggregates of repetitions are no paired measurement (a mean of bounds is no interval); the
    // repetitions themselves are read.
    if (headers[i].run_type == "aggregate") continue;
    if (auto e = read_entry(file, (*benches)[i], headers[i], report.backend, report.skipped))
      report.entries.push_back(std::move(*e));
  }
  return report;
}

Report load_report(const std::string& path) { return parse_report(read_report_file(path), path); }

}  // namespace fusebench::advise
