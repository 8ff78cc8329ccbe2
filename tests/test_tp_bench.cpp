// End-to-end: `fusebench --ops=tp_attn,tp_mlp --tp=1,2,4` on the CPU writes entries for every
// variant with the communication bytes of the formulas, the compute pass of every rank and the
// exposed/hidden split; modelled entries say so everywhere and are priced on the plan's lanes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <thread>

#include "cli_run.hpp"
#include "fusebench/link_model.hpp"

namespace {

using fusebench::testing::CliResult;

CliResult run(const std::string& args) {
  return fusebench::testing::run_fusebench("--backend=cpu " + args);
}

std::filesystem::path temp_path(const std::string& name) {
  return fusebench::testing::temp_path("fusebench_tp", name);
}

nlohmann::json load(const std::filesystem::path& p) { return fusebench::testing::load_json(p); }

// qwen3-0.6b: hidden 1024, q 2048, kv 8 heads x 128, intermediate 3072; fp32.
constexpr double kHidden = 1024, kQ = 2048, kKvHeads = 8, kHeadDim = 128, kInter = 3072, kElem = 4;

double expected_comm_bytes(const std::string& op, const std::string& variant, int tp, double m) {
  if (tp == 1) return 0;
  if (variant == "sp" || variant == "overlap") {
    const double padded = std::ceil(m / tp) * tp;  // all-gather + reduce-scatter of [Mp, hidden]
    return 2 * padded * kHidden * kElem;
  }
  double bytes = m * kHidden * kElem;  // the all-reduce
  if (variant == "naive") {
    const double kv_per_rank = std::max(1.0, kKvHeads / tp) * kHeadDim;
    bytes += op == "tp_attn" ? m * (kQ + 2 * kv_per_rank * tp) * kElem : m * 2 * kInter * kElem;
  }
  return bytes;
}

}  // namespace

