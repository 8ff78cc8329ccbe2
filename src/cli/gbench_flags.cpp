#include "gbench_flags.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace fusebench::bench {
namespace {

using T = GbenchTreatment;

struct Entry {
  GbenchFlag flag;
  bool is_bool;  // Google Benchmark takes a bare --flag as true
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {{"benchmark_list_tests", T::mapped,
        "the same as --list: prints the fixtures the flags and --benchmark_filter select, runs "
        "nothing"},
       true},
      {{"benchmark_filter", T::honoured,
        "selects fixtures by full name (an extended regex; a leading '-' excludes); --list, "
        "--verify, the memory check, the progress line and the comparison groups follow it"},
       false},
      {{"benchmark_min_time", T::refused,
        "fusebench's timing engine decides how long each comparison group runs "
        "(docs/timing.md): use --timing-min-time=SECONDS (measured time each variant "
        "accumulates before it may stop), --timing-max-time=SECONDS (the timeout per entry) or "
        "--timing-target-ci=HALF_WIDTH (the precision to stop at)"},
       false},
      {{"benchmark_min_warmup_time", T::refused,
        "the timing engine warms every variant up before timing it (docs/timing.md); Google "
        "Benchmark's warm-up would measure each comparison group once more and throw it away"},
       false},
      {{"benchmark_repetitions", T::honoured,
        "N >= 1: each comparison group is measured N times, each a fresh measurement, and "
        "Google Benchmark's aggregates (mean, median, stddev, cv) are added"},
       false},
      {{"benchmark_enable_random_interleaving", T::refused,
        "the variants of each comparison group are already measured interleaved, round by "
        "round, in one call (docs/timing.md), so shuffling Google Benchmark's entries "
        "interleaves nothing more: use --benchmark_repetitions=N to measure each group N times"},
       true},
      {{"benchmark_report_aggregates_only", T::honoured,
        "with --benchmark_repetitions: only the aggregates, on stdout, in --report and in "
        "--benchmark_out"},
       true},
      {{"benchmark_display_aggregates_only", T::refused,
        "fusebench writes --report from what stdout shows, so the repetitions would be missing "
        "from the report too: use --benchmark_report_aggregates_only=true (aggregates only, "
        "everywhere) or leave both out"},
       true},
      {{"benchmark_format", T::honoured, "stdout's format: console, json or csv"}, false},
      {{"benchmark_out", T::honoured, "Google Benchmark's own report file, beside --report"},
       false},
      {{"benchmark_out_format", T::honoured, "--benchmark_out's format: json, console or csv"},
       false},
      {{"benchmark_color", T::honoured, "auto (colour on a colour terminal only), true or false"},
       false},
      {{"benchmark_counters_tabular", T::honoured, "counters as columns on stdout"}, true},
      {{"benchmark_context", T::honoured,
        "key=value,...: shown in Google Benchmark's context and recorded in --report's "
        "context.benchmark_context"},
       false},
      {{"benchmark_time_unit", T::refused,
        "every entry is reported in microseconds (time_unit us), so the reports of different "
        "runs compare directly"},
       false},
      {{"benchmark_perf_counters", T::refused,
        "the timed region runs inside fusebench's engine, outside Google Benchmark's loop, so "
        "its counters would count none of it: fusebench's own passes are --launch-counts and "
        "--dram-counters (docs/counters.md); for other hardware counters run fusebench-region "
        "under perf or ncu"},
       false},
      {{"benchmark_dry_run", T::refused,
        "use --list (the fixtures, nothing run) or --verify (every variant checked once before "
        "the sweep)"},
       true},
      {{"v", T::honoured, "Google Benchmark's log verbosity (a whole number)"}, false},
  };
  return entries;
}

// Where a flag's value came from, as a message names it.
struct Given {
  std::string value;
  std::string where;  // "--benchmark_min_time=3" or "BENCHMARK_MIN_TIME=3 (environment)"
  std::string label;  // "--benchmark_min_time" or "BENCHMARK_MIN_TIME (environment)"
  bool has_value = true;
};

