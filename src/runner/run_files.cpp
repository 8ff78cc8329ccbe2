#include "run_files.hpp"

#include <cstring>
#include <iostream>

#include "fusebench/input_files.hpp"
#include "fusebench/report.hpp"
#include "fusebench/routing.hpp"

namespace fusebench::bench {

std::vector<char*> argv_for_gbench(int argc, char** argv) {
  static char no_file[] = "--benchmark_out=";
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i) {
    const bool ours = i > 0 && (std::strncmp(argv[i], "--benchmark_out=", 16) == 0 ||
                                std::strncmp(argv[i], "--benchmark_out_format=", 23) == 0);
    if (!ours) out.push_back(argv[i]);
  }
  out.push_back(no_file);
  out.push_back(nullptr);
  return out;
}

OutputTarget check_run_files(const Options& o, const std::string& benchmark_out) {
  for (const auto& c : o.model_configs) register_input("a --model-config file", c);
  for (const auto& w : o.weights) register_input("read by --weights", w);
  if (o.routing.kind == RoutingKind::file)
    register_input("the --routing=file: file", o.routing.path);
  if (!o.report.empty()) {
    check_output(o.report, "--report");
    for (const auto& dir : prepare_report_path(o.report, "--report"))
      std::cerr << "fusebench: creating directory " << dir << " for --report\n";
  }
  OutputTarget out;
  if (!benchmark_out.empty()) {
    out = check_output(benchmark_out, "--benchmark_out");
    for (const auto& dir : prepare_report_path(benchmark_out, "--benchmark_out"))
      std::cerr << "fusebench: creating directory " << dir << " for --benchmark_out\n";
  }
  return out;
}

BenchmarkOutTee::BenchmarkOutTee(std::unique_ptr<benchmark::BenchmarkReporter> display,
                                 const std::string& format)
    : display_(std::move(display)) {
  // As Google Benchmark builds its file reporter (CreateReporter): no colour, no tabular.
  if (format == "console") {
    file_ = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
  } else if (format == "csv") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    file_ = std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
  } else {
    file_ = std::make_unique<benchmark::JSONReporter>();
  }
  file_->SetOutputStream(&file_text_);
  file_->SetErrorStream(&file_text_);
  SetOutputStream(&display_->GetOutputStream());
  SetErrorStream(&display_->GetErrorStream());
}

void BenchmarkOutTee::sync_display() {
  display_->SetOutputStream(&GetOutputStream());
  display_->SetErrorStream(&GetErrorStream());
}

bool BenchmarkOutTee::ReportContext(const Context& context) {
  sync_display();
  const bool shown = display_->ReportContext(context);
  return file_->ReportContext(context) && shown;
}

void BenchmarkOutTee::ReportRuns(const std::vector<Run>& runs) {
  sync_display();
  display_->ReportRuns(runs);
  file_->ReportRuns(runs);
}

void BenchmarkOutTee::Finalize() {
  sync_display();
  display_->Finalize();
  file_->Finalize();
}

bool write_benchmark_out(const OutputTarget& target, const std::string& flag_value,
                         const std::string& text) {
  try {
    write_output(target, text);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "fusebench: error: --benchmark_out=" << flag_value << ": " << e.what() << "\n";
    return false;
  }
}

}  // namespace fusebench::bench
