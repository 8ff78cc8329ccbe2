#pragma once
// What the console shows, as Google Benchmark's own flags say (--benchmark_format,
// --benchmark_color, --benchmark_counters_tabular, and their BENCHMARK_* environment variables):
// our reporter wraps the display reporter those flags choose, which Google Benchmark only builds
// itself when no reporter is passed to RunSpecifiedBenchmarks.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

namespace fusebench::bench {

struct DisplayOptions {
  std::string format = "console";  // console | json | csv
  bool color = false;
  bool tabular = false;  // counters as columns (Google Benchmark's default: name=value)
  // --benchmark_out and its format: written by the suite (run_files.hpp), not Google Benchmark.
  std::string out;
  std::string out_format = "json";
};

// Reads the flags from the command line as given (Google Benchmark's Initialize removes them from
// argv), with Google Benchmark 1.7.1's defaults and meanings: color "auto" = stdout is a colour
// terminal. Throws std::invalid_argument for a format other than console, json, csv (for the
// display and for --benchmark_out_format).
DisplayOptions display_options(const std::vector<std::string>& args);

std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter(const DisplayOptions& options);

// Google Benchmark's test for a colour terminal (stdout is a tty and TERM is one it knows),
// except that a non-empty NO_COLOR, or a launcher (mpirun, srun) running this process, says no.
bool stdout_is_color_terminal();

}  // namespace fusebench::bench
