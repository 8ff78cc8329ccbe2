// Comparison groups as the binary forms them: variant-innermost sweep order, the group keys, and
// --benchmark_filter applied as Google Benchmark applies it (a group is what it selects).
#include <gtest/gtest.h>

#include <stdexcept>

#include "comm/tp_run.hpp"
#include "fusebench/backend.hpp"
#include "runner/filter.hpp"
#include "runner/groups.hpp"
#include "runner/run_options.hpp"
#include "runner/sweep.hpp"

using namespace fusebench;
using namespace fusebench::bench;

namespace {

Sweep cpu_sweep(const std::vector<std::string>& ops) {
  auto backend = make_cpu_backend();
  Options o;
  o.ops = ops;
  o.tokens = {1, 16};
  o.dtypes = {"fp32"};
  return build_sweep(o, *backend);
}

}  // namespace

TEST(TimingGroups, VariantIsTheInnermostAxisSoGroupsAreAdjacent) {
  const Sweep s = cpu_sweep({"qkv", "gate_up"});
  ASSERT_EQ(s.fixtures.size(), 8u);  // 2 ops x 2 tokens x (split, fused)
  for (std::size_t i = 0; i < s.fixtures.size(); i += 2) {
    EXPECT_EQ(s.fixtures[i].variant, "split");
    EXPECT_EQ(s.fixtures[i + 1].variant, "fused");
    EXPECT_EQ(s.fixtures[i].group_key(), s.fixtures[i + 1].group_key());
    EXPECT_EQ(s.fixtures[i].baseline_variant(), "split");
  }
  EXPECT_NE(s.fixtures[0].group_key(), s.fixtures[2].group_key());  // tokens 1 vs 16
  EXPECT_EQ(s.fixtures[0].group_key(),
            "qkv/*/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:fp32/weights:random/"
            "timing:eager");
  EXPECT_EQ(s.fixtures[0].group_data_key(),
            "qkv/*/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:fp32/weights:random");
  const GroupPlan plan = plan_groups(s.fixtures, std::vector<bool>(s.fixtures.size(), true));
  ASSERT_EQ(plan.groups.size(), 4u);
  for (const auto& g : plan.groups) {
    ASSERT_EQ(g.members.size(), 2u);
    EXPECT_EQ(g.members[1], g.members[0] + 1);
    EXPECT_TRUE(g.unselected.empty());
  }
}

// The layers of one op (an MoE model's dense, expert and shared_expert gate_up) are different
// shapes: each is a comparison group of its own, keyed by its layer: segment.
TEST(TimingGroups, EachLayerOfAnOpIsAGroupOfItsOwn) {
  auto backend = make_cpu_backend();
  Options o;
  o.model_configs = {std::string(FUSEBENCH_TEST_CONFIGS) + "/deepseek-v2-lite.json"};
  o.ops = {"gate_up"};
  o.tokens = {4};
  o.dtypes = {"fp32"};
  const Sweep s = build_sweep(o, *backend);
  ASSERT_EQ(s.fixtures.size(), 6u);  // dense, expert, shared_expert x (split, fused)
  const GroupPlan plan = plan_groups(s.fixtures, std::vector<bool>(s.fixtures.size(), true));
  ASSERT_EQ(plan.groups.size(), 3u);
  std::vector<std::string> layers;
  for (const auto& g : plan.groups) {
    ASSERT_EQ(g.members.size(), 2u);
    const Fixture& split = s.fixtures[g.members[0]];
    const Fixture& fused = s.fixtures[g.members[1]];
    EXPECT_EQ(split.variant, "split");
    EXPECT_EQ(fused.variant, "fused");
    EXPECT_EQ(split.layer, fused.layer);
    EXPECT_NE(g.key.find("/layer:" + split.layer + "/"), std::string::npos) << g.key;
    layers.push_back(split.layer);
  }
  EXPECT_EQ(layers, (std::vector<std::string>{"dense", "expert", "shared_expert"}));
}

