#pragma once
// Google Benchmark's --benchmark_* flags (and their BENCHMARK_* environment variables) as
// fusebench treats them. Each fixture is one Google Benchmark entry run with Iterations(1) and
// timed by fusebench's own engine (fixture_runner.hpp, docs/timing.md), so Google Benchmark's
// timing flags cannot mean here what they mean there: each flag is honoured, mapped onto our flag
// of the same meaning, or refused with what to use instead. Checked before
// benchmark::Initialize, which would print its own message for a bad value and then leave the
// flag behind for a second one.
#include <map>
#include <string>
#include <vector>

namespace fusebench::bench {

enum class GbenchTreatment { honoured, mapped, refused };

struct GbenchFlag {
  std::string name;  // without the leading "--"
  GbenchTreatment treatment;
  std::string what;  // what it does here, or why it is refused and what to use
};

// Every flag of Google Benchmark 1.7.1 and 1.9 (benchmark_dry_run), in --help order.
const std::vector<GbenchFlag>& gbench_flags();

// What the honoured and mapped flags ask of fusebench itself.
struct GbenchChoices {
  bool list = false;  // --benchmark_list_tests: the same as --list
  // --benchmark_context=key=value,...: also recorded in the report (context.benchmark_context).
  std::map<std::string, std::string> context;
};

// Reads `args` (argv as given) and the environment. Throws std::invalid_argument naming the flag
// for a refused flag and for a bad value of --benchmark_repetitions, --benchmark_list_tests or
// --benchmark_context.
GbenchChoices check_gbench_flags(const std::vector<std::string>& args);

// How Google Benchmark reads a flag's value (IsTruthyFlagValue, commandlineflags.cc): "", "1",
// "true", "yes", "on" ... are true; "0", "f", "n", "false", "no", "off" false.
bool gbench_truthy(std::string value);
// The flag's environment variable: BENCHMARK_FORMAT for benchmark_format.
std::string gbench_env_name(const std::string& flag);

// The flag table for --help: one line per flag, what it does under fusebench.
std::string gbench_flags_help();

}  // namespace fusebench::bench