// The last --flag[=value] on the command line, else the environment (as Google Benchmark
// reads them). `v` has no environment variable of its own worth honouring.
std::optional<Given> find_given(const std::vector<std::string>& args, const Entry& e) {
  std::optional<Given> given;
  const std::string bare = "--" + e.flag.name, prefix = bare + "=";
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == bare) given = Given{e.is_bool ? "true" : "", bare, bare, e.is_bool};
    if (args[i].rfind(prefix, 0) == 0) given = Given{args[i].substr(prefix.size()), args[i], bare};
  }
  if (given || e.flag.name == "v") return given;
  const std::string env = gbench_env_name(e.flag.name);
  if (const char* value = std::getenv(env.c_str()); value != nullptr && *value != '\0')
    return Given{value, env + "=" + value + " (environment)", env + " (environment)"};
  return std::nullopt;
}

std::optional<std::int64_t> whole_number(const std::string& text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::map<std::string, std::string> parse_context(const Given& g) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= g.value.size()) {
    const std::size_t comma = std::min(g.value.find(',', start), g.value.size());
    const std::string pair = g.value.substr(start, comma - start);
    const std::size_t eq = pair.find('=');
    if (eq == 0 || eq == std::string::npos || pair.find('=', eq + 1) != std::string::npos) {
      throw std::invalid_argument(g.label + ": '" + pair +
                                  "' is not key=value (give --benchmark_context=key=value or "
                                  "key=value,key2=value2)");
    }
    out[pair.substr(0, eq)] = pair.substr(eq + 1);
    start = comma + 1;
  }
  return out;
}

}  // namespace

const std::vector<GbenchFlag>& gbench_flags() {
  static const std::vector<GbenchFlag> flags = [] {
    std::vector<GbenchFlag> out;
    for (const auto& e : table()) out.push_back(e.flag);
    return out;
  }();
  return flags;
}

GbenchChoices check_gbench_flags(const std::vector<std::string>& args) {
  GbenchChoices choices;
  for (const Entry& e : table()) {
    const auto given = find_given(args, e);
    if (!given) continue;
    if (e.flag.treatment == T::refused) {
      if (e.is_bool && !gbench_truthy(given->value)) continue;  // turned off: asks nothing
      throw std::invalid_argument(given->where + " is not supported by fusebench: " + e.flag.what);
    }
    if (!given->has_value) {
      throw std::invalid_argument(given->where + " has no value: give it as " + given->where +
                                  "=VALUE (fusebench --help lists what each Google Benchmark "
                                  "flag does here)");
    }
    const std::string& name = e.flag.name;
    if (name == "benchmark_repetitions") {
      const auto n = whole_number(given->value);
      if (!n || *n < 1 || *n > INT32_MAX) {
        throw std::invalid_argument(
            given->label + ": '" + given->value +
            "' is invalid (a whole number >= 1: how many times each comparison group is measured; "
            "0 would measure nothing)");
      }
    } else if (name == "v") {
      if (!whole_number(given->value)) {
        throw std::invalid_argument(given->label + ": '" + given->value +
                                    "' is invalid (Google Benchmark's log verbosity, a whole "
                                    "number)");
      }
    } else if (name == "benchmark_list_tests") {
      choices.list = gbench_truthy(given->value);
    } else if (name == "benchmark_context") {
      choices.context = parse_context(*given);
    }
  }
  return choices;
}

std::string gbench_flags_help() {
  std::string text;
  for (const auto& f : gbench_flags()) {
    const char* treatment = f.treatment == T::honoured ? "honoured"
                            : f.treatment == T::mapped ? "mapped"
                                                       : "refused";
    text += "  --" + f.name + " (" + treatment + "): " + f.what + "\n";
  }
  return text;
}

bool gbench_truthy(std::string value) {
  if (value.size() == 1) {
    const char v = value[0];
    return std::isalnum(static_cast<unsigned char>(v)) && std::strchr("0fFnN", v) == nullptr;
  }
  if (value.empty()) return true;
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return value != "false" && value != "no" && value != "off";
}

std::string gbench_env_name(const std::string& flag) {
  std::string env = flag;
  std::transform(env.begin(), env.end(), env.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return env;
}

}  // namespace fusebench::bench
