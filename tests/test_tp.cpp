// TP pipelines on the CPU: every rank's output equals the unsharded layer pair, for naive and
// paired, tp 1, 2, 4 and a KV-replicated shape; the communicators' safety checks; link model.
#include <gtest/gtest.h>

#include <thread>

#include "fusebench/cost_model.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

// Small enough for 2 cores; q_size (8*16=128) differs from hidden (64); kv_heads=2 < tp=4 makes
// tp=4 replicate each kv head on 2 ranks, as vLLM does.
ModelShape tiny(std::int64_t kv_heads = 2) { return {"tiny", 64, 8, kv_heads, 16, 96, 2}; }

using Case = std::tuple<std::string, DType, int, std::int64_t>;

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param))) + "_tp" +
         std::to_string(std::get<2>(info.param)) + "_m" + std::to_string(std::get<3>(info.param));
}

}  // namespace

class TpCorrectness : public ::testing::TestWithParam<Case> {};

TEST_P(TpCorrectness, EveryRankEqualsTheUnshardedPair) {
  const auto [op, dtype, tp, tokens] = GetParam();
  const ShardShape s = shard(tiny(), tp);
  const auto results = verify_tp_op_inprocess(op, s, tokens, dtype, 77 + tokens, true);
  // naive and paired, one result per rank each.
  ASSERT_EQ(results.size(), 2u * static_cast<std::size_t>(tp));
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok()) << r.summary();
    // float64 reference and the unsharded pipeline, at least.
    EXPECT_GE(r.comparisons.size(), 2u) << r.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Pipelines, TpCorrectness,
                         ::testing::Combine(::testing::Values("tp_attn", "tp_mlp"),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(1, 2, 4), ::testing::Values(1, 5)),
                         CaseName);

TEST(TpCorrectness, NonReplicatedKvAtTp4) {
  const ShardShape s = shard(tiny(4), 4);
  EXPECT_EQ(s.kv_replicas, 1);
  for (const auto& r : verify_tp_op_inprocess("tp_attn", s, 3, DType::f32, 5, true))
    EXPECT_TRUE(r.ok()) << r.summary();
}

TEST(TpCorrectness, CollectiveSweepOps) {
  for (int tp : {2, 4}) {
    const ShardShape s = shard(tiny(), tp);
    for (const char* op : {"allreduce", "allgather"}) {
      for (const auto& r : verify_tp_op_inprocess(op, s, 3, DType::bf16, 9, true))
        EXPECT_TRUE(r.ok()) << r.summary();
    }
  }
  EXPECT_THROW(build_plan("allreduce", "sum", shard(tiny(), 1), 4, DType::f32),
               std::invalid_argument);
}

TEST(TpPlans, KvReplicatedRanksShareTheirKvHead) {
  ShardShape s = shard(tiny(), 4);
  ASSERT_EQ(s.kv_replicas, 2);
  ASSERT_EQ(s.kv_heads, 1);
  std::vector<std::int64_t> k_row0;
  for (int r = 0; r < 4; ++r) {
    s.rank = r;
    const Plan p = build_plan("tp_attn", "paired", s, 2, DType::f32);
    const BufferSpec& w = p.buffers.at(1);
    ASSERT_EQ(w.parts.at(1), "w_k");
    k_row0.push_back(w.part_windows.at(1).row0);
    EXPECT_EQ(w.part_windows.at(0).row0, r * s.q_size());  // q heads are never replicated
  }
  EXPECT_EQ(k_row0, (std::vector<std::int64_t>{0, 0, 16, 16}));
}

TEST(TpPlans, CommunicationBytesAndLaunchesFollowTheFormulas) {
  const ModelShape m = find_model("llama3-8b");
  const std::int64_t tokens = 64;
  for (int tp : {1, 2, 4, 8}) {
    const ShardShape s = shard(m, tp);
    const double elem = 2;  // bf16
    const double allreduce = tp > 1 ? tokens * m.hidden * elem : 0;
    const Cost attn_p = cost_of(build_plan("tp_attn", "paired", s, tokens, DType::bf16));
    const Cost attn_n = cost_of(build_plan("tp_attn", "naive", s, tokens, DType::bf16));
    const Cost mlp_p = cost_of(build_plan("tp_mlp", "paired", s, tokens, DType::bf16));
    const Cost mlp_n = cost_of(build_plan("tp_mlp", "naive", s, tokens, DType::bf16));
    EXPECT_DOUBLE_EQ(attn_p.comm_bytes, allreduce);
    EXPECT_DOUBLE_EQ(mlp_p.comm_bytes, allreduce);
    // naive adds an all-gather of the full column output.
    const double gather_attn = tp > 1 ? tokens * (m.q_size() + 2 * s.kv_size() * tp) * elem : 0;
    const double gather_mlp = tp > 1 ? tokens * 2 * m.intermediate * elem : 0;
    EXPECT_DOUBLE_EQ(attn_n.comm_bytes, allreduce + gather_attn);
    EXPECT_DOUBLE_EQ(mlp_n.comm_bytes, allreduce + gather_mlp);
    EXPECT_EQ(attn_p.launches, tp > 1 ? 3 : 2);
    EXPECT_EQ(attn_n.launches, tp > 1 ? 4 : 2);
    EXPECT_EQ(mlp_p.launches, tp > 1 ? 4 : 3);
    EXPECT_EQ(mlp_n.launches, tp > 1 ? 5 : 3);
    // Same FLOPs per rank either way: the sharded GEMMs are 1/tp of the unsharded ones.
    const Cost one = cost_of(build_plan("tp_mlp", "paired", shard(m, 1), tokens, DType::bf16));
    EXPECT_DOUBLE_EQ(mlp_p.flops * tp, one.flops);
  }
}

