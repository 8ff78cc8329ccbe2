#include "report_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "fusebench/output_path.hpp"
#include "fusebench/report.hpp"
#include "interrupt.hpp"

namespace fusebench::bench {
namespace {

// The line Google Benchmark prints when its library was compiled without NDEBUG.
constexpr const char* kDebugWarning = "***WARNING*** Library was built as DEBUG";

// Said instead of that warning, once: Debian's libbenchmark is built that way (see README).
std::string debug_library_note() {
  return "fusebench: note: Google Benchmark's library here was built without NDEBUG (Debian's "
         "libbenchmark is: its default -O2 build with asserts on), so it calls itself DEBUG. "
         "fusebench times every entry itself and hands Google Benchmark the result (manual "
         "time), so the numbers are not affected; context.library_build_type describes the "
         "library, context.fusebench_build_type this binary.\n";
}

// The skip message of a Google Benchmark run (its field's name changed in 1.8).
std::string skip_message(const benchmark::BenchmarkReporter::Run& run) {
#ifdef FUSEBENCH_GBENCH_HAS_SKIPPED
  return run.skipped ? run.skip_message : "";
#else
  return run.error_occurred ? run.error_message : "";
#endif
}

// What an unfinished run's report says of itself (context.interrupted_note).
constexpr const char* kRunningNote =
    "written while the run was going on (the report is rewritten before the first group and "
    "after every entry; a run that goes through its sweep rewrites it with interrupted: false): "
    "if that run is over, it was killed before it could finish, and entries are missing";

// `text` to stdout in one write, after what the C++ and C streams hold, so that a line on
// stderr written meanwhile by this process cannot land inside it.
void write_whole_to_stdout(const std::string& text) {
  std::cout.flush();
  std::fflush(stdout);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stdout closed: nothing to show it to
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

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

std::string failure_summary(std::size_t failures, const std::string& report_path) {
  return "fusebench: " + std::to_string(failures) + " fixture(s) failed; " +
         (report_path.empty() ? std::string("their errors are in the results above")
                              : "see error_message in " + report_path);
}

void EntryFields::set_base(const std::string& name, nlohmann::json fields) {
  base_[name] = std::move(fields);
}

const nlohmann::json& EntryFields::record(const std::string& name, const nlohmann::json& result) {
  auto base = base_.find(name);
  nlohmann::json fields = base == base_.end() ? nlohmann::json::object() : base->second;
  for (const auto& [key, value] : result.items()) fields[key] = value;
  std::vector<nlohmann::json>& calls = calls_[name];
  calls.push_back(std::move(fields));
  return calls.back();
}

const nlohmann::json* EntryFields::find(const std::string& name, std::int64_t repetition) const {
  if (auto it = calls_.find(name); it != calls_.end() && !it->second.empty()) {
    const std::vector<nlohmann::json>& calls = it->second;
    if (repetition >= 0 && static_cast<std::size_t>(repetition) < calls.size())
      return &calls[static_cast<std::size_t>(repetition)];
    return &calls.back();
  }
  if (auto it = base_.find(name); it != base_.end()) return &it->second;
  return nullptr;
}

ReportWriter::ReportWriter(std::string path, nlohmann::json context,
                           const EntryFields& entry_fields,
                           std::unique_ptr<benchmark::BenchmarkReporter> display, Progress progress)
    : path_(std::move(path)),
      context_(std::move(context)),
      entry_fields_(entry_fields),
      display_(std::move(display)),
      progress_(std::move(progress)) {
  display_out_ = &display_->GetOutputStream();
  display_->SetOutputStream(&display_text_);
  if (!path_.empty()) {
    target_ = resolve_output(path_, "--report");
    if (target_.fd == STDOUT_FILENO && display_out_ == &std::cout) {
      // The report alone on stdout, so it can be piped into a JSON reader.
      display_out_ = &std::cerr;
      target_.note += "; the result rows go to standard error";
    }
    if (!target_.note.empty()) std::cerr << "fusebench: " << target_.note << "\n";
  }
}

void ReportWriter::show_display() {
  const std::string text = display_text_.str();
  display_text_.str("");
  if (text.empty()) return;
  if (display_out_ == &std::cout) {
    write_whole_to_stdout(text);
  } else {
    display_out_->write(text.data(), static_cast<std::streamsize>(text.size()));
    display_out_->flush();
  }
}

void ReportWriter::mark_complete() {
  complete_ = true;
  final_ = true;
  interrupted_note_.clear();
}

void ReportWriter::mark_interrupted(const std::string& note) {
  complete_ = false;
  final_ = true;
  interrupted_note_ = note;
}

bool ReportWriter::ReportContext(const Context& context) {
  const nlohmann::json gbench = gbench_context_to_json(context);
  for (auto it = gbench.begin(); it != gbench.end(); ++it) {
    if (!context_.contains(it.key())) context_[it.key()] = it.value();
  }
  // The display reporter prints the machine context to its error stream: caught here so the
  // DEBUG warning is replaced by what it means for these numbers.
  std::ostringstream basic;
  display_->SetErrorStream(&basic);
  const bool ok = display_->ReportContext(context);
  display_->SetErrorStream(&std::cerr);
  std::istringstream lines(basic.str());
  std::string line;
  bool noted = false;
  while (std::getline(lines, line)) {
    if (line.rfind(kDebugWarning, 0) == 0) {
      if (!noted) std::cerr << debug_library_note();
      noted = true;
      continue;
    }
    std::cerr << line << "\n";
  }
  std::cerr << std::flush;
  show_display();
  // The report exists from here on, before the first group is measured.
  if (!path_.empty() && !flush()) {
    first_write_failed_ = true;
    return false;  // Google Benchmark then runs nothing
  }
  return ok;
}

void ReportWriter::ReportRuns(const std::vector<Run>& runs) {
  // Results on stdout, progress on stderr: stdout is flushed before the progress line, so the
  // two never interleave inside a line when both go to one pipe or file.
  progress_.clear();
  // Entries a stopped run never measured are not results: neither shown nor written.
  std::vector<Run> measured;
  for (const auto& run : runs) {
    if (skip_message(run) != kNotMeasuredInterrupted) measured.push_back(run);
  }
  if (measured.empty()) return;
  display_->ReportRuns(measured);
  show_display();
  for (const auto& run : measured) {
    nlohmann::json entry = run_to_json(run);
    const std::string name = fixture_name(run.run_name.str());
    // An aggregate (mean, median, ...) gets the last repetition's fields, as before.
    const std::int64_t repetition =
        run.run_type == Run::RT_Iteration ? static_cast<std::int64_t>(run.repetition_index) : -1;
    if (const nlohmann::json* fields = entry_fields_.find(name, repetition)) {
      for (const auto& [key, value] : fields->items()) entry[key] = value;
    }
    if (entry.value("error_occurred", false)) ++failures_;
    entries_.push_back(std::move(entry));
  }
  // A fixture's repetitions come in one call and its aggregates in the next (or alone, with
  // --benchmark_display_aggregates_only): counted once, on its first call.
  {
    const std::string name = fixture_name(measured.front().run_name.str());
    if (name != last_counted_) progress_.finished(name);
    last_counted_ = name;
  }
  flush();
}

void ReportWriter::Finalize() {
  progress_.end();
  display_->Finalize();
  show_display();
}

bool ReportWriter::flush() {
  if (path_.empty()) return true;
  // A stream (stdout, a fifo, a device) cannot be rewritten: it gets the last write alone.
  if (!target_.atomic && !final_) return true;
  if (refresh_) refresh_(context_, entries_);
  context_["interrupted"] = !complete_;
  if (complete_) {
    context_.erase("interrupted_note");
  } else {
    context_["interrupted_note"] = interrupted_note_.empty() ? kRunningNote : interrupted_note_;
  }
  std::vector<std::string> dropped;
  nlohmann::json report = {{"context", context_}, {"benchmarks", entries_}};
  report = sanitize(report, &dropped);
  if (!dropped.empty()) {
    // Recorded so a reader knows a value existed but was not a finite number.
    report["context"]["non_finite_values_dropped"] = dropped;
  }
  try {
    write_output(target_, report.dump(2) + "\n");
    return true;
  } catch (const std::exception& e) {
    progress_.clear();
    std::cerr << "fusebench: cannot write report: " << e.what() << "\n";
    return false;
  }
}

}  // namespace fusebench::bench
