// The advisor's report: its context (device, backend, revision, ceilings) and the entries it
// pools, read by the shared reader (fusebench/report_entry.hpp): every rejection names the file,
// the field and the value, as the gate's.
#include <cmath>

#include "fusebench/advise.hpp"
#include "fusebench/report_document.hpp"

namespace fusebench::advise {
namespace {

std::string context_string(const nlohmann::json& c, const char* key) {
  const auto it = c.find(key);
  return it != c.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

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

Report parse_report(std::string_view text, const std::string& file) {
  const nlohmann::json root = parse_report_document(text, file);
  const auto ctx = root.find("context");
  for (const char* key : {"git_revision", "date", "backend", "gpu_name", "cpu_model"}) {
    const auto it = ctx->find(key);
    if (it != ctx->end() && !it->is_string()) {
      fail_field(file, std::string("context.") + key, "expected a string, got " + shown(*it));
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

  // Every element through the shared reader (fusebench/report_entry.hpp), as the gate reads
  // them. Aggregates of repetitions are no paired measurement (a mean of bounds is no interval);
  // the repetitions themselves are kept, where they are fusebench fixtures.
  for (ReportEntry& e : read_report_entries(root, file)) {
    if (e.header.run_type == "aggregate") continue;
    if (e.op.empty() || e.variant.empty() || e.tokens == 0 || e.model.empty()) {
      report.skipped.push_back(e.name +
                               ": no op, variant, model or tokens (not a fusebench fixture)");
      continue;
    }
    report.entries.push_back(std::move(e));
  }
  return report;
}

Report load_report(const std::string& path) { return parse_report(read_report_file(path), path); }

}  // namespace fusebench::advise
