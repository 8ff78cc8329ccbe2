// The regression gate on unusable input through run_cli and its reader: exit 2 and a message
// naming the file and the field; its flags, exit codes and outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusebench/gate.hpp"
#include "gate_fixture.hpp"

using nlohmann::json;
namespace fs = std::filesystem;
using fusebench::test::entry;
using fusebench::test::Gate;
using fusebench::test::kA;
using fusebench::test::report;

// Unusable input: exit 2 and a message naming the file and the field.
TEST_F(Gate, MalformedJson) {
  EXPECT_EQ(run_text(report({entry(kA, 10)}).dump(), "{\"context\": {"), 2);
  EXPECT_NE(err.find("cur.json: document: not valid JSON"), std::string::npos) << err;
}

TEST_F(Gate, NaNAsGoogleBenchmarkWritesIt) {
  std::string text = report({entry(kA, 10)}).dump();
  const auto pos = text.find("\"real_time\":10");
  ASSERT_NE(pos, std::string::npos) << text;
  text.replace(pos, 14, "\"real_time\":NaN");
  EXPECT_EQ(run_text(report({entry(kA, 10)}).dump(), text), 2);
  EXPECT_NE(err.find("NaN"), std::string::npos) << err;
  EXPECT_NE(err.find("cur.json"), std::string::npos) << err;
}

TEST_F(Gate, OverflowingNumberIsRejected) {
  std::string text = report({entry(kA, 10)}).dump();
  const auto pos = text.find("\"launches\":3.0");
  ASSERT_NE(pos, std::string::npos) << text;
  text.replace(pos, 14, "\"launches\":1e999");
  EXPECT_EQ(run_text(text, report({entry(kA, 10)}).dump()), 2);
  EXPECT_NE(err.find("base.json"), std::string::npos) << err;
  EXPECT_NE(err.find("number overflow parsing '1e999'"), std::string::npos) << err;
}

