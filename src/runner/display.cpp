#include "display.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "cli/gbench_flags.hpp"
#include "launch_rank.hpp"

namespace fusebench::bench {
namespace {

// The flag's environment variable (BENCHMARK_FORMAT for benchmark_format), then the last
// --flag=value on the command line, as Google Benchmark reads them.
std::string string_flag(const std::vector<std::string>& args, const std::string& flag,
                        const std::string& fallback) {
  const char* from_env = std::getenv(gbench_env_name(flag).c_str());
  std::string value = from_env != nullptr ? from_env : fallback;
  const std::string prefix = "--" + flag + "=";
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind(prefix, 0) == 0) value = args[i].substr(prefix.size());
  }
  return value;
}

bool bool_flag(const std::vector<std::string>& args, const std::string& flag, bool fallback) {
  bool value = gbench_truthy(string_flag({}, flag, fallback ? "true" : "false"));  // environment
  const std::string bare = "--" + flag, prefix = bare + "=";
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == bare) value = true;  // a bool flag alone means true
    if (args[i].rfind(prefix, 0) == 0) value = gbench_truthy(args[i].substr(prefix.size()));
  }
  return value;
}

void check_format(const std::string& flag, const std::string& value) {
  if (value != "console" && value != "json" && value != "csv") {
    throw std::invalid_argument("--" + flag + "=" + value +
                                " is invalid (Google Benchmark's formats: console, json, csv)");
  }
}

}  // namespace

bool stdout_is_color_terminal() {
  // https://no-color.org: a non-empty NO_COLOR turns automatic colour off.
  if (const char* no_color = std::getenv("NO_COLOR"); no_color != nullptr && *no_color != '\0')
    return false;
  // Under mpirun or srun stdout may be a pseudo-terminal of the launcher's while the job's
  // output goes to a file: no automatic colour there.
  if (launcher_rank() >= 0) return false;
  static const char* const known[] = {
      "xterm",         "xterm-color",  "xterm-256color",        "screen", "screen-256color", "tmux",
      "tmux-256color", "rxvt-unicode", "rxvt-unicode-256color", "linux",  "cygwin"};
  const char* term = std::getenv("TERM");
  const bool known_term =
      term != nullptr && std::any_of(std::begin(known), std::end(known),
                                     [term](const char* k) { return std::strcmp(term, k) == 0; });
  return known_term && ::isatty(::fileno(stdout)) != 0;
}

DisplayOptions display_options(const std::vector<std::string>& args) {
  DisplayOptions o;
  o.format = string_flag(args, "benchmark_format", "console");
  check_format("benchmark_format", o.format);
  o.out = string_flag(args, "benchmark_out", "");
  o.out_format = string_flag(args, "benchmark_out_format", "json");
  check_format("benchmark_out_format", o.out_format);
  const std::string color = string_flag(args, "benchmark_color", "auto");
  o.color = color == "auto" ? stdout_is_color_terminal() : gbench_truthy(color);
  o.tabular = bool_flag(args, "benchmark_counters_tabular", false);
  return o;
}

std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter(const DisplayOptions& o) {
  if (o.format == "json") return std::make_unique<benchmark::JSONReporter>();
  if (o.format == "csv") {
    // Deprecated in Google Benchmark 1.8+, still what --benchmark_format=csv gives there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
  }
  int opts = benchmark::ConsoleReporter::OO_None;
  if (o.color) opts |= benchmark::ConsoleReporter::OO_Color;
  if (o.tabular) opts |= benchmark::ConsoleReporter::OO_Tabular;
  return std::make_unique<benchmark::ConsoleReporter>(
      static_cast<benchmark::ConsoleReporter::OutputOptions>(opts));
}

}  // namespace fusebench::bench
