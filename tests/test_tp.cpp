// TP pipelines on the CPU: every rank's output equals the unsharded layer pair, for naive,
// paired, sp and overlap, tp 1, 2, 4, M not a multiple of tp and a KV-replicated shape; the row
// collectives, the plan lanes, the communicators' safety checks; link model and overlap split.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "fusebench/cost_model.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/overlap.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

// Small enough for 2 cores; q_size (8*16=128) differs from hidden (64); kv_heads=2 < tp=4 makes
// tp=4 replicate each kv head on 2 ranks, as vLLM does.
ModelShape tiny(std::int64_t kv_heads = 2) { return {"tiny", 64, 8, kv_heads, 16, 96, 2}; }

using Case = std::tuple<std::string, DType, int, std::int64_t>;

View whole_view(const Plan& p, const std::string& buffer) {
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    if (p.buffers[i].name == buffer)
      return View{static_cast<int>(i), 0, 0, p.buffers[i].rows, p.buffers[i].cols};
  }
  throw std::invalid_argument("no buffer " + buffer);
}

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
  // naive, paired, sp and overlap, one result per rank each.
  ASSERT_EQ(results.size(), 4u * static_cast<std::size_t>(tp));
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok()) << r.summary();
    // float64 reference and the unsharded pipeline, at least.
    EXPECT_GE(r.comparisons.size(), 2u) << r.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Pipelines, TpCorrectness,
                         ::testing::Combine(::testing::Values("tp_attn", "tp_mlp"),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            // 5 and 21 are no multiple of 2 or 4: padded;
                                            // 21 at tp 4 makes uneven overlap chunks (2,2,1,1)
                                            ::testing::Values(1, 2, 4),
                                            ::testing::Values(1, 5, 8, 21)),
                         CaseName);

TEST(TpCorrectness, NonReplicatedKvAtTp4) {
  const ShardShape s = shard(tiny(4), 4);
  EXPECT_EQ(s.kv_replicas, 1);
  for (const auto& r : verify_tp_op_inprocess("tp_attn", s, 3, DType::f32, 5, true))
    EXPECT_TRUE(r.ok()) << r.summary();
}

// A sequence-parallel rank's output is its rows of the result; ranks past M hold only padding.
TEST(TpCorrectness, SequenceParallelRanksHoldTheirRowsAndZeroPadding) {
  ShardShape s = shard(tiny(), 4);
  auto backend = make_cpu_backend();
  for (const char* variant : {"sp", "overlap"}) {
    for (int r = 0; r < 4; ++r) {
      s.rank = r;
      const Plan p = build_plan("tp_mlp", variant, s, 5, DType::f32);  // 8 rows, 2 per rank
      EXPECT_EQ(p.padded_tokens, 3) << variant;
      EXPECT_EQ(p.outputs.at("out").rows, 2);
      const RowWindow w = p.output_rows.at("out");
      EXPECT_EQ(w.row0, std::min<std::int64_t>(2 * r, 5)) << variant << " rank " << r;
      EXPECT_EQ(w.rows, std::clamp<std::int64_t>(5 - 2 * r, 0, 2)) << variant << " rank " << r;
      // The input's padding rows are zeros.
      Workspace ws(*backend, p, 3);
      const auto x = ws.read(whole_view(p, "x_local"));
      for (std::int64_t i = w.rows * s.hidden; i < static_cast<std::int64_t>(x.size()); ++i)
        ASSERT_EQ(x[static_cast<std::size_t>(i)], 0.0f) << variant << " rank " << r;
      if (w.rows > 0) {
        EXPECT_NE(x[0], 0.0f);
      }
    }
  }
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
    // + the RMSNorm every variant ends with.
    EXPECT_EQ(attn_p.launches, tp > 1 ? 4 : 3);
    EXPECT_EQ(attn_n.launches, tp > 1 ? 5 : 3);
    EXPECT_EQ(mlp_p.launches, tp > 1 ? 5 : 4);
    EXPECT_EQ(mlp_n.launches, tp > 1 ? 6 : 4);
    // Same FLOPs per rank either way: the sharded GEMMs are 1/tp of the unsharded ones.
    const Cost one = cost_of(build_plan("tp_mlp", "paired", shard(m, 1), tokens, DType::bf16));
    EXPECT_DOUBLE_EQ(mlp_p.flops * tp, one.flops);
  }
}