TEST_F(Gate, WrongSchema) {
  const std::string good = report({entry(kA, 10)}).dump();
  struct Case {
    json doc;
    std::string field;
  };
  json no_time = entry(kA, 10);
  no_time.erase("real_time");
  json str_time = entry(kA, 10, {{"real_time", "fast"}});
  json bad_unit = entry(kA, 10, {{"time_unit", "fortnights"}});
  json no_name = entry(kA, 10);
  no_name.erase("name");
  const std::vector<Case> cases = {
      {json::array(), "top level"},
      {json{{"context", json::object()}}, "benchmarks: missing"},
      {json{{"benchmarks", json::array()}}, "context: missing"},
      {json{{"context", json::object()}, {"benchmarks", json::object()}},
       "benchmarks: expected an array"},
      {report({json(42)}), "benchmarks[0]: expected an object"},
      {report({no_name}), "benchmarks[0].name"},
      {report({no_time}), ".real_time: missing"},
      {report({str_time}), ".real_time: expected a number of time, got \"fast\""},
      {report({bad_unit}), "unknown time unit"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(run_text(good, c.doc.dump()), 2) << c.doc.dump();
    EXPECT_NE(
        err.find("cur.json: " + (c.field.rfind("benchmarks", 0) == 0 ||
                                         c.field.rfind("context", 0) == 0 || c.field == "top level"
                                     ? c.field
                                     : std::string())),
        std::string::npos)
        << err;
    EXPECT_NE(err.find(c.field), std::string::npos) << err;
  }
}

TEST_F(Gate, MissingFileAndBadFlags) {
  std::vector<const char*> argv = {"fusebench-gate", "/nonexistent/base.json",
                                   "/nonexistent/cur.json"};
  std::ostringstream o, e;
  // No baseline is NOT JUDGED (or exit 2 with --require-baseline: its own test); an unreadable
  // current report is unusable input.
  EXPECT_EQ(fusebench::gate::run_cli(3, argv.data(), o, e), 2);
  EXPECT_NE(e.str().find("/nonexistent/cur.json: file: cannot be opened"), std::string::npos)
      << e.str();
  const json r = report({entry(kA, 10)});
  EXPECT_EQ(run(r, r, {"--time-threshold=-3"}), 2);
  EXPECT_EQ(run(r, r, {"--no-such-flag"}), 2);
  // Issue 23: CLI11's range check on a double printed a range of 300 digits.
  EXPECT_EQ(run(r, r, {"--time-threshold=abc"}), 2);
  EXPECT_NE(err.find("--time-threshold: \"abc\" is not a valid value: expected a number >= 0 "
                     "(a percentage, e.g. 5 for 5%)"),
            std::string::npos)
      << err;
  EXPECT_LT(err.size(), 200u) << err;
  EXPECT_EQ(run(r, r, {"--bytes-tolerance=-1"}), 2);
  EXPECT_NE(err.find("--bytes-tolerance: \"-1\" is not a valid value"), std::string::npos) << err;
}

TEST_F(Gate, DirectoryIsNamedAsADirectory) {
  // Issue 23: a directory read as "not valid JSON ... unexpected end of input".
  const auto report_path = write("base.json", report({entry(kA, 10)}).dump());
  const std::string d = dir.string();
  std::vector<const char*> argv = {"fusebench-gate", report_path.c_str(), d.c_str()};
  std::ostringstream o, e;
  EXPECT_EQ(fusebench::gate::run_cli(3, argv.data(), o, e), 2);
  EXPECT_NE(e.str().find(d + ": file: is a directory; expected a report.json file"),
            std::string::npos)
      << e.str();
  EXPECT_EQ(e.str().find("not valid JSON"), std::string::npos) << e.str();
  // A directory holding one is named.
  std::ofstream(dir / "report.json") << report({entry(kA, 10)}).dump();
  std::ostringstream o2, e2;
  EXPECT_EQ(fusebench::gate::run_cli(3, argv.data(), o2, e2), 2);
  EXPECT_NE(e2.str().find("(this directory has one: " + (dir / "report.json").string() + ")"),
            std::string::npos)
      << e2.str();
}

// Found while fuzzing: a non-string aggregate_unit threw nlohmann's type_error out of the reader.
TEST(GateReader, OddAggregateUnitIsTolerated) {
  const json doc = {{"context", json::object()},
                    {"benchmarks",
                     {entry(kA, 10), json{{"name", kA + "_median"},
                                          {"run_name", kA},
                                          {"run_type", "aggregate"},
                                          {"aggregate_name", "median"},
                                          {"aggregate_unit", 5},
                                          {"real_time", 9.0},
                                          {"time_unit", "us"}}}}};
  const auto r = fusebench::gate::parse_report(doc.dump(), "x.json");
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_DOUBLE_EQ(r.entries[0].time_ns, 9000.0);  // the median aggregate wins over the repetition
}

TEST(GateReader, CounterKinds) {
  using fusebench::gate::is_bytes_counter;
  using fusebench::gate::is_exact_counter;
  EXPECT_TRUE(is_exact_counter("launches"));
  EXPECT_TRUE(is_exact_counter("model_launches"));
  EXPECT_TRUE(is_exact_counter("kernels"));
  EXPECT_TRUE(is_exact_counter("model_bytes"));
  EXPECT_FALSE(is_exact_counter("launches_vs_model"));
  EXPECT_TRUE(is_bytes_counter("dram_read_bytes"));
  EXPECT_TRUE(is_bytes_counter("l2_bytes"));
  EXPECT_FALSE(is_bytes_counter("model_bytes"));
  EXPECT_FALSE(is_bytes_counter("bytes_per_second"));
}

TEST_F(Gate, ExitCodesAreDocumented) {
  // docs/gate.md's table of exit codes is the one the gate returns.
  std::ifstream in(std::string(FUSEBENCH_SOURCE_DIR) + "/docs/gate.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string row :
       {"| 0 | PASS |", "| 1 | FAIL |", "| 2 | unusable input |", "| 3 | NOT JUDGED |"})
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  EXPECT_EQ(fusebench::gate::kExitNotJudged, 3);
}

// Issue 27 item 4: no output may be an input, whatever its spelling.
TEST_F(Gate, AnOutputThatIsAnInputIsRefusedBeforeAnythingIsWritten) {
  const json r = report({entry(kA, 10)});
  const std::string base = write("base.json", r.dump()), cur = write("cur.json", r.dump());
  const auto link = (dir / "link.md").string();
  fs::create_symlink(cur, link);
  const std::string dotted = (dir / "." / "cur.json").string();
  for (const std::string& md : {cur, link, dotted, base}) {
    std::vector<const char*> argv = {"fusebench-gate", base.c_str(), cur.c_str(), "--summary-md",
                                     md.c_str()};
    std::ostringstream o, e;
    EXPECT_EQ(fusebench::gate::run_cli(5, argv.data(), o, e), 2) << md;
    EXPECT_NE(e.str().find("--summary-md=" + md + " is the "), std::string::npos) << e.str();
    EXPECT_NE(e.str().find("never replaces an input"), std::string::npos) << e.str();
    EXPECT_EQ(fs::file_size(cur), r.dump().size()) << md;  // untouched
    EXPECT_EQ(fs::file_size(base), r.dump().size()) << md;
  }
}

// Issue 27 item 5: the gate and the advisor refuse the same bad reports (tests/test_advise.cpp
// runs the advisor on the same list, fusebench::test::bad_time_reports).
TEST_F(Gate, BadTimesAndDuplicateNamesAreRefusedNamingTheEntry) {
  for (const auto& [doc, message] : fusebench::test::bad_time_reports()) {
    EXPECT_EQ(run_text(report({entry(kA, 10)}).dump(), doc), 2) << doc;
    EXPECT_NE(err.find(message), std::string::npos) << err << "\nwanted: " << message;
    EXPECT_EQ(run_text(doc, report({entry(kA, 10)}).dump()), 2) << doc;
    EXPECT_NE(err.find(message), std::string::npos) << err;
  }
}

// Issue 29: the accuracy rule. A quantized entry's quant_error (and a fused variant's
// quant_error_vs_split) per shard fails the gate when it grew beyond the threshold, naming the
// entry, the field and the shard; it is judged whatever the timing rules did.
