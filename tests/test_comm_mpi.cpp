// The TP pipelines over the MPI communicator, one rank per process: ctest runs this binary once
// plainly (one rank) and once under `mpirun -np 2`. Every rank checks its own output against
// the unsharded layer pair; a failure on any rank fails the run.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "fusebench/mpi_comm.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/overlap.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/tp.hpp"

using namespace fusebench;

namespace {

int g_rank = 0, g_size = 1;

// kv_heads=1 makes every tp > 1 a KV-replicated shard; kv_heads=2 does not replicate at tp=2.
ModelShape tiny(std::int64_t kv_heads) { return {"tiny", 64, 8, kv_heads, 16, 96, 2}; }

}  // namespace

// naive, paired, sp and overlap; M = 5 is no multiple of 2 (sp/overlap pad to 6), and M = 1
// leaves rank 1 nothing but padding.
TEST(MpiCommunicator, PipelinesEqualTheUnshardedPairOnEveryRank) {
  auto comm = make_mpi_communicator(default_comm_timeout());
  ASSERT_EQ(comm->size(), g_size);
  ASSERT_EQ(comm->rank(), g_rank);
  auto backend = make_cpu_backend();
  for (std::int64_t kv : {1, 2}) {
    const ShardShape s = shard(tiny(kv), g_size);
    for (const char* op : {"tp_attn", "tp_mlp"}) {
      for (const auto& variant : find_op(op).variants) {
        for (DType dtype : {DType::f32, DType::bf16}) {
          for (std::int64_t tokens : {1, 5}) {
            const auto r =
                verify_tp_rank(*backend, *comm, op, variant, s, tokens, dtype, 4242, true);
            EXPECT_TRUE(r.ok()) << "kv_heads=" << kv << " tokens=" << tokens << " " << r.summary();
            EXPECT_GE(r.comparisons.size(), 2u);
          }
        }
      }
    }
  }
  EXPECT_EQ(find_op("tp_mlp").variants.size(), 4u);
}

// The MoE block across processes (tp_moe: tp, ep_ar, ep_ag_rs, ep_a2a's MPI_Alltoallv), every
// rank against the float64 block, with a skewed routing and redundant experts.
// tiny-qwen3-moe's expert layer sharded over the ranks, routed by zipf:1.2 (seed 7).
static ShardShape tiny_moe_shard(std::int64_t redundant_experts) {
  const std::string path = std::string(FUSEBENCH_TEST_CONFIGS) + "/tiny-qwen3-moe.json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ShardShape s = shard(load_hf_config(path), g_size, LayerKind::expert);
  auto block = std::make_shared<MoeBlock>();
  block->rule = routing_rule_from_config(text.str(), path);
  block->source = parse_routing("zipf:1.2");
  block->seed = 7;
  block->redundant_experts = redundant_experts;
  s.moe = std::move(block);
  return s;
}

TEST(MpiCommunicator, TpMoeVariantsMatchTheFloat64BlockOnEveryRank) {
  auto comm = make_mpi_communicator(default_comm_timeout());
  auto backend = make_cpu_backend();
  for (const std::int64_t redundant : {0, 2}) {
    const ShardShape s = tiny_moe_shard(g_size > 1 ? redundant : 0);
    for (const auto& variant : find_op("tp_moe").variants) {
      for (std::int64_t tokens : {1, 5}) {
        const auto r =
            verify_tp_rank(*backend, *comm, "tp_moe", variant, s, tokens, DType::bf16, 4242, true);
        EXPECT_TRUE(r.ok() && r.checked()) << variant << " tokens=" << tokens << " " << r.summary();
      }
    }
  }
}