TEST(TpCorrectness, VerifierCatchesAMissingAllReduce) {
  auto backend = make_cpu_backend();
  SkipCollectives comm(0, 2);  // an all-reduce that does nothing: a broken pipeline
  for (const char* op : {"tp_attn", "tp_mlp"}) {
    const auto r =
        verify_tp_rank(*backend, comm, op, "paired", shard(tiny(), 2), 3, DType::f32, 11, true);
    EXPECT_FALSE(r.ok()) << r.summary();
  }
}

TEST(InProcessCommunicator, MissingRankTimesOutWithAMessage) {
  auto comms = make_inprocess_group(2, 0.2);
  std::vector<float> data(4, 1.0f);
  const MatRef ref{data.data(), DType::f32, 1, 4, 4};
  try {
    comms[0]->all_reduce(ref);  // rank 1 never comes
    FAIL() << "all_reduce returned without its peer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("never arrived"), std::string::npos) << e.what();
  }
  // The group is aborted: the late rank fails at once instead of hanging.
  EXPECT_THROW(comms[1]->all_reduce(ref), std::runtime_error);
}

TEST(InProcessCommunicator, MismatchedConfigurationIsDetectedOnEveryRank) {
  auto comms = make_inprocess_group(2, 10);
  std::atomic<int> failures{0};
  run_ranks(2, [&](int r) {
    try {
      comms[static_cast<std::size_t>(r)]->check_same_config(r == 0 ? "tokens=4" : "tokens=8");
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()).find("configuration mismatch") != std::string::npos) ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
  auto ok = make_inprocess_group(2, 10);
  EXPECT_NO_THROW(
      run_ranks(2, [&](int r) { ok[static_cast<std::size_t>(r)]->check_same_config("same"); }));
}

TEST(LinkModel, NcclTestsConventions) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_reduce, 1), 0.0);
  const LinkProfile link = find_link_profile("custom:10:100");
  EXPECT_DOUBLE_EQ(link.latency_s, 10e-6);
  EXPECT_DOUBLE_EQ(link.busbw, 100e9);
  // 1 MB all-reduce on 8 ranks: 10 us + 1e6 * 2*7/8 / 100e9 s = 27.5 us.
  EXPECT_NEAR(modelled_seconds(link, CollectiveKind::all_reduce, 1e6, 8), 27.5e-6, 1e-12);
  EXPECT_DOUBLE_EQ(modelled_seconds(link, CollectiveKind::all_reduce, 1e6, 1), 0.0);
  // busbw of the modelled time without latency is the profile's busbw.
  EXPECT_NEAR(busbw(CollectiveKind::all_gather, 1e6, 1e6 * 0.75 / 100e9, 4), 100e9, 1);
  for (const char* name : {"nvlink-h100", "nvlink-h200", "pcie-gen5"}) {
    EXPECT_GT(find_link_profile(name).busbw, 0) << name;
  }
  EXPECT_THROW(find_link_profile("nvlink-h300"), std::invalid_argument);
  EXPECT_THROW(find_link_profile("custom:10"), std::invalid_argument);
  EXPECT_THROW(find_link_profile("custom:10:0"), std::invalid_argument);
}

TEST(TpPlans, WindowsAreSlicesOfTheWholeLogicalTensor) {
  const auto whole = logical_tensor("w_down", 6, 10, BufferRole::weight, DType::bf16, 5);
  const auto window =
      logical_window("w_down", 6, 10, 2, 3, 3, 4, BufferRole::weight, DType::bf16, 5);
  ASSERT_EQ(window.size(), 12u);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(window[static_cast<std::size_t>(r * 4 + c)],
                whole[static_cast<std::size_t>((2 + r) * 10 + 3 + c)]);
  }
  for (float v : whole) {
    EXPECT_NE(v, 0.0f);
    EXPECT_LE(std::abs(v), 1.0f / std::sqrt(10.0f) + 1e-6f);  // weights scaled by 1/sqrt(cols)
  }
  EXPECT_THROW(logical_window("w", 6, 10, 4, 0, 3, 10, BufferRole::weight, DType::f32, 5),
               std::invalid_argument);
}
