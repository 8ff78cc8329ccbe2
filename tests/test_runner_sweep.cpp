// The runner's sweep, preflight and verification as a front end calls them (src/runner/):
// fixtures formed from the options, bad values named before anything runs, every variant
// checked against its baseline and a float64 reference.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "error_of.hpp"
#include "runner/preflight.hpp"
#include "runner/sweep.hpp"
#include "runner/verification.hpp"

namespace fb = fusebench;

namespace {

fb::bench::Options small_qkv() {
  fb::bench::Options o;
  o.models = {"qwen3-0.6b"};
  o.ops = {"qkv"};
  o.tokens = {1, 3};
  o.dtypes = {"fp32"};
  return o;
}

}  // namespace

TEST(RunnerSweep, FixturesCoverEveryAxisWithTheVariantInnermost) {
  const auto backend = fb::make_cpu_backend();
  const fb::bench::Sweep sweep = fb::bench::build_sweep(small_qkv(), *backend);
  ASSERT_EQ(sweep.fixtures.size(), 4u);  // 2 token counts x {split, fused}
  EXPECT_EQ(sweep.fixtures[0].tokens, 1);
  EXPECT_EQ(sweep.fixtures[0].variant, "split");
  EXPECT_EQ(sweep.fixtures[1].variant, "fused");
  EXPECT_EQ(sweep.fixtures[0].group_key(), sweep.fixtures[1].group_key());
  EXPECT_NE(sweep.fixtures[0].group_key(), sweep.fixtures[2].group_key());
  EXPECT_EQ(sweep.fixtures[1].baseline_variant(), "split");
}

TEST(RunnerSweep, BadValuesAreNamedWithWhatIsValid) {
  const auto backend = fb::make_cpu_backend();
  fb::bench::Options tp = small_qkv();
  tp.tp = {3};  // qwen3-0.6b has 16 query heads and 8 kv heads
  const std::string tp_error = error_of([&] { fb::bench::build_sweep(tp, *backend); });
  EXPECT_NE(tp_error.find('3'), std::string::npos) << tp_error;
  fb::bench::Options model = small_qkv();
  model.models = {"no-such-model"};
  const std::string model_error = error_of([&] { fb::bench::build_sweep(model, *backend); });
  EXPECT_NE(model_error.find("no-such-model"), std::string::npos) << model_error;
  EXPECT_NE(model_error.find("qwen3-0.6b"), std::string::npos) << model_error;  // the valid ones
}

TEST(RunnerSweep, PreflightRefusesAFixtureThatCannotFitNamingIt) {
  const auto backend = fb::make_cpu_backend();
  fb::bench::Options o = small_qkv();
  o.tokens = {1};
  EXPECT_NO_THROW(
      fb::bench::check_fits_in_memory(fb::bench::build_sweep(o, *backend).fixtures, *backend));
  o.models = {"llama3-70b"};
  o.tokens = {1048576};
  const fb::bench::Sweep big = fb::bench::build_sweep(o, *backend);
  const std::string why =
      error_of([&] { fb::bench::check_fits_in_memory(big.fixtures, *backend); });
  if (backend->free_memory().source.empty()) GTEST_SKIP() << "this backend cannot say what is free";
  EXPECT_NE(why.find("tokens:1048576"), std::string::npos) << why;
  EXPECT_NE(why.find("free"), std::string::npos) << why;
}

TEST(RunnerVerification, EveryVariantIsComparedAndPasses) {
  const auto backend = fb::make_cpu_backend();
  const fb::bench::Sweep sweep = fb::bench::build_sweep(small_qkv(), *backend);
  const fb::bench::VerificationRun run = fb::bench::run_verification(*backend, sweep.fixtures, 7);
  EXPECT_TRUE(run.passed);
  // Every variant of the op (not only the selected ones), at each token count.
  std::set<std::string> variants;
  for (const auto& r : run.results) variants.insert(r.at("variant").get<std::string>());
  EXPECT_TRUE(variants.count("split") && variants.count("fused"));
  EXPECT_EQ(run.results.size(), 2 * variants.size());
  for (const auto& r : run.results) {
    EXPECT_TRUE(r.at("ok").get<bool>()) << r.dump();
    EXPECT_TRUE(r.at("float64_reference").get<bool>()) << r.dump();
    bool against_float64 = false;
    for (const auto& c : r.at("comparisons")) against_float64 |= c.at("against") == "float64";
    EXPECT_TRUE(against_float64) << r.dump();
  }
}
