#pragma once
// Google Benchmark's display reporter for the sweep: shows the results through the display
// reporter Google Benchmark's flags chose (display.hpp), each row written whole, keeps the
// progress line apart from them (progress.hpp), and keeps the JSON report on disk up to date:
// written before the first group is measured and after every entry, so a crash mid-sweep loses
// nothing already measured.
//
// context.interrupted says whether the report holds the whole run: false only in the last write
// of a run that went through its sweep (mark_complete); true in every write before it (a report
// left behind by a run that was killed, or read while the run goes on) and in the last write of
// a run stopped by Ctrl-C or SIGTERM (mark_interrupted), with context.interrupted_note saying
// which. Entries the stopped run did not measure are left out, not written as failures.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fusebench/output_path.hpp"
#include "progress.hpp"

namespace fusebench::bench {

// The fields merged into each report entry, by fixture name (without Google Benchmark's
// suffixes) and repetition: main sets a fixture's descriptive fields (op, variant, model, ...)
// once; each call of the fixture's body (one per repetition, in order) records its result's
// fields over them. Google Benchmark reports a fixture's repetitions together, after the last
// call, so each repetition's entry is given its own call's fields, not the last call's.
class EntryFields {
 public:
  void set_base(const std::string& name, nlohmann::json fields);
  // The next call's (repetition's) result fields over the base ones; returns the entry's fields.
  const nlohmann::json& record(const std::string& name, const nlohmann::json& result);
  // The fields of repetition `repetition` of `name` (the first call is repetition 0); an
  // aggregate (`repetition` < 0) or a repetition not recorded gets the last call's, a fixture
  // never called its base fields; null where `name` has none.
  const nlohmann::json* find(const std::string& name, std::int64_t repetition) const;

 private:
  std::map<std::string, nlohmann::json> base_;
  std::map<std::string, std::vector<nlohmann::json>> calls_;
};

class ReportWriter : public benchmark::BenchmarkReporter {
 public:
  // `entry_fields` holds the fields merged into each JSON entry (EntryFields: a repetition's
  // entry gets its own). `display` shows the runs (console, json, csv).
  ReportWriter(std::string path, nlohmann::json context, const EntryFields& entry_fields,
               std::unique_ptr<benchmark::BenchmarkReporter> display, Progress progress);

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

  // Called before every write with the context and the entries so far: figures that depend on
  // the whole run (ceilings raised by later entries, the host's load at the end) are brought
  // up to date in every rewrite, so an interrupted run's report is as consistent as a finished
  // one.
  using Refresh = std::function<void(nlohmann::json& context, nlohmann::json& entries)>;
  void set_refresh(Refresh refresh) { refresh_ = std::move(refresh); }

  // Writes the report (atomically). Returns false, with a message on stderr, on failure.
  bool flush();
  // The run went through its whole sweep / was stopped (`note`: how, and what is missing). Both
  // take effect at the next flush().
  void mark_complete();
  void mark_interrupted(const std::string& note);
  std::size_t failures() const { return failures_; }
  const nlohmann::json& entries() const { return entries_; }
  // The first write, before anything is measured, failed (ReportContext then stops the run).
  bool first_write_failed() const { return first_write_failed_; }
  Progress& progress() { return progress_; }

 private:
  std::string path_;
  nlohmann::json context_;
  nlohmann::json entries_ = nlohmann::json::array();
  std::size_t failures_ = 0;
  const EntryFields& entry_fields_;
  std::unique_ptr<benchmark::BenchmarkReporter> display_;
  // The display writes here; each call's text then goes out in one write (show_display()).
  std::ostringstream display_text_;
  std::ostream* display_out_ = nullptr;
  void show_display();
  Progress progress_;
  OutputTarget target_;  // where path_ is written (fusebench/output_path.hpp)
  bool complete_ = false;
  bool final_ = false;  // marked complete or interrupted: the next flush is the last
  std::string interrupted_note_;
  bool first_write_failed_ = false;
  std::string last_counted_;  // the fixture the progress line last counted
  Refresh refresh_;
};

// "qkv/split/.../timing:eager/iterations:1/manual_time" -> "qkv/split/.../timing:eager"
std::string fixture_name(const std::string& run_name);

// What to say when fixtures failed: points to the report's error_message only when a report
// was written (`report_path` not empty).
std::string failure_summary(std::size_t failures, const std::string& report_path);

}  // namespace fusebench::bench
