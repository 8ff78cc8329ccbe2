#include "report_writer.hpp"

#include <cstdio>
#include <iostream>

#include "fusebench/report.hpp"

namespace fusebench::bench {
namespace {

// "qkv/split/.../dtype:bf16/manual_time" -> "qkv/split/.../dtype:bf16"
std::string fixture_name(const std::string& run_name) {
  const std::string suffix = "/manual_time";
  std::string name = run_name;
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
  }
  // Fixtures run with Iterations(1) (one measurement each, docs/timing.md) get "/iterations:1".
  if (const auto at = name.rfind("/iterations:");
      at != std::string::npos && name.find('/', at + 1) == std::string::npos) {
    name.resize(at);
  }
  return name;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

}  // namespace

ReportWriter::ReportWriter(std::string path, nlohmann::json context, std::size_t total,
                           const std::map<std::string, nlohmann::json>& entry_fields)
    : path_(std::move(path)),
      context_(std::move(context)),
      total_(total),
      entry_fields_(entry_fields) {}

bool ReportWriter::ReportContext(const Context& context) {
  const nlohmann::json gbench = gbench_context_to_json(context);
  for (auto it = gbench.begin(); it != gbench.end(); ++it) {
    if (!context_.contains(it.key())) context_[it.key()] = it.value();
  }
  return ConsoleReporter::ReportContext(context);
}

void ReportWriter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const auto& run : runs) {
    nlohmann::json entry = run_to_json(run);
    const std::string name = fixture_name(run.run_name.str());
    if (auto it = entry_fields_.find(name); it != entry_fields_.end()) {
      for (const auto& [key, value] : it->second.items()) entry[key] = value;
    }
    if (entry.value("error_occurred", false)) ++failures_;
    entries_.push_back(std::move(entry));
  }
  if (!runs.empty() && runs.front().run_type == Run::RT_Iteration) {
    ++done_;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = done_ > 0 ? elapsed / static_cast<double>(done_) *
                                        static_cast<double>(total_ - std::min(done_, total_))
                                  : 0;
    std::cerr << "[" << done_ << "/" << total_ << "] " << fixture_name(runs.front().run_name.str())
              << "  elapsed " << format_seconds(elapsed) << ", about " << format_seconds(left)
              << " left\n";
  }
  flush();
}

bool ReportWriter::flush() {
  if (path_.empty()) return true;
  std::vector<std::string> dropped;
  nlohmann::json report = {{"context", context_}, {"benchmarks", entries_}};
  report = sanitize(report, &dropped);
  if (!dropped.empty()) {
    // Recorded so a reader knows a value existed but was not a finite number.
    report["context"]["non_finite_values_dropped"] = dropped;
  }
  try {
    write_file_atomically(path_, report.dump(2) + "\n");
    return true;
  } catch (const std::exception& e) {
    std::cerr << "fusebench: cannot write report: " << e.what() << "\n";
    return false;
  }
}

}  // namespace fusebench::bench
