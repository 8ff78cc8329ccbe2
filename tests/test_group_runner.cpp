// The group runner on the CPU backend, driven directly (no Google Benchmark): results are cached
// across calls, every call past the cached ones measures the group again, and a member that does
// not fit in memory or whose region fails fails alone, saying why, while the rest of its group is
// measured. A backend wrapper injects the failures.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "runner/group_runner.hpp"
#include "runner/groups.hpp"
#include "runner/run_options.hpp"
#include "runner/sweep.hpp"

using namespace fusebench;
using namespace fusebench::bench;

namespace {

// The CPU backend, except that allocations above `max_alloc` bytes are out of memory and GEMMs
// with `fail_n` output columns throw.
class FaultyBackend final : public Backend {
 public:
  std::size_t max_alloc = ~std::size_t{0};
  std::int64_t fail_n = -1;
  int fail_after = 0;  // GEMMs with fail_n columns that succeed before they start to throw

  std::string name() const override { return cpu_->name(); }
  std::string unsupported_reason(DType d) const override { return cpu_->unsupported_reason(d); }
  void* allocate(std::size_t bytes) override {
    if (bytes > max_alloc)
      throw OutOfMemory("test: " + std::to_string(bytes) + " B asked, " +
                        std::to_string(max_alloc) + " B allowed");
    return cpu_->allocate(bytes);
  }
  void release(void* p) noexcept override { cpu_->release(p); }
  void upload(void* d, const void* s, std::size_t n) override { cpu_->upload(d, s, n); }
  void download(void* d, const void* s, std::size_t n) override { cpu_->download(d, s, n); }
  std::vector<std::int64_t> gemm_rows;  // M of every GEMM, in order

