#pragma once
// The files a fusebench run reads and writes, by the one rule of fusebench/input_files.hpp
// (issue 37): the inputs its flags name are registered, --report and --benchmark_out checked
// against them and against each other, and --benchmark_out written by the suite (Google
// Benchmark would open it itself, unchecked, and ignore a failed write).
#include <benchmark/benchmark.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fusebench/output_path.hpp"
#include "run_options.hpp"

namespace fusebench::bench {

// The argv Google Benchmark's Initialize is given: the command line without --benchmark_out and
// --benchmark_out_format, and with "--benchmark_out=" so BENCHMARK_OUT in the environment (read
// by Google Benchmark before main) asks it for no file. The pointers are argv's own (and one
// static string); the vector ends with a null pointer, its size() - 1 being the new argc.
std::vector<char*> argv_for_gbench(int argc, char** argv);

// Registers the inputs `o` names (model configs, checkpoint directories, a routing file), then
// checks --report and --benchmark_out (`benchmark_out`, "" when not given) by check_output,
// creating --report's missing directories (said on stderr). Throws std::invalid_argument naming
// the path and the rule. Returns how to write --benchmark_out (unset when not given).
OutputTarget check_run_files(const Options& o, const std::string& benchmark_out);

// The display reporter, also writing Google Benchmark's file reporter of `format` (json, console,
// csv) into memory: what --benchmark_out holds, written at the end by write_output.
class BenchmarkOutTee : public benchmark::BenchmarkReporter {
 public:
  BenchmarkOutTee(std::unique_ptr<benchmark::BenchmarkReporter> display, const std::string& format);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  std::string text() const { return file_text_.str(); }

 private:
  void sync_display();  // the display writes where this reporter was told to write
  std::unique_ptr<benchmark::BenchmarkReporter> display_, file_;
  std::ostringstream file_text_;
};

// Writes --benchmark_out; false (after saying why, naming the path and the error) on failure.
bool write_benchmark_out(const OutputTarget& target, const std::string& flag_value,
                         const std::string& text);

}  // namespace fusebench::bench
