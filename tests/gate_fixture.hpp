#pragma once
// The gate's tests (tests/test_gate_*.cpp, one executable): the Gate fixture runs the gate's
// command line on a baseline and a current report written to a fresh folder, and keeps what it
// printed. Not in an anonymous namespace: every file's TEST_F(Gate, ...) must share one fixture
// class, as GoogleTest requires of a test suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fusebench/gate.hpp"
#include "report_fixtures.hpp"

namespace fusebench::test {

namespace fs = std::filesystem;

class Gate : public ::testing::Test {
 protected:
  fs::path dir;
  std::string out, err;
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("fusebench_gate_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  }
  int run(const json& base, const json& cur, std::vector<std::string> flags = {}) {
    return run_text(base.dump(), cur.dump(), flags);
  }
  int run_text(const std::string& base, const std::string& cur,
               std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {write("base.json", base), write("cur.json", cur)};
    args.insert(args.end(), flags.begin(), flags.end());
    return run_paths(std::move(args));
  }
  // The gate's command line as given (the paths and flags after the program's name).
  int run_paths(std::vector<std::string> args) {
    args.insert(args.begin(), "fusebench-gate");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream o, e;
    const int rc = fusebench::gate::run_cli(static_cast<int>(argv.size()), argv.data(), o, e);
    out = o.str();
    err = e.str();
    return rc;
  }
};

inline const std::string kA = "qkv/split/model:m/tokens:1/tp:1/dtype:bf16/manual_time";
inline const std::string kB = "qkv/fused/model:m/tokens:1/tp:1/dtype:bf16/manual_time";

// Issue 23: on a loaded CPU the entries' CVs reach 100%, so the old limit (2 combined CVs,
// 188-208%) could never report FASTER: -97.4% showed as ok. The ratio's interval comes from the
// medians' own 95% intervals (time_median_ci_low/high, in seconds as time_median).
inline json timed(double us, double cv, double half_width, json extra = json::object()) {
  const double s = us * 1e-6;
  json e = entry(kA, us,
                 {{"time_cv", cv},
                  {"samples", 40.0},
                  {"time_median", s},
                  {"time_median_ci_low", s * (1 - half_width)},
                  {"time_median_ci_high", s * (1 + half_width)}});
  for (const auto& [k, v] : extra.items()) e[k] = v;
  return e;
}

}  // namespace fusebench::test