  void gemm(const GemmArgs& a) override {
    gemm_rows.push_back(a.y.rows);
    if (a.y.cols == fail_n && fail_after-- <= 0)
      throw std::runtime_error("test: GEMM with N=" + std::to_string(fail_n));
    cpu_->gemm(a);
  }
  std::string one_launch_gemm_caveat() const override { return cpu_->one_launch_gemm_caveat(); }
  void act_and_mul(const ActAndMulArgs& a) override { cpu_->act_and_mul(a); }
  void bias_add(std::span<const BiasAddArgs> members) override { cpu_->bias_add(members); }
  void rms_norm(const MatRef& x, const MatRef& w, const MatRef& o, float eps) override {
    cpu_->rms_norm(x, w, o, eps);
  }
  void synchronize() override { cpu_->synchronize(); }
  std::unique_ptr<RegionTimer> make_timer() override { return cpu_->make_timer(); }
  nlohmann::json context() const override { return cpu_->context(); }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

struct QkvGroup {
  Sweep sweep;
  RunnerSettings settings;
};

QkvGroup qkv_sweep(Backend& backend, std::vector<std::int64_t> tokens = {2}) {
  Options o;
  o.ops = {"qkv"};
  o.tokens = std::move(tokens);
  o.dtypes = {"fp32"};
  QkvGroup s{build_sweep(o, backend), {}};
  s.settings.engine.rule.max_time_s = 0.02;
  s.settings.engine.rule.min_time_s = 0;
  s.settings.engine.rule.target_ci = 0.03;
  s.settings.timing_blocks = 1;  // one measurement (the CPU's default is 5 blocks)
  return s;
}

GroupPlan all_selected(const Sweep& s) {
  return plan_groups(s.fixtures, std::vector<bool>(s.fixtures.size(), true));
}

}  // namespace

TEST(GroupRunner, CachesOneMeasurementPerCallRound) {
  FaultyBackend backend;
  const QkvGroup s = qkv_sweep(backend);
  ASSERT_EQ(s.sweep.fixtures.size(), 2u);  // split, fused
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  const EntryResult split1 = runner.next_result(0);  // measures the group
  EXPECT_EQ(runner.tally().measurements, 1u);
  const EntryResult fused1 = runner.next_result(1);  // cached
  EXPECT_EQ(runner.tally().measurements, 1u);
  ASSERT_TRUE(split1.error.empty()) << split1.error;
  ASSERT_TRUE(fused1.error.empty()) << fused1.error;
  EXPECT_EQ(fused1.counters.at("timing_rounds"), split1.counters.at("timing_rounds"));
  EXPECT_EQ(fused1.fields["speedup_over"]["split"]["speedup"].get<double>(),
            fused1.counters.at("speedup"));
  // Second round of calls (a repetition): fused first this time, a fresh measurement.
  const EntryResult fused2 = runner.next_result(1);
  EXPECT_EQ(runner.tally().measurements, 2u);
  const EntryResult split2 = runner.next_result(0);
  EXPECT_EQ(runner.tally().measurements, 2u);
  EXPECT_TRUE(fused2.counters.count("speedup"));
  EXPECT_TRUE(split2.fields["speedup_over"].contains("fused"));
  EXPECT_NE(runner.tally_text().find("2 interleaved group measurement(s)"), std::string::npos);
}

TEST(GroupRunner, AMemberThatDoesNotFitFailsAloneAndSaysSo) {
  FaultyBackend backend;
  // qwen3-0.6b fp32: fused weight [4096, 1024] = 16 MiB; split's largest, w_q, 8 MiB.
  backend.max_alloc = 12u << 20;
  const QkvGroup s = qkv_sweep(backend);
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  const EntryResult split = runner.next_result(0);
  const EntryResult fused = runner.next_result(1);
  EXPECT_TRUE(split.error.empty()) << split.error;
  EXPECT_GT(split.seconds, 0);
  EXPECT_EQ(split.fields["interleaved_with"], nlohmann::json::array({"split"}));
  EXPECT_NE(fused.error.find("out of memory preparing the interleaved group (split, fused)"),
            std::string::npos)
      << fused.error;
}

TEST(GroupRunner, AMemberWhoseRegionFailsFailsAloneAndTheBaselineIsMissedWithAReason) {
  FaultyBackend backend;
  backend.fail_n = 2048;  // split's q GEMM: the baseline fails, fused is measured alone
  const QkvGroup s = qkv_sweep(backend);
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  const EntryResult split = runner.next_result(0);
  const EntryResult fused = runner.next_result(1);
  EXPECT_NE(split.error.find("GEMM with N=2048"), std::string::npos) << split.error;
  ASSERT_TRUE(fused.error.empty()) << fused.error;
  EXPECT_FALSE(fused.counters.count("speedup"));
  EXPECT_NE(
      fused.fields["speedup_unavailable"].get<std::string>().find("the baseline (split) failed"),
      std::string::npos)
      << fused.fields.dump();
  EXPECT_EQ(fused.fields["timing_target"], "time_median_ci_half_width <= 0.03");
}

TEST(GroupRunner, AMemberFailingDuringTheMeasurementIsDroppedAndTheRestMeasuredAgain) {
  FaultyBackend backend;
  backend.fail_n = 4096;  // the fused GEMM: works for the warm-up, then fails while sampled
  backend.fail_after = 2;
  const QkvGroup s = qkv_sweep(backend);
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  const EntryResult split = runner.next_result(0);
  const EntryResult fused = runner.next_result(1);
  EXPECT_NE(fused.error.find("GEMM with N=4096"), std::string::npos) << fused.error;
  EXPECT_NE(fused.error.find("measured without it"), std::string::npos) << fused.error;
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(split.fields["interleaved_with"], nlohmann::json::array({"split"}));
  EXPECT_EQ(runner.tally().measurements, 1u);  // the successful one
}

// Groups measured in blocks are measured a window at a time, block 0 of each group, then block 1
// of each, ...: seen here in the M of the GEMMs issued (2, 4, 8 tokens, three blocks each), the
// warm-ups, probes and counter passes of a group falling inside its own stretch.
TEST(GroupRunner, BlocksOfTheGroupsOfAWindowAreTakenInTurn) {
  FaultyBackend backend;
  QkvGroup s = qkv_sweep(backend, {2, 4, 8});
  s.settings.timing_blocks = 3;
  // Rounds of a few ms (tens under load or a sanitizer): three blocks of 3 rounds fit easily.
  s.settings.engine.rule.max_time_s = 4;
  ASSERT_EQ(s.sweep.fixtures.size(), 6u);
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  backend.gemm_rows.clear();
  std::vector<EntryResult> results;
  for (std::size_t i = 0; i < 6; ++i) results.push_back(runner.next_result(i));
  std::vector<std::int64_t> stretches;
  for (std::int64_t m : backend.gemm_rows)
    if (stretches.empty() || stretches.back() != m) stretches.push_back(m);
  EXPECT_EQ(stretches, (std::vector<std::int64_t>{2, 4, 8, 2, 4, 8, 2, 4, 8}));
  EXPECT_EQ(runner.tally().measurements, 3u);
  for (std::size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_EQ(results[i].counters.at("timing_blocks"), 3) << i;
    if (i % 2 == 1) {  // fused: three block speedups and an interval holding their spread
      EXPECT_EQ(results[i].fields["speedup_blocks"].size(), 3u) << i;
      EXPECT_LE(results[i].counters.at("speedup_ci_low"),
                results[i].fields["speedup_ci_between_blocks"][0].get<double>() * (1 + 1e-12));
    }
  }
}

TEST(GroupRunner, AMemberFailingInABlockIsDroppedAndItsGroupMeasuredOnItsOwn) {
  FaultyBackend backend;
  backend.fail_n = 4096;  // the fused GEMM fails once sampled
  backend.fail_after = 3;
  QkvGroup s = qkv_sweep(backend);
  s.settings.timing_blocks = 3;
  s.settings.engine.rule.max_time_s = 4;
  GroupRunner runner(backend, 1, s.sweep.fixtures, all_selected(s.sweep), s.settings, {});
  const EntryResult split = runner.next_result(0);
  const EntryResult fused = runner.next_result(1);
  EXPECT_NE(fused.error.find("GEMM with N=4096"), std::string::npos) << fused.error;
  // Measured again on its own: the failing member fails in its warm-up there.
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(split.fields["interleaved_with"], nlohmann::json::array({"split"}));
  EXPECT_EQ(split.counters.at("timing_blocks"), 3);
}