// Bytes per collective, measured over MPI: what this rank's communicator handed MPI in one run of
// each pipeline equals its plan's bytes per kind in fp32; in bf16 the all-reduce and the
// reduce-scatter count twice the plan's (MPI sums in fp32: no bf16 type), the rest the plan's.
TEST(MpiCommunicator, CountedBytesEqualThePlansPerKind) {
  auto comm = make_mpi_communicator(default_comm_timeout());
  auto backend = make_cpu_backend();
  const ShardShape moe = tiny_moe_shard(0);
  const ShardShape dense = shard(tiny(2), g_size);
  for (const char* op : {"tp_attn", "tp_mlp", "tp_moe"}) {
    const ShardShape& s = std::string(op) == "tp_moe" ? moe : dense;
    for (const auto& variant : find_op(op).variants) {
      for (DType dtype : {DType::f32, DType::bf16}) {
        ShardShape mine = s;
        mine.rank = g_rank;
        const auto model = collective_traffic(build_plan(op, variant, mine, 5, dtype));
        const CollectiveTally before = comm->tally();
        verify_tp_rank(*backend, *comm, op, variant, s, 5, dtype, 4242, false);
        const CollectiveTally counted = comm->tally().since(before);
        for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
          const auto kind = static_cast<CollectiveKind>(k);
          const auto it = model.find(kind);
          const double bytes = it == model.end() ? 0 : it->second.bytes;
          const bool summed_in_fp32 =
              dtype == DType::bf16 &&
              (kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter);
          EXPECT_EQ(static_cast<double>(counted.bytes[k]), summed_in_fp32 ? 2 * bytes : bytes)
              << op << "/" << variant << " " << to_string(kind) << " rank " << g_rank;
        }
      }
    }
  }
}

// The row collectives across processes: rank r keeps rows [r*m, (r+1)*m) of the sum, and
// gathering them gives the whole sum back on every rank (fp32 and bf16).
TEST(MpiCommunicator, ReduceScatterAndAllGatherAlongRows) {
  auto comm = make_mpi_communicator(default_comm_timeout());
  const std::int64_t rows = 3, cols = 4, n = g_size;
  const auto value = [](int rank, std::int64_t i, std::int64_t j) {
    return static_cast<float>(rank * 16 + i * 4 + j) * 0.25f;
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::size_t elem = dtype_size(dtype);
    std::vector<float> full;
    for (std::int64_t i = 0; i < n * rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) full.push_back(value(g_rank, i, j));
    std::vector<std::byte> src = encode(full, dtype), dst(rows * cols * elem),
                           gathered(n * rows * cols * elem);
    comm->reduce_scatter({src.data(), dtype, n * rows, cols, cols},
                         {dst.data(), dtype, rows, cols, cols});
    comm->all_gather_rows({dst.data(), dtype, rows, cols, cols},
                          {gathered.data(), dtype, n * rows, cols, cols});
    const auto mine = decode(dst.data(), rows * cols, dtype);
    const auto all = decode(gathered.data(), n * rows * cols, dtype);
    for (std::int64_t i = 0; i < n * rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += value(q, i, j);  // small integers/4: exact in bf16
        EXPECT_EQ(all[static_cast<std::size_t>(i * cols + j)], want) << to_string(dtype);
        if (i / rows == g_rank) {
          EXPECT_EQ(mine[static_cast<std::size_t>((i % rows) * cols + j)], want);
        }
      }
    }
  }
}

TEST(MpiCommunicator, CollectiveSweepOps) {
  if (g_size < 2) GTEST_SKIP() << "collectives need 2 ranks: run under mpirun -np 2";
  auto comm = make_mpi_communicator(default_comm_timeout());
  auto backend = make_cpu_backend();
  for (const char* op : {"allreduce", "allgather"}) {
    const auto r = verify_tp_rank(*backend, *comm, op, find_op(op).variants.front(),
                                  shard(tiny(2), g_size), 3, DType::bf16, 7, true);
    EXPECT_TRUE(r.ok()) << r.summary();
  }
}

TEST(MpiCommunicator, MismatchedConfigurationFailsOnEveryRank) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks: run under mpirun -np 2";
  auto comm = make_mpi_communicator(default_comm_timeout());
  try {
    comm->check_same_config("tokens=" + std::to_string(4 + g_rank));
    FAIL() << "rank " << g_rank << " accepted a mismatched configuration";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("configuration mismatch"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(comm->check_same_config("same everywhere"));
}

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  g_rank = mpi.rank();
  g_size = mpi.size();
  ::testing::InitGoogleTest(&argc, argv);
  if (g_rank != 0) {
    // One report is enough; failures on other ranks still show and set the exit status.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