TEST(TpBench, CpuEntriesForEveryVariantWithCommBytes) {
  const auto path = temp_path("inprocess.json");
  const CliResult r =
      run("--ops=tp_attn,tp_mlp --tp=1,2,4 --tokens=2 --dtypes=fp32 --seed=3 --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  std::set<std::string> seen;
  for (const auto& b : report["benchmarks"]) {
    const std::string op = b["op"], variant = b["variant"], name = b["name"];
    const int tp = b["tp"];
    EXPECT_FALSE(b.value("error_occurred", false)) << name;
    EXPECT_NE(name.find(tp == 1 ? "/comm:none" : "/comm:inprocess"), std::string::npos) << name;
    EXPECT_EQ(b["comm"], tp == 1 ? "none" : "inprocess") << name;
    EXPECT_DOUBLE_EQ(b["comm_bytes"].get<double>(), expected_comm_bytes(op, variant, tp, 2))
        << name;
    EXPECT_EQ(b["comm_modelled"].get<double>(), 0) << name;
    // Library calls + this rank's collective calls: what the model says one rank launches.
    EXPECT_EQ(b["launches"].get<double>(), b["model_launches"].get<double>()) << name;
    EXPECT_GT(b["compute_seconds"].get<double>(), 0) << name;
    const bool sp = variant == "sp" || variant == "overlap";
    // M = 2 at tp = 4: sp/overlap pad it to 4 rows and say so.
    EXPECT_EQ(b["padded_tokens"].get<double>(), sp && tp == 4 ? 2 : 0) << name;
    if (tp > 1) {
      EXPECT_GT(b["comm_seconds"].get<double>(), 0) << name;  // measured in-process collectives
      EXPECT_GT(b[sp ? "reduce_scatter_busbw" : "all_reduce_busbw"].get<double>(), 0) << name;
      if (sp) {
        EXPECT_GT(b["all_gather_busbw"].get<double>(), 0) << name;
      }
      // On the ring, sp moves what paired's all-reduce moves (here padded at tp 4).
      const double wire = sp ? 2.0 * (tp - 1) / tp * (tp == 4 ? 4 : 2) * kHidden * kElem
                             : b["comm_wire_bytes"].get<double>();
      EXPECT_NEAR(b["comm_wire_bytes"].get<double>(), wire, 1e-6) << name;
      // The ranks split this machine's cores between their GEMM libraries.
      const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      EXPECT_EQ(b["cpu_threads_per_rank"].get<int>(), std::max(1, hw / tp)) << name;
      // The compute pass ran on every rank at once; the slowest rank's time is reported.
      EXPECT_EQ(b["compute_ranks"].get<double>(), tp) << name;
      EXPECT_GT(b["compute_seconds_fastest_rank"].get<double>(), 0) << name;
      EXPECT_LE(b["compute_seconds_fastest_rank"].get<double>(), b["compute_seconds"].get<double>())
          << name;
      // The pipeline's cost beyond its compute, on every entry with collectives.
      const double comm = b["comm_seconds"].get<double>();
      EXPECT_NEAR(b["comm_by_difference_seconds"].get<double>(),
                  b["time_median"].get<double>() - b["compute_seconds"].get<double>(),
                  1e-9 * b["time_median"].get<double>())
          << name;
      if (b["variant"] == "overlap") {
        // Exposed and hidden communication add up to it, hidden a fraction of it.
        EXPECT_NEAR(
            b["comm_exposed_seconds"].get<double>() + b["comm_hidden_seconds"].get<double>(), comm,
            1e-12 + 1e-9 * comm)
            << name;
        EXPECT_GE(b["comm_hidden_fraction"].get<double>(), 0) << name;
        EXPECT_LE(b["comm_hidden_fraction"].get<double>(), 1) << name;
      } else {
        EXPECT_FALSE(b.contains("comm_hidden_fraction")) << name;  // one lane: hides nothing
      }
      EXPECT_FALSE(b.contains("modelled_pipeline_seconds")) << name;  // measured entries
    } else {
      EXPECT_FALSE(b.contains("comm_exposed_seconds")) << name;  // nothing to expose
    }
    // The four variants of one shape are measured interleaved; the speedups are over naive.
    EXPECT_EQ(b["interleaved_with"], nlohmann::json::array({"naive", "paired", "sp", "overlap"}))
        << name;
    EXPECT_EQ(b["speedup_baseline"], "naive") << name;
    // On the CPU every group is measured in 5 blocks (docs/timing.md), or fewer where a round
    // is too slow for the budget (a loaded machine, a sanitizer build), which the entry says.
    const auto blocks = b["timing_blocks"].get<std::size_t>();
    EXPECT_TRUE(blocks == 5 || b.contains("timing_blocks_note")) << name;
    if (variant != "naive") {
      EXPECT_TRUE(b.contains("speedup")) << name;
      // Beside a busy neighbour a contended group can keep fewer than 6 pairs: then no
      // interval is stated, and the entry says why.
      if (!b.contains("speedup_ci_low")) {
        EXPECT_TRUE(b.contains("speedup_ci_note")) << name;
        EXPECT_EQ(b["timing_stop"], "contended") << name;
        seen.insert(op + "/" + variant + "/" + std::to_string(tp));
        continue;
      }
      EXPECT_LE(b["speedup_ci_low"].get<double>(), b["speedup"].get<double>()) << name;
      EXPECT_GE(b["speedup_ci_high"].get<double>(), b["speedup"].get<double>()) << name;
      if (blocks > 1) {
        // One value per block with a speedup (a block whose samples were all preempted, beside
        // a busy neighbour, has none).
        EXPECT_LE(b["speedup_blocks"].size(), blocks) << name;
        EXPECT_GE(b["speedup_blocks"].size(), 1u) << name;
        // The reported interval holds the between-block one, where the blocks give one (a
        // single block with a speedup, beside a busy neighbour, gives none).
        if (b["speedup_blocks"].size() >= 2) {
          ASSERT_TRUE(b.contains("speedup_ci_between_blocks")) << name;
          EXPECT_LE(b["speedup_ci_low"].get<double>(),
                    b["speedup_ci_between_blocks"][0].get<double>() * (1 + 1e-12))
              << name;
          EXPECT_GE(b["speedup_ci_high"].get<double>(),
                    b["speedup_ci_between_blocks"][1].get<double>() * (1 - 1e-12))
              << name;
        }
      }
    } else {
      EXPECT_TRUE(b["speedup_over"].contains("paired")) << name;
    }
    seen.insert(op + "/" + variant + "/" + std::to_string(tp));
  }
  EXPECT_EQ(seen.size(), 24u);  // 2 ops x 4 variants x 3 tp
}

TEST(TpBench, ModelledEntriesSayModelledAndFollowTheLinkModel) {
  const auto path = temp_path("modelled.json");
  const CliResult r =
      run("--ops=tp_mlp --tp=2 --tokens=4 --dtypes=fp32 --comm=modelled "
          "--link-profile=custom:30:50 --collective-sweep --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  EXPECT_EQ(report["context"]["tp"]["link_profile"]["name"], "custom");
  int entries = 0;
  for (const auto& b : report["benchmarks"]) {
    const std::string name = b["name"];
    EXPECT_NE(name.find("/comm:modelled"), std::string::npos) << name;
    EXPECT_EQ(b["comm"], "modelled");
    EXPECT_EQ(b["comm_modelled"].get<double>(), 1);
    ASSERT_TRUE(b.contains("link_profile")) << name;
    if (b["op"] == "tp_mlp" && b["variant"] == "paired") {
      const double bytes = 4 * kHidden * kElem;
      EXPECT_NEAR(b["comm_seconds"].get<double>(), 30e-6 + bytes * 1.0 / 50e9, 1e-12) << name;
      // The timed pipeline includes the modelled delay.
      EXPECT_GE(b["real_time"].get<double>() * 1e-6, 30e-6) << name;
    }
    ++entries;
  }
  EXPECT_EQ(entries, 6);  // tp_mlp naive, paired, sp, overlap, allreduce/sum, allgather/cols
}

// tp 8 in one process: one rank's compute measured, every collective modelled, and the pipeline
// priced on its lanes: overlap's chunks hide part of the communication (per chunk the larger of
// compute and communication, plus the fill), the one-lane variants none.
TEST(TpBench, ModelledTp8IsPricedWithOverlap) {
  const auto path = temp_path("modelled_tp8.json");
  const CliResult r =
      run("--ops=tp_attn,tp_mlp --variants=paired,sp,overlap --tp=8 --tokens=64 --dtypes=fp32 "
          "--comm=modelled --link-profile=custom:30:50 --timing-max-time=0.05 --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);  // a named object: ranging over a temporary's member dangles
  int overlap = 0;
  for (const auto& b : report["benchmarks"]) {
    const std::string name = b["name"], variant = b["variant"];
    EXPECT_FALSE(b.value("error_occurred", false)) << name;
    EXPECT_NE(name.find("/tp:8/"), std::string::npos) << name;
    EXPECT_NE(name.find("/comm:modelled"), std::string::npos) << name;
    EXPECT_EQ(b["comm_modelled"].get<double>(), 1) << name;
    const double compute = b["compute_seconds"].get<double>(),
                 comm = b["comm_seconds"].get<double>();
    const double pipeline = b["modelled_pipeline_seconds"].get<double>();
    ASSERT_GT(comm, 0) << name;
    EXPECT_EQ(b["compute_ranks"].get<double>(), 1) << name;  // one rank measured
    EXPECT_NEAR(b["modelled_comm_exposed_seconds"].get<double>() +
                    b["modelled_comm_hidden_seconds"].get<double>(),
                comm, 1e-12)
        << name;
    EXPECT_TRUE(b.contains("modelled_pipeline_source")) << name;
    if (variant == "overlap") {
      // 64 tokens over 8 ranks: 8 rows each, 8 chunks; some communication under compute.
      EXPECT_LT(pipeline, compute + comm) << name;
      EXPECT_GE(pipeline, std::max(compute, comm) - 1e-12) << name;
      EXPECT_GT(b["modelled_comm_hidden_fraction"].get<double>(), 0) << name;
      ++overlap;
    } else {
      EXPECT_NEAR(pipeline, compute + comm, 1e-12 + 1e-9 * pipeline) << name;
      EXPECT_NEAR(b["modelled_comm_hidden_seconds"].get<double>(), 0, 1e-12) << name;
    }
  }
  EXPECT_EQ(overlap, 2);
}

// The end-to-end check of the issue, small: paired, sp and overlap over tp 2 and tokens that are
// and are not multiples of it, verified first; overlap's collectives run on the communication
// thread, so its launches still equal the model's (library calls + this rank's collectives).
TEST(TpBench, SequenceParallelVariantsVerifyAndMatchTheModel) {
  const auto path = temp_path("sp.json");
  const CliResult r =
      run("--ops=tp_attn,tp_mlp --variants=paired,sp,overlap --tp=2 --tokens=1,7,64 "
          "--dtypes=fp32 --verify --seed=5 --timing-max-time=0.05 --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  int checked = 0;
  for (const auto& v : report["context"]["verification"]) {
    EXPECT_TRUE(v["ok"].get<bool>()) << v.dump();
    ++checked;
  }
  EXPECT_GT(checked, 0);
  int entries = 0;
  for (const auto& b : report["benchmarks"]) {
    const std::string name = b["name"];
    EXPECT_FALSE(b.value("error_occurred", false)) << name;
    EXPECT_EQ(b["launches"].get<double>(), b["model_launches"].get<double>()) << name;
    const double m = b["tokens"].get<double>();
    EXPECT_DOUBLE_EQ(b["comm_bytes"].get<double>(),
                     expected_comm_bytes(b["op"], b["variant"], 2, m))
        << name;
    ++entries;
  }
  EXPECT_EQ(entries, 2 * 3 * 3);
}

TEST(TpBench, ImpossibleRequestsFailWithAMessage) {
  CliResult r = run("--ops=tp_attn --tp=2 --comm=nccl --list");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--comm=nccl"), std::string::npos) << r.output;
  r = run("--ops=tp_attn --tp=2 --link-profile=nvlink-h300 --list");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown link profile"), std::string::npos) << r.output;
}

TEST(TpBench, MeasuredLinkProfileIsFittedOnThisMachine) {
  const auto path = temp_path("measured.json");
  const CliResult r =
      run("--ops=tp_attn --variants=paired --tp=2 --tokens=2 --dtypes=fp32 --comm=modelled "
          "--link-profile=measured --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto link = load(path)["context"]["tp"]["link_profile"];
  EXPECT_EQ(link["name"], "measured");
  EXPECT_GT(link["busbw_bytes_per_s"].get<double>(), 0);
  EXPECT_GE(link["latency_s"].get<double>(), 0);
  EXPECT_NE(link["source"].get<std::string>().find("measured here"), std::string::npos);
}
