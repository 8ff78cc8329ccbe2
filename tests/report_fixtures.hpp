#pragma once
// Report entries and documents for the gate's and the advisor's tests (tests/test_gate_*.cpp,
// tests/test_advise.cpp): one builder of each kind, so both test one report format.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace fusebench::test {

using nlohmann::json;

// A timed entry as the gate reads it: `us` microseconds, the gated counters, `extra` on top.
inline json entry(const std::string& name, double us, json extra = json::object()) {
  json e = {{"name", name},     {"run_name", name},  {"run_type", "iteration"},
            {"repetitions", 1}, {"iterations", 100}, {"real_time", us},
            {"cpu_time", us},   {"time_unit", "us"}, {"model_launches", 3.0},
            {"launches", 3.0},  {"kernels", 3.0},    {"dram_read_bytes", 1.0e6}};
  for (const auto& [k, v] : extra.items()) e[k] = v;
  return e;
}

// A GPU report's document (the gate's device identity is context.gpu_name).
inline json report(std::vector<json> entries, std::string gpu = "NVIDIA H200") {
  return {{"context", {{"backend", "cuda"}, {"gpu_name", gpu}}}, {"benchmarks", entries}};
}

// A CPU report's context, as fusebench writes it (cpu_threads from --cpu-threads).
inline json context(const std::string& cpu = "AMD EPYC", const std::string& rev = "abc123") {
  return {{"backend", "cpu"},
          {"cpu_model", cpu},
          {"git_revision", rev},
          {"date", "2026-12-02T10:00:00"}};
}

// One fusebench comparison's axes; name_of and fixture entries follow the binary's name format.
struct Fixture {
  std::string op = "qkv", model = "qwen3-0.6b", layer = "attention", dtype = "fp32",
              timing = "eager", comm = "";
  int tp = 1;
};

inline std::string name_of(const Fixture& f, const std::string& variant, std::int64_t tokens) {
  std::string n = f.op + "/" + variant + "/model:" + f.model + "/layer:" + f.layer +
                  "/tokens:" + std::to_string(tokens) + "/tp:" + std::to_string(f.tp) +
                  "/dtype:" + f.dtype + "/weights:random";
  if (!f.comm.empty()) n += "/comm:" + f.comm;
  return n + "/timing:" + f.timing + "/iterations:1/manual_time";
}

// A fixture's entry as the advisor reads it (fields and name agree), `extra` on top.
inline json entry(const Fixture& f, const std::string& variant, std::int64_t tokens,
                  json extra = json::object()) {
  const std::string n = name_of(f, variant, tokens);
  json e = {{"name", n},
            {"run_name", n},
            {"run_type", "iteration"},
            {"real_time", 10.0},
            {"time_unit", "us"},
            {"op", f.op},
            {"variant", variant},
            {"model", f.model},
            {"layer", f.layer},
            {"tokens", tokens},
            {"tp", f.tp},
            {"dtype", f.dtype},
            {"timing", f.timing},
            {"weights", "random"},
            {"backend", "cpu"},
            {"timing_stop", "converged"},
            {"speedup_baseline", f.op.rfind("tp_", 0) == 0 ? "naive" : "split"}};
  if (!f.comm.empty()) e["comm"] = f.comm;
  for (const auto& [k, v] : extra.items()) e[k] = v;
  return e;
}

// split and fused at one token count, fused's paired speedup over split as given.
inline void add_pair(json& benches, const Fixture& f, std::int64_t tokens, double s, double lo,
                     double hi, int pairs = 30, json extra = json::object()) {
  json split = entry(f, "split", tokens, extra);
  split["speedup_over"] = {
      {"fused", {{"speedup", 1 / s}, {"ci_low", 1 / hi}, {"ci_high", 1 / lo}, {"pairs", pairs}}}};
  json fused = entry(f, "fused", tokens, extra);
  fused["speedup"] = s;
  fused["speedup_ci_low"] = lo;
  fused["speedup_ci_high"] = hi;
  fused["speedup_pairs"] = pairs;
  fused["speedup_over"] = {
      {"split", {{"speedup", s}, {"ci_low", lo}, {"ci_high", hi}, {"pairs", pairs}}}};
  benches.push_back(split);
  benches.push_back(fused);
}

// Reports both readers must refuse (issue 27 item 5), each with the message fragment that names
// the entry and the value: times not finite (no strict JSON: the document reader refuses them),
// 0, negative, missing or not a number, and a name twice.
inline std::vector<std::pair<std::string, std::string>> bad_time_reports() {
  const std::string name = "qkv/fused/model:m/tokens:1/tp:1/dtype:bf16/manual_time";
  const std::string at = "benchmarks[0] (" + name + ")";
  auto doc = [&](std::vector<json> entries) {
    return json{{"context", {{"backend", "cuda"}, {"gpu_name", "NVIDIA H200"}}},
                {"benchmarks", entries}}
        .dump();
  };
  auto with = [&](const char* key, json value) {
    json e = {{"name", name}, {"run_type", "iteration"}, {"real_time", 10.0}, {"time_unit", "us"}};
    if (value.is_null()) {
      e.erase(key);
    } else {
      e[key] = value;
    }
    return e;
  };
  std::string infinite = doc({with("real_time", 10.0)});
  infinite.replace(infinite.find("10.0"), 4, "1e999");  // beyond a double: no finite number
  std::string nan = doc({with("real_time", 10.0)});
  nan.replace(nan.find("10.0"), 4, "NaN");  // as Google Benchmark writes it
  return {
      {infinite, "number overflow parsing '1e999'"},
      {nan, "it contains NaN/Infinity, which Google Benchmark writes for non-finite values"},
      {doc({with("real_time", 0)}), at + ".real_time: 0 is not a valid time: expected a positive"},
      {doc({with("real_time", -2.5)}), at + ".real_time: -2.5 is not a valid time"},
      {doc({with("real_time", nullptr)}), at + ".real_time: missing"},
      {doc({with("real_time", "fast")}),
       at + ".real_time: expected a number of time, got \"fast\""},
      {doc({with("time_median", 0.0)}), at + ".time_median: 0.0 is not a valid time"},
      {doc({with("real_time", 10.0), with("real_time", 11.0)}),
       "benchmarks[1] (" + name + ").name: \"" + name +
           "\" appears twice (benchmarks[0] and benchmarks[1])"},
  };
}

}  // namespace fusebench::test
