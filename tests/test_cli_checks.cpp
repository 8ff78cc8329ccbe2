// The front ends' shared flag checks (src/cli/): the nearest known flag, list-element validators
// and the Google Benchmark flag table, called as the parsers call them.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cli/flag_checks.hpp"
#include "cli/gbench_flags.hpp"

using namespace fusebench::bench;

TEST(CliChecks, ClosestNameFindsTyposAndNothingFarOff) {
  const std::vector<std::string> known = {"--models", "--model-config", "--tokens", "--tp",
                                          "--benchmark_repetitions"};
  EXPECT_EQ(closest_name("--modles", known), "--models");  // a transposition is one edit
  EXPECT_EQ(closest_name("--token", known), "--tokens");
  EXPECT_EQ(closest_name("--benchmark_repetiton", known), "--benchmark_repetitions");
  EXPECT_EQ(closest_name("--zzzzzzzz", known), "");
  EXPECT_EQ(closest_name("--report", known), "");
}

TEST(CliChecks, ValidatorsNameTheBadElement) {
  CLI::App app;
  std::vector<std::int64_t> tokens;
  app.add_option("--tokens", tokens)
      ->delimiter(',')
      ->check(whole_number<std::int64_t>("x >= 1", 1));
  char prog[] = "t", arg[] = "--tokens=1,abc";
  char* argv[] = {prog, arg};
  try {
    app.parse(2, argv);
    FAIL() << "accepted 1,abc";
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()), "--tokens: 'abc' is invalid (x >= 1)");
  }
  char unknown[] = "--tokns=1";
  char* argv2[] = {prog, unknown};
  EXPECT_THROW(reject_unknown_flags(app, 2, argv2, {}, "help"), std::invalid_argument);
}

TEST(CliChecks, EveryGoogleBenchmarkFlagHasATreatmentAndRefusalsNameTheirAlternative) {
  for (const auto& f : gbench_flags()) {
    EXPECT_FALSE(f.what.empty()) << f.name;
    if (f.treatment != GbenchTreatment::refused) continue;
    // A refused flag given on the command line is refused, naming what to use.
    const std::string given = "--" + f.name + "=1";
    try {
      check_gbench_flags({"fusebench", given});
      ADD_FAILURE() << given << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("is not supported by fusebench: " + f.what),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(check_gbench_flags({"fusebench", "--benchmark_list_tests"}).list);
  EXPECT_FALSE(check_gbench_flags({"fusebench", "--benchmark_list_tests=false"}).list);
  EXPECT_THROW(check_gbench_flags({"fusebench", "--benchmark_repetitions=0"}),
               std::invalid_argument);
  const auto ctx = check_gbench_flags({"fusebench", "--benchmark_context=a=1,b=2"}).context;
  EXPECT_EQ(ctx.at("a"), "1");
  EXPECT_EQ(ctx.at("b"), "2");
}
