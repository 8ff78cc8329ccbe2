// The Range Profiler's configuration built offline through the CUPTI profiler host API (no GPU:
// the chip is named), checking the per-chip metric names and the number of replay passes.
#include <gtest/gtest.h>

#include <algorithm>

#ifdef FUSEBENCH_HAVE_CUPTI
#include "measure/cupti_common.hpp"
#include "measure/range_profiler_config.hpp"

using fusebench::measure::CuptiFailure;
using fusebench::measure::ProfilerHost;
using fusebench::measure::RangeProfilerConfig;

namespace {

// Builds the configuration for `chip`; skips (with CUPTI's exact error) only when the host API
// cannot run at all here, never when it rejects the chip or a metric.
bool configure(const std::string& chip, RangeProfilerConfig& out, std::string& skip) {
  try {
    ProfilerHost host(chip, {});
    out = host.configure();
    return true;
  } catch (const CuptiFailure& e) {
    if (e.code() == CUPTI_ERROR_INVALID_CHIP_NAME || e.code() == CUPTI_ERROR_INVALID_METRIC_NAME)
      throw;
    skip = std::string("the CUPTI profiler host API cannot run here: ") + e.what();
    return false;
  }
}

}  // namespace

TEST(RangeProfilerConfig, Gh100UsesDramBytesReadWriteInOnePass) {
  RangeProfilerConfig c;
  std::string skip;
  if (!configure("GH100", c, skip)) GTEST_SKIP() << skip;
  EXPECT_EQ(c.chip, "GH100");
  EXPECT_EQ(c.metric_of.at("dram_read_bytes"), "dram__bytes_read.sum");
  EXPECT_EQ(c.metric_of.at("dram_write_bytes"), "dram__bytes_write.sum");
  EXPECT_EQ(c.metric_of.at("l2_bytes"), "lts__t_bytes.sum");
  EXPECT_EQ(c.metric_of.at("profiled_gpu_time_ns"), "gpu__time_duration.sum");
  EXPECT_EQ(c.metrics.size(), c.counters.size());
  EXPECT_FALSE(c.image.empty());
  EXPECT_EQ(c.passes, 1u) << "dram read+write, L2 bytes and duration fit one pass on GH100";
}

TEST(RangeProfilerConfig, Gb202UsesDramBytesOpNames) {
  RangeProfilerConfig c;
  std::string skip;
  if (!configure("GB202", c, skip)) GTEST_SKIP() << skip;
  EXPECT_EQ(c.metric_of.at("dram_read_bytes"), "dram__bytes_op_read.sum");
  EXPECT_EQ(c.metric_of.at("dram_write_bytes"), "dram__bytes_op_write.sum");
  EXPECT_EQ(c.metric_of.at("l2_bytes"), "lts__t_bytes.sum");
  EXPECT_GE(c.passes, 1u);
  EXPECT_FALSE(c.image.empty());
}

TEST(RangeProfilerConfig, HostValidatesMetricNamesPerChip) {
  RangeProfilerConfig unused;
  std::string skip;
  if (!configure("GH100", unused, skip)) GTEST_SKIP() << skip;
  ProfilerHost gh100("GH100", {});
  EXPECT_TRUE(gh100.has_metric("dram__bytes_read.sum"));
  EXPECT_FALSE(gh100.has_metric("dram__bytes_op_read.sum"));
  EXPECT_FALSE(gh100.has_metric("no__such_metric.sum"));
  ProfilerHost gb202("GB202", {});
  EXPECT_TRUE(gb202.has_metric("dram__bytes_op_read.sum"));
  EXPECT_FALSE(gb202.has_metric("dram__bytes_read.sum"));
}

TEST(RangeProfilerConfig, UnknownChipIsUnsupportedWithReason) {
  RangeProfilerConfig unused;
  std::string skip;
  if (!configure("GH100", unused, skip)) GTEST_SKIP() << skip;
  try {
    ProfilerHost host("XX999", {});
    FAIL() << "an unknown chip must be refused";
  } catch (const CuptiFailure& e) {
    EXPECT_EQ(e.code(), CUPTI_ERROR_INVALID_CHIP_NAME);
    EXPECT_NE(std::string(e.what()).find("unsupported chip"), std::string::npos) << e.what();
  }
  const auto chips = fusebench::measure::profiler_supported_chips();
  EXPECT_NE(std::find(chips.begin(), chips.end(), "GH100"), chips.end());
}

TEST(CuptiReasons, NameTheClassOfFailure) {
  using fusebench::measure::cupti_reason;
  EXPECT_EQ(
      cupti_reason(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "f")
          .rfind("insufficient privileges: f returned CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", 0),
      0u);
  EXPECT_EQ(cupti_reason(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "f")
                .rfind("another profiler attached", 0),
            0u);
  EXPECT_EQ(cupti_reason(CUPTI_ERROR_INVALID_CHIP_NAME, "f").rfind("unsupported chip", 0), 0u);
}

#else
TEST(RangeProfilerConfig, NeedsCupti) {
  GTEST_SKIP() << "built without CUPTI (cupti_range_profiler.h or nvperf_host not found)";
}
#endif