TEST(TimingGroups, TpPipelinesGroupNaiveAndPairedWithNaiveAsBaseline) {
  auto backend = make_cpu_backend();
  Options o;
  o.ops = {"tp_mlp"};
  o.tokens = {4};
  o.tp = {2};
  o.dtypes = {"fp32"};
  CommSettings comm;
  const Sweep s = build_sweep(o, *backend, &comm);
  ASSERT_EQ(s.fixtures.size(), 4u);  // naive, paired, sp, overlap
  EXPECT_EQ(s.fixtures[0].variant, "naive");
  EXPECT_EQ(s.fixtures[0].baseline_variant(), "naive");
  for (const auto& f : s.fixtures) EXPECT_EQ(f.group_key(), s.fixtures[0].group_key());
  EXPECT_NE(s.fixtures[0].group_key().find("/comm:inprocess/"), std::string::npos);
  const TpMember m = tp_member(s.fixtures[1], 1);
  EXPECT_EQ(m.variant, "paired");
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(m.comm, "inprocess");
}

TEST(TimingGroups, FilterSelectsAsGoogleBenchmarkDoes) {
  const std::string n =
      "qkv/fused/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:fp32/weights:random/"
      "timing:eager/"
      "iterations:1/manual_time";
  const auto filter_selects = [](const std::string& spec, const std::string& name) {
    return FixtureFilter(spec).selects_name(name);
  };
  EXPECT_TRUE(filter_selects("", n));
  EXPECT_TRUE(filter_selects("all", n));
  EXPECT_TRUE(filter_selects(".", n));
  EXPECT_TRUE(filter_selects("qkv/fused", n));  // searched, not matched whole
  EXPECT_FALSE(filter_selects("qkv/split", n));
  EXPECT_TRUE(filter_selects("-qkv/split", n));  // negative filter
  EXPECT_FALSE(filter_selects("-fused", n));
  EXPECT_TRUE(filter_selects("tokens:(1|16)/", n));  // extended regex
  EXPECT_TRUE(filter_selects("manual_time$", n));    // the full run name
  // An invalid expression is refused as bad input (exit 2 in the binary), where Google
  // Benchmark would run nothing: no fixture is ever selected by it.
  EXPECT_THROW(filter_selects("qkv/(", n), std::invalid_argument);
  const Sweep s = cpu_sweep({"qkv"});
  EXPECT_EQ(run_name(s.fixtures[1]), n);
  EXPECT_THROW(FixtureFilter("qkv/(").mask(s.fixtures), std::invalid_argument);
  const std::vector<bool> fused = FixtureFilter("qkv/fused").mask(s.fixtures);
  ASSERT_EQ(fused.size(), s.fixtures.size());
  for (std::size_t i = 0; i < s.fixtures.size(); ++i)
    EXPECT_EQ(fused[i], s.fixtures[i].variant == "fused");
}

TEST(TimingGroups, AGroupIsWhatTheFilterSelects) {
  const Sweep s = cpu_sweep({"qkv", "gate_up"});
  const GroupPlan plan =
      plan_groups(s.fixtures, FixtureFilter("qkv/fused/.*/tokens:1/").mask(s.fixtures));
  std::size_t selected = 0;
  for (const auto& g : plan.groups) {
    if (g.members.empty()) continue;
    ++selected;
    ASSERT_EQ(g.members.size(), 1u);
    EXPECT_EQ(s.fixtures[g.members[0]].variant, "fused");
    ASSERT_EQ(g.unselected.size(), 1u);  // the baseline the filter left out: no speedup, and why
    EXPECT_EQ(s.fixtures[g.unselected[0]].variant, "split");
  }
  EXPECT_EQ(selected, 1u);
  for (std::size_t i = 0; i < s.fixtures.size(); ++i) {
    const bool in = plan.group_of[i] != GroupPlan::none;
    EXPECT_EQ(in, s.fixtures[i].op == "qkv" && s.fixtures[i].variant == "fused" &&
                      s.fixtures[i].tokens == 1);
  }
}