// sp and overlap: an all-gather of x and a reduce-scatter of the result, each (tp-1)/tp of the
// full [Mp, hidden] tensor per rank on the wire: together what paired's all-reduce moves.
// overlap issues them in min(tp, Mp/tp) chunks; the GEMMs follow the chunks.
TEST(TpPlans, SequenceParallelBytesLaunchesAndPadding) {
  const ModelShape m = find_model("llama3-8b");
  const double elem = 2;  // bf16
  for (int tp : {1, 2, 4, 8}) {
    for (std::int64_t tokens : {1, 64, 100}) {
      const ShardShape s = shard(m, tp);
      const std::int64_t padded = (tokens + tp - 1) / tp * tp, local = padded / tp;
      const double full = static_cast<double>(padded * m.hidden) * elem;
      const double f = tp > 1 ? (tp - 1.0) / tp : 0.0;
      const int k = tp > 1 ? static_cast<int>(std::min<std::int64_t>(tp, local)) : 1;
      for (const char* op : {"tp_attn", "tp_mlp"}) {
        const int act = std::string(op) == "tp_mlp" ? 1 : 0;
        const Plan paired = build_plan(op, "paired", s, tokens, DType::bf16);
        for (const char* variant : {"sp", "overlap"}) {
          const Plan p = build_plan(op, variant, s, tokens, DType::bf16);
          const Cost c = cost_of(p);
          const std::string what = std::string(op) + "/" + variant + " tp=" + std::to_string(tp) +
                                   " M=" + std::to_string(tokens);
          EXPECT_EQ(p.padded_tokens, padded - tokens) << what;
          const int chunks = std::string(variant) == "overlap" ? k : 1;
          EXPECT_DOUBLE_EQ(c.comm_bytes, tp > 1 ? 2 * full : 0) << what;
          EXPECT_NEAR(c.comm_wire_bytes, 2 * f * full, 1e-6) << what;
          EXPECT_EQ(c.collective_launches, tp > 1 ? 2 * chunks : 0) << what;
          EXPECT_EQ(c.gemm_launches, 2 * chunks) << what;
          EXPECT_EQ(c.elementwise_launches, act + 1) << what;  // + the RMSNorm
          EXPECT_EQ(c.launches, c.gemm_launches + c.elementwise_launches + c.collective_launches);
          const auto traffic = collective_traffic(p);
          if (tp > 1) {
            EXPECT_EQ(traffic.at(CollectiveKind::all_gather).calls, chunks) << what;
            EXPECT_EQ(traffic.at(CollectiveKind::reduce_scatter).calls, chunks) << what;
            EXPECT_DOUBLE_EQ(traffic.at(CollectiveKind::all_gather).bytes, full) << what;
            EXPECT_DOUBLE_EQ(traffic.at(CollectiveKind::reduce_scatter).bytes, full) << what;
            EXPECT_NEAR(traffic.at(CollectiveKind::reduce_scatter).wire_bytes, f * full, 1e-6);
          } else {
            EXPECT_TRUE(traffic.empty()) << what;
          }
          // Same matmul FLOPs as paired on the padded rows.
          const Cost cp = cost_of(paired);
          EXPECT_NEAR(c.flops, cp.flops * static_cast<double>(padded) / tokens, 1e-6 * c.flops);
          // overlap's collectives all sit on lane 1, its compute on lane 0.
          for (std::size_t i = 0; i < p.steps.size(); ++i) {
            const bool lane1 =
                std::string(variant) == "overlap" && tp > 1 && is_collective(p.steps[i]);
            EXPECT_EQ(p.order_of(i).lane, lane1 ? 1 : 0) << what << " step " << i;
          }
        }
        // Same ring traffic as the all-reduce when nothing is padded (Megatron SP's claim).
        if (padded == tokens) {
          EXPECT_NEAR(cost_of(paired).comm_wire_bytes,
                      cost_of(build_plan(op, "sp", s, tokens, DType::bf16)).comm_wire_bytes, 1e-6);
        }
      }
    }
  }
}

