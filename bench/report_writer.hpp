#pragma once
// A console reporter that also shows sweep progress on stderr and keeps the JSON report on disk
// up to date after every entry, so a crash mid-sweep loses nothing already measured.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fusebench::bench {

class ReportWriter : public benchmark::ConsoleReporter {
 public:
  // `entry_fields` maps a fixture's name (without Google Benchmark's suffixes) to fields merged
  // into its JSON entry (op, variant, model, ...).
  ReportWriter(std::string path, nlohmann::json context, std::size_t total,
               const std::map<std::string, nlohmann::json>& entry_fields);

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;

  // Writes the report (atomically). Returns false, with a message on stderr, on failure.
  bool flush();
  std::size_t failures() const { return failures_; }
  const nlohmann::json& entries() const { return entries_; }

 private:
  std::string path_;
  nlohmann::json context_;
  nlohmann::json entries_ = nlohmann::json::array();
  std::size_t total_;
  std::size_t done_ = 0;
  std::size_t failures_ = 0;
  const std::map<std::string, nlohmann::json>& entry_fields_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace fusebench::bench
