// The gate's files under issue 37's rules (fusebench/input_files.hpp): every report it reads
// goes through the bounded reader, every write is checked, and an entry whose dtype changed under
// its name is refused rather than compared by nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fusebench/gate.hpp"
#include "gate_fixture.hpp"
#include "report_fixtures.hpp"

using nlohmann::json;
namespace fs = std::filesystem;
using fusebench::test::entry;
using fusebench::test::report;

namespace {

// The gate's fixture (gate_fixture.hpp), under the name these tests were written with.
class GateInputs : public fusebench::test::Gate {};
using fusebench::test::kA;
using fusebench::test::kB;

}  // namespace

// Issue 37: every report the gate reads goes through the bounded reader; every write is checked.
TEST_F(GateInputs, Issue37HostileReportFilesAreRefusedNamingTheRule) {
  const std::string good = write("good.json", report({entry(kA, 10)}).dump());
  const std::string deep = write(
      "deep.json", "{\"context\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0600), 0);
  const std::string fifo = (dir / "fifo.json").string();
  for (const auto& [input, says] : std::vector<std::pair<std::string, std::string>>{
           {deep, "JSON nested deeper than 64 levels"},
           {"/dev/zero", "/dev/zero: file: is a character device"},
           {fifo, "fifo.json: file: is a fifo"}}) {
    EXPECT_EQ(run_paths({good, input}), 2) << input;
    EXPECT_NE(err.find(says), std::string::npos) << err;
  }
}

TEST_F(GateInputs, Issue37ASummaryThatCannotBeWrittenIsExit2NamingIt) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  const json r = report({entry(kA, 10)});
  EXPECT_EQ(run(r, r, {"--summary-md=/dev/full"}), 2) << out << err;
  EXPECT_NE(err.find("--summary-md: cannot write /dev/full: " + std::string(std::strerror(ENOSPC))),
            std::string::npos)
      << err;
  // The summary may not be the report it reads, by any name.
  EXPECT_EQ(run(r, r, {"--summary-md=" + (dir / "." / "cur.json").string()}), 2) << out << err;
  EXPECT_NE(err.find("is the current report"), std::string::npos) << err;
}

// An entry whose dtype changed under the same name matched no comparison of the advice rule,
// which then compared nothing, and the gate passed.
TEST_F(GateInputs, Issue37AnEntryOfAnotherDtypeIsRefusedNamingTheField) {
  const auto side = [&](const std::string& dtype) {
    return report({entry(kA, 10, {{"dtype", dtype}}), entry(kB, 8, {{"dtype", dtype}})});
  };
  EXPECT_EQ(run(side("bf16"), side("bf16")), 0) << out << err;
  EXPECT_EQ(run(side("bf16"), side("fp16")), 2) << out << err;
  EXPECT_NE(err.find(kA + ": dtype differs: "), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-identity-mismatch=quant"), std::string::npos) << err;
}

// The advice rule's own guard: when both reports hold comparisons and none matches (here the
// entries' model field changed under the same names), the rule compared nothing: NOT JUDGED, not
// a pass.
TEST_F(GateInputs, Issue37AnAdviceRuleThatComparedNothingIsNotAPass) {
  const auto side = [](const std::string& model_field) {
    json b = json::array();
    fusebench::test::Fixture f;
    for (std::int64_t t : {1, 16}) fusebench::test::add_pair(b, f, t, 1.3, 1.25, 1.35);
    for (auto& e : b) e["model"] = model_field;
    return json{{"context", fusebench::test::context()}, {"benchmarks", b}};
  };
  EXPECT_EQ(run(side("qwen3-0.6b"), side("qwen3-0.6b")), 0) << out << err;
  EXPECT_EQ(run(side("qwen3-0.6b"), side("another")), 3) << out << err;
  EXPECT_NE(out.find("advice rule: none of the baseline's 1 comparison(s) is in the current"),
            std::string::npos)
      << out;
}