TEST(TpPlans, OverlapChunksCoverTheRowsOnce) {
  ShardShape s = shard(tiny(), 4);
  s.rank = 1;
  const Plan p = build_plan("tp_attn", "overlap", s, 21, DType::f32);  // 24 rows, 6 per rank
  std::vector<std::int64_t> gathered, scattered;
  for (const Step& st : p.steps) {
    if (const auto* g = std::get_if<AllGatherRowsStep>(&st)) {
      gathered.push_back(g->src.rows);
      EXPECT_EQ(g->dst.rows, 4 * g->src.rows);
    }
    if (const auto* r = std::get_if<ReduceScatterStep>(&st)) scattered.push_back(r->dst.rows);
  }
  EXPECT_EQ(gathered, (std::vector<std::int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(scattered, gathered);
  EXPECT_NO_THROW(p.check_order());
}

TEST(TpCorrectness, VerifierCatchesAMissingReduceScatter) {
  auto backend = make_cpu_backend();
  SkipCollectives comm(1, 2);  // collectives that do nothing: a broken pipeline
  for (const char* variant : {"sp", "overlap"}) {
    const auto r = verify_tp_rank(*backend, comm, "tp_mlp", variant, shard(tiny(), 2), 4,
                                  DType::f32, 11, true);
    EXPECT_FALSE(r.ok()) << r.summary();
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

// The row collectives of the in-process group, on 3 ranks: exact sums in rank order, each
// rank's rows; the gathered blocks in rank order.
TEST(InProcessCommunicator, ReduceScatterAndAllGatherAlongRows) {
  constexpr int n = 3;
  constexpr std::int64_t rows = 2, cols = 5;  // per rank
  auto comms = make_inprocess_group(n, 10);
  std::vector<std::vector<float>> src(n), dst(n), gathered(n);
  const auto value = [](int rank, std::int64_t i, std::int64_t j) {
    return static_cast<float>(rank * 100 + i * 10 + j);
  };
  run_ranks(n, [&](int r) {
    auto& full = src[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < n * rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) full.push_back(value(r, i, j));
    dst[static_cast<std::size_t>(r)].assign(rows * cols, -1.0f);
    Communicator& c = *comms[static_cast<std::size_t>(r)];
    c.reduce_scatter({full.data(), DType::f32, n * rows, cols, cols},
                     {dst[static_cast<std::size_t>(r)].data(), DType::f32, rows, cols, cols});
    gathered[static_cast<std::size_t>(r)].assign(n * rows * cols, -1.0f);
    c.all_gather_rows(
        {dst[static_cast<std::size_t>(r)].data(), DType::f32, rows, cols, cols},
        {gathered[static_cast<std::size_t>(r)].data(), DType::f32, n * rows, cols, cols});
  });
  for (int r = 0; r < n; ++r) {
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += value(q, r * rows + i, j);
        EXPECT_EQ(dst[static_cast<std::size_t>(r)][static_cast<std::size_t>(i * cols + j)], want);
      }
    }
    // Gathering the scattered rows gives the full sum back, on every rank.
    for (std::int64_t i = 0; i < n * rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += value(q, i, j);
        EXPECT_EQ(gathered[static_cast<std::size_t>(r)][static_cast<std::size_t>(i * cols + j)],
                  want);
      }
    }
  }
}

TEST(InProcessCommunicator, RowCollectivesRefuseShapesThatDoNotFit) {
  auto comms = make_inprocess_group(2, 0.2);
  std::vector<float> a(12), b(12);
  try {
    comms[0]->reduce_scatter({a.data(), DType::f32, 3, 4, 4}, {b.data(), DType::f32, 1, 4, 4});
    FAIL() << "accepted [3, 4] -> [1, 4] on 2 ranks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("need src [2, 4]"), std::string::npos) << e.what();
  }
  try {
    comms[0]->all_gather_rows({a.data(), DType::f32, 2, 3, 4}, {b.data(), DType::f32, 4, 3, 3});
    FAIL() << "accepted a strided src";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
}

namespace {

// Records on which thread each collective ran, and optionally fails one kind.
class RecordingComm final : public Communicator {
 public:
  std::string name() const override { return "recording"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce(const MatRef&) override { note(); }
  void all_gather(const MatRef&, const MatRef&) override { note(); }
  void reduce_scatter(const MatRef&, const MatRef&) override {
    note();
    if (fail_reduce_scatter) throw std::runtime_error("reduce_scatter failed on purpose");
  }
  void all_gather_rows(const MatRef&, const MatRef&) override { note(); }
  void check_same_config(const std::string&) override {}
  void reserve(std::size_t bytes) override { reserved = std::max(reserved, bytes); }

  std::mutex mu;
  std::set<std::thread::id> threads;
  int calls = 0;
  bool fail_reduce_scatter = false;
  std::size_t reserved = 0;

 private:
  void note() {
    std::lock_guard lock(mu);
    threads.insert(std::this_thread::get_id());
    ++calls;
  }
};

}  // namespace

// Lanes on the CPU: overlap's collectives run on the workspace's communication thread (so they
// can overlap the GEMMs on the calling thread), sp's on the calling thread; every collective is
// counted for the calling thread; a failure on lane 1 comes back from run() and the workspace
// runs again afterwards.
TEST(PlanLanes, OverlapRunsItsCollectivesOnTheCommunicationThread) {
  auto backend = make_cpu_backend();
  ShardShape s = shard(tiny(), 2);
  for (const char* variant : {"sp", "overlap"}) {
    const Plan p = build_plan("tp_mlp", variant, s, 8, DType::f32);
    Workspace ws(*backend, p, 1);
    RecordingComm comm;
    const auto before = Workspace::collectives_issued_on_this_thread();
    ws.run(&comm);
    ws.run(&comm);
    EXPECT_EQ(Workspace::collectives_issued_on_this_thread() - before,
              2 * cost_of(p).collective_launches);
    EXPECT_EQ(comm.calls, 2 * cost_of(p).collective_launches) << variant;
    ASSERT_EQ(comm.threads.size(), 1u) << variant;
    const bool on_caller = *comm.threads.begin() == std::this_thread::get_id();
    EXPECT_EQ(on_caller, std::string(variant) == "sp") << variant;
    double largest = 0;  // reserve() is told the largest message before the run
    for (const Step& st : p.steps) {
      if (const auto call = collective_call(st, p.dtype)) largest = std::max(largest, call->bytes);
    }
    EXPECT_EQ(comm.reserved, static_cast<std::size_t>(largest)) << variant;
    comm.fail_reduce_scatter = true;
    try {
      ws.run(&comm);
      FAIL() << variant << ": the failed reduce-scatter was not reported";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("on purpose"), std::string::npos) << e.what();
    }
    comm.fail_reduce_scatter = false;
    EXPECT_NO_THROW(ws.run(&comm)) << variant;
  }
}

TEST(PlanLanes, MalformedOrdersAreRefused) {
  Plan p;
  p.op = "t";
  p.variant = "v";
  p.add_step(RmsNormStep{});
  p.add_step(RmsNormStep{}, 1, {0});
  EXPECT_NO_THROW(p.check_order());
  EXPECT_EQ(p.order.size(), 2u);
  EXPECT_EQ(p.order_of(0).lane, 0);
  p.order[1].after = {1};  // waits for itself
  EXPECT_THROW(p.check_order(), std::logic_error);
  p.order[1] = {2, {}};  // no lane 2
  EXPECT_THROW(p.check_order(), std::logic_error);
  p.order.pop_back();
  EXPECT_THROW(p.check_order(), std::logic_error);
}

// The critical path of the lanes: overlap with K chunks and GEMMs of g, collectives of c costs,
// per phase, c (the fill) + (K-1) max(g, c) + g; sp costs everything in sequence.
TEST(Overlap, TimelineIsFillPlusTheLargerPerChunk) {
  ShardShape s = shard(tiny(), 4);
  const Plan p = build_plan("tp_attn", "overlap", s, 16, DType::f32);  // 4 rows/rank: 4 chunks
  const int k = 4;
  for (const auto& [g, c] : {std::pair{1.0, 3.0}, std::pair{3.0, 1.0}, std::pair{2.0, 2.0}}) {
    std::vector<double> d;
    for (const Step& st : p.steps)
      d.push_back(is_collective(st) ? c : (std::holds_alternative<GemmStep>(st) ? g : 0.5));
    const PlanTimeline t = plan_timeline(p, d);
    const double phase1 = c + (k - 1) * std::max(g, c) + g;
    const double phase2 = g + (k - 1) * std::max(g, c) + c;
    EXPECT_DOUBLE_EQ(t.makespan_s, phase1 + phase2 + 0.5) << "g=" << g << " c=" << c;
    EXPECT_DOUBLE_EQ(t.comm_s, 2 * k * c);
    EXPECT_DOUBLE_EQ(t.compute_s, 2 * k * g + 0.5);
    EXPECT_DOUBLE_EQ(t.split.exposed_s, t.makespan_s - t.compute_s);
    EXPECT_DOUBLE_EQ(t.split.hidden_s, t.comm_s - t.split.exposed_s);
    EXPECT_GT(t.split.hidden_fraction, 0);
  }
  // In sequence nothing is hidden.
  const Plan sp = build_plan("tp_attn", "sp", s, 16, DType::f32);
  const PlanTimeline seq = plan_timeline(sp, std::vector<double>(sp.steps.size(), 1.0));
  EXPECT_DOUBLE_EQ(seq.makespan_s, static_cast<double>(sp.steps.size()));
  EXPECT_DOUBLE_EQ(seq.split.hidden_s, 0);
  EXPECT_THROW(plan_timeline(sp, std::vector<double>(2, 1.0)), std::invalid_argument);
}

TEST(Overlap, SplitOfMeasuredTimesIsClampedToTheCommunication) {
  CommSplit s = split_communication(10, 7, 5);  // 3 of 5 exposed
  EXPECT_DOUBLE_EQ(s.exposed_s, 3);
  EXPECT_DOUBLE_EQ(s.hidden_s, 2);
  EXPECT_DOUBLE_EQ(s.hidden_fraction, 0.4);
  s = split_communication(6.9, 7, 5);  // noise: faster than its compute
  EXPECT_DOUBLE_EQ(s.exposed_s, 0);
  EXPECT_DOUBLE_EQ(s.hidden_fraction, 1);
  s = split_communication(20, 7, 5);  // slower than compute + comm: all exposed, no more
  EXPECT_DOUBLE_EQ(s.exposed_s, 5);
  EXPECT_DOUBLE_EQ(s.hidden_s, 0);
  s = split_communication(10, 7, 0);
  EXPECT_DOUBLE_EQ(s.exposed_s, 0);
  EXPECT_DOUBLE_EQ(s.hidden_fraction, 0);
}

TEST(Overlap, ModelledStepsShareTheComputeAndPriceTheCollectives) {
  const ShardShape s = shard(find_model("llama3-8b"), 4);
  const Plan p = build_plan("tp_mlp", "overlap", s, 4096, DType::bf16);
  const LinkProfile link = find_link_profile("custom:10:100");
  const Ceilings ceilings{1e15, 3e12, "test"};
  const auto d = modelled_step_seconds(p, 1e-3, ceilings, link);
  double compute = 0;
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    if (const auto call = collective_call(p.steps[i], p.dtype)) {
      EXPECT_DOUBLE_EQ(d[i], modelled_seconds(link, call->kind, call->bytes, 4));
    } else {
      EXPECT_GT(d[i], 0);
      compute += d[i];
    }
  }
  EXPECT_NEAR(compute, 1e-3, 1e-12);
  // Without ceilings the compute is shared equally.
  const auto equal = modelled_step_seconds(p, 1e-3, Ceilings{}, link);
  EXPECT_DOUBLE_EQ(equal[4], equal[5]);
  // The modelled pipeline hides some communication and is faster than compute + comm.
  const PlanTimeline t = plan_timeline(p, d);
  EXPECT_LT(t.makespan_s, t.compute_s + t.comm_s);
  EXPECT_GE(t.makespan_s, std::max(t.compute_s, t.comm_s));
}

TEST(LinkModel, ReduceScatterFollowsNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::reduce_scatter, 4), 0.75);
  EXPECT_EQ(to_string(CollectiveKind::reduce_scatter), "reduce_scatter");
  const LinkProfile link = find_link_profile("custom:10:100");
  // 1 MB (the full input) on 4 ranks: 10 us + 1e6 * 3/4 / 100e9 s.
  EXPECT_NEAR(modelled_seconds(link, CollectiveKind::reduce_scatter, 1e6, 4), 17.5e-6, 1e-12);
  const CollectiveCall ar{CollectiveKind::all_reduce, 1e6}, rs{CollectiveKind::reduce_scatter, 1e6},
      ag{CollectiveKind::all_gather, 1e6};
  EXPECT_DOUBLE_EQ(wire_bytes(ar, 4), wire_bytes(rs, 4) + wire_bytes(ag, 4));
}
