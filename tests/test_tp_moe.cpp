// The MoE block across ranks (issue 40, docs/tp.md): tp (sharded experts, one all-reduce),
// ep_ar (expert parallel, TP attention, all-reduce combine) and ep_ag_rs (expert parallel, DP
// attention, all-gather dispatch and reduce-scatter combine), every rank of every variant against
// the float64 MoE block at tp 1, 2 and 4 with every placement; launches, collective bytes and
// per-rank rows against the model; the imbalance under skew and under EPLB.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>

#include "cli_run.hpp"
#include "error_of.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/communicator.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/expert_placement.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/overlap.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"

namespace {

using namespace fusebench;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Block {
  std::string routing = "uniform", placement = "linear";
  std::int64_t redundant = 0;
};

// Rank 0's expert shard at `tp` of a test config (or a preset) with the block.
ShardShape tp_moe_shard(const std::string& file, int tp, const Block& b = {}) {
  const bool preset = file.find(".json") == std::string::npos;
  const std::string path = std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file;
  const ModelShape model = preset ? find_model(file) : load_hf_config(path);
  ShardShape s = shard(model, tp, LayerKind::expert);
  auto block = std::make_shared<MoeBlock>();
  block->rule = preset ? routing_rule_for_preset(file) : routing_rule_from_config(read(path), path);
  block->source = parse_routing(b.routing);
  block->seed = 7;
  block->placement = b.placement;
  block->redundant_experts = b.redundant;
  for (const auto& l : model.mlp_layer_list())
    if (l.kind == LayerKind::shared_expert) block->shared_intermediate = l.intermediate;
  s.moe = std::move(block);
  return s;
}

std::vector<VerifyResult> verify(const ShardShape& s, std::int64_t m, DType dtype) {
  if (s.tp > 1) return verify_tp_op_inprocess("tp_moe", s, m, dtype, 3, true, nullptr);
  auto backend = make_cpu_backend();
  return verify_op(*backend, "tp_moe", s, m, dtype, 3, true, 0, nullptr);
}

void expect_verified(const ShardShape& s, std::int64_t m, DType dtype, const std::string& what) {
  const auto results = verify(s, m, dtype);
  EXPECT_EQ(results.size(), 4u * static_cast<std::size_t>(s.tp)) << what;
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok() && r.checked()) << what << " m=" << m << " " << r.summary();
    bool float64 = false;
    for (const auto& c : r.comparisons) float64 = float64 || c.against == "float64";
    EXPECT_TRUE(float64) << what << " " << r.variant;
  }
}

TEST(TpMoe, EveryVariantMatchesTheFloat64BlockOnEveryRank) {
  for (const char* file : {"tiny-qwen3-moe.json", "tiny-deepseek-v3.json"}) {
    for (int tp : {1, 2, 4}) {
      for (std::int64_t m : {1, 5, 16}) {
        const std::string what = std::string(file) + " tp=" + std::to_string(tp);
        expect_verified(tp_moe_shard(file, tp), m, DType::bf16, what);
      }
    }
  }
  // fp32, the tightest tolerance, at an M that does not divide by tp (ep_ag_rs pads).
  expect_verified(tp_moe_shard("tiny-qwen3-moe.json", 4), 7, DType::f32, "fp32");
}

TEST(TpMoe, SharedExpertGateAndWeightOnInputVerify) {
  // qwen2_moe's sigmoid-gated shared expert (sharded under tp and ep_ar, whole under ep_ag_rs);
  // Llama-4's routing weight on the expert input.
  for (const char* file : {"tiny-qwen2-moe.json", "tiny-llama4.json"})
    for (int tp : {2, 4}) expect_verified(tp_moe_shard(file, tp, {"router"}), 6, DType::bf16, file);
}

TEST(TpMoe, EveryPlacementVerifies) {
  for (const Block& b : {Block{"zipf:1.2", "round_robin", 0}, Block{"zipf:1.2", "linear", 4},
                         Block{"uniform", "linear", 8}}) {
    const std::string what = b.routing + " " + b.placement + " +" + std::to_string(b.redundant);
    expect_verified(tp_moe_shard("tiny-deepseek-v3.json", 4, b), 12, DType::bf16, what);
  }
  expect_verified(tp_moe_shard("tiny-qwen3-moe.json", 2, {"zipf:1.2", "linear", 2}), 9, DType::bf16,
                  "tp 2 eplb");
}

// Every rank's plan: its routed rows are the rows its grouped GEMMs run; launches and collective
// bytes as docs/tp.md states them; ep_a2a's rows sent and received match across the ranks.
TEST(TpMoe, LaunchesBytesAndRankRowsEqualTheModel) {
  for (int tp : {2, 4}) {
    for (std::int64_t m : {1, 16, 64}) {
      const ShardShape s0 = tp_moe_shard("tiny-qwen3-moe.json", tp, {"zipf:1.2"});
      const double row_bytes = static_cast<double>(s0.hidden) * 2;  // bf16
      const std::int64_t padded = (m + tp - 1) / tp * tp;
      for (const char* v : {"tp", "ep_ar", "ep_ag_rs", "ep_a2a"}) {
        const std::string variant = v,
                          where = variant + " tp=" + std::to_string(tp) + " m=" + std::to_string(m);
        std::int64_t total = 0, sent_total = 0, received_total = 0;
        for (int r = 0; r < tp; ++r) {
          ShardShape s = s0;
          s.rank = r;
          const Plan p = build_plan("tp_moe", variant, s, m, DType::bf16);
          const Cost c = cost_of(p);
          const auto& ranks = p.moe->ranks;
          const auto rows = ranks["placement"]["rows_per_rank"][r].get<std::int64_t>();
          std::int64_t gemm_rows = 0;
          for (const Step& step : p.steps)
            if (const auto* g = std::get_if<GroupedGemmStep>(&step); g && g->label == "w13_grouped")
              for (const auto& member : g->gemms) gemm_rows += member.x.rows;
          EXPECT_EQ(gemm_rows, rows) << where << " rank " << r;
          total += rows;
          // gather, grouped w13, act, grouped w2, combine; a rank without rows: the combine
          // alone (zeroing its contribution).
          const int experts = rows > 0 ? 5 : 1;
          if (variant == "ep_a2a") {
            const auto sent = ranks["dispatch_rows_sent_per_rank"][r].get<std::int64_t>();
            const auto received = ranks["dispatch_rows_received_per_rank"][r].get<std::int64_t>();
            EXPECT_EQ(received, ranks["placement"]["tokens_per_rank"][r].get<std::int64_t>());
            sent_total += sent;
            received_total += received;
            EXPECT_EQ(c.collective_launches, 2) << where;
            EXPECT_DOUBLE_EQ(c.comm_bytes, static_cast<double>(sent + received) * row_bytes)
                << where << " rank " << r;
            // pack (when it sends), dispatch, the experts, combine back, add (always: no shared
            // expert to add onto).
            EXPECT_EQ(c.launches, (sent > 0 ? 1 : 0) + 1 + experts + 1 + 1) << where << " " << r;
            continue;
          }
          const bool dp = variant == "ep_ag_rs";
          EXPECT_EQ(c.collective_launches, dp ? 2 : 1) << where;
          EXPECT_DOUBLE_EQ(c.comm_bytes, dp ? 2.0 * static_cast<double>(padded) * row_bytes
                                            : static_cast<double>(m) * row_bytes)
              << where;
          EXPECT_EQ(c.launches - c.collective_launches, experts) << where << " rank " << r;
        }
        // tp: every rank runs every slot on its shard; EP: the slots split over the ranks.
        EXPECT_EQ(total, (variant == "tp" ? tp : 1) * m * 2) << where;
        EXPECT_EQ(sent_total, received_total) << where;
      }
    }
  }
}

// The in-process all-to-all: rank r sends r + d + 1 rows to rank d, row values naming (from, to,
// index); every rank receives its rows grouped by source rank. Mismatched counts are refused.
TEST(TpMoe, InProcessAllToAllMovesRowsBySourceRank) {
  constexpr int kRanks = 3;
  constexpr std::int64_t kCols = 2;
  auto comms = make_inprocess_group(kRanks, 10);
  run_ranks(kRanks, [&](int r) {
    std::vector<std::int64_t> send, recv;
    std::vector<float> src, dst;
    for (int d = 0; d < kRanks; ++d) {
      send.push_back(r + d + 1);
      recv.push_back(d + r + 1);
      for (int i = 0; i < r + d + 1; ++i)
        for (std::int64_t c = 0; c < kCols; ++c)
          src.push_back(static_cast<float>(100 * r + 10 * d + i));
    }
    dst.assign(src.size(), -1.0f);  // sent and received totals are equal here
    const auto ref = [&](std::vector<float>& v) {
      return MatRef{v.data(), DType::f32, static_cast<std::int64_t>(v.size()) / kCols, kCols,
                    kCols};
    };
    comms[static_cast<std::size_t>(r)]->all_to_all_rows(ref(src), send, ref(dst), recv);
    std::size_t at = 0;
    for (int from = 0; from < kRanks; ++from)
      for (int i = 0; i < from + r + 1; ++i, at += kCols)
        EXPECT_EQ(dst[at], static_cast<float>(100 * from + 10 * r + i)) << r << " " << from;
  });
  auto bad = make_inprocess_group(2, 10);
  EXPECT_THROW(
      run_ranks(
          2,
          [&](int r) {
            std::vector<float> v(8, 0.0f);
            const MatRef m{v.data(), DType::f32, 4, 2, 2};
            // rank 0 sends 2 rows to rank 1, which expects 1
            bad[static_cast<std::size_t>(r)]->all_to_all_rows(m, {1, r == 0 ? 2 : 1}, m, {1, 1});
          }),
      std::invalid_argument);
}

TEST(TpMoe, ZipfRaisesTheImbalanceAndEplbLowersIt) {
  // qwen3-30b-a3b at ep 4, 256 tokens.
  const auto placement = [](const Block& b) {
    return build_plan("tp_moe", "ep_ag_rs", tp_moe_shard("qwen3-30b-a3b", 4, b), 256, DType::bf16)
        .moe->ranks;
  };
  const auto uniform = placement({"uniform"});
  const auto zipf = placement({"zipf:1.2"});
  const auto eplb = placement({"zipf:1.2", "linear", 8});
  const auto imbalance = [](const nlohmann::json& j) {
    return j["placement"]["imbalance"].get<double>();
  };
  EXPECT_GT(imbalance(zipf), imbalance(uniform) + 0.2) << zipf.dump();
  EXPECT_LT(imbalance(eplb), imbalance(zipf)) << eplb.dump();
  EXPECT_EQ(eplb["placement"]["strategy"], "eplb");
  // 136 physical experts: 34 per rank, 2 more than 32, each 3 * 768 * 2048 bf16 values.
  for (const auto& extra : eplb["redundant_weight_bytes_per_rank"])
    EXPECT_DOUBLE_EQ(extra.get<double>(), 2.0 * 3 * 768 * 2048 * 2);
  EXPECT_FALSE(zipf.contains("redundant_weight_bytes_per_rank"));
  // The slowest rank is the one with the most rows.
  const auto rows = zipf["placement"]["rows_per_rank"].get<std::vector<std::int64_t>>();
  EXPECT_EQ(zipf["placement"]["slowest_rank"].get<std::int64_t>(),
            std::max_element(rows.begin(), rows.end()) - rows.begin());
  EXPECT_EQ(std::accumulate(rows.begin(), rows.end(), std::int64_t{0}), 256 * 8);
}

// Every rank's plan of `op`/`variant` run once over an in-process group: the bytes and calls each
// rank's communicator counted, per collective kind, equal its plan's (collective_traffic).
void expect_counted_bytes_equal_the_plans(const std::string& op, const std::string& variant,
                                          const ShardShape& s, std::int64_t m, DType dtype) {
  auto comms = make_inprocess_group(s.tp, 60);
  std::vector<CollectiveTally> counted(static_cast<std::size_t>(s.tp));
  std::vector<std::map<CollectiveKind, KindTraffic>> model(static_cast<std::size_t>(s.tp));
  run_ranks(s.tp, [&](int r) {
    const auto rank = static_cast<std::size_t>(r);
    ShardShape mine = s;
    mine.rank = r;
    const Plan plan = build_plan(op, variant, mine, m, dtype);
    model[rank] = collective_traffic(plan);
    auto backend = make_cpu_backend();
    Workspace ws(*backend, plan, 5);
    const CollectiveTally before = comms[rank]->tally();
    ws.run(comms[rank].get());
    counted[rank] = comms[rank]->tally().since(before);
  });
  for (std::size_t r = 0; r < counted.size(); ++r) {
    const std::string what = op + "/" + variant + " tp=" + std::to_string(s.tp) +
                             " rank=" + std::to_string(r) + " m=" + std::to_string(m);
    double total = 0;
    for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
      const auto it = model[r].find(static_cast<CollectiveKind>(k));
      const double bytes = it == model[r].end() ? 0 : it->second.bytes;
      const int calls = it == model[r].end() ? 0 : it->second.calls;
      EXPECT_EQ(static_cast<double>(counted[r].bytes[k]), bytes) << what << " kind " << k;
      EXPECT_EQ(counted[r].calls[k], calls) << what << " kind " << k;
      total += bytes;
    }
    EXPECT_EQ(static_cast<double>(counted[r].total_bytes()), total) << what;
    if (s.tp > 1) {
      EXPECT_GT(total, 0) << what;
    }
  }
}

// Bytes per collective, measured: what the in-process communicator hands its collectives equals
// the plan's modelled bytes, every kind and every rank (ep_a2a's differ per rank), for every
// tp_moe variant and the dense pipelines, at tp 2 and 4.
TEST(TpMoe, CommunicatorsCountThePlansBytes) {
  for (int tp : {2, 4}) {
    const ShardShape moe = tp_moe_shard("tiny-deepseek-v3.json", tp, {"zipf:1.2"});
    for (const auto& variant : find_op("tp_moe").variants)
      for (std::int64_t m : {1, 7})
        expect_counted_bytes_equal_the_plans("tp_moe", variant, moe, m, DType::bf16);
    const ShardShape dense = shard(ModelShape{"tiny", 64, 8, 2, 16, 96, 2}, tp);
    for (const char* op : {"tp_attn", "tp_mlp"})
      for (const auto& variant : find_op(op).variants)
        expect_counted_bytes_equal_the_plans(op, variant, dense, 5, DType::f32);
  }
  // What skips the collectives counts nothing.
  SkipCollectives skip(0, 2);
  EXPECT_EQ(skip.tally().total_bytes(), 0);
}

// A routing file of recorded expert loads (tokens_per_expert) fixes the token count: its M only.
// tiny-qwen3-moe: 8 experts, top-2, 16 tokens; experts 0-3 take 28 of the 32 slots, so under
// linear placement at ep 2 rank 0 runs 28 rows and rank 1 4.
const std::vector<std::int64_t> kRecordedLoads = {12, 8, 4, 4, 2, 1, 1, 0};

std::filesystem::path write_count_file(const std::string& prefix) {
  const auto path = fusebench::testing::temp_path(prefix, "tokens_per_expert.json");
  std::ofstream(path) << nlohmann::json{{"tokens_per_expert", kRecordedLoads}}.dump();
  return path;
}

// The verifier's float64 budget caps the rows it checks, not the tokens the ranks run: every
// variant on every rank at the file's M, each rank's first rows against the float64 block (a
// data-parallel rank's first rows are its own tokens'), and the moe op's first rows likewise.
TEST(TpMoe, CountFileVerifiesAtItsTokensWithTheReferenceOnTheFirstRows) {
  const auto file = write_count_file("tp_moe_rows");
  const ShardShape s = tp_moe_shard("tiny-qwen3-moe.json", 2, {"file:" + file.string()});
  EXPECT_TRUE(routing_fixes_tokens(s.moe->source));
  EXPECT_THROW(build_plan("tp_moe", "ep_ar", s, 8, DType::bf16), std::invalid_argument);
  const auto results = verify_tp_op_inprocess("tp_moe", s, 16, DType::bf16, 3, true, nullptr, 3);
  ASSERT_EQ(results.size(), 8u);
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok() && r.checked()) << r.summary();
    EXPECT_EQ(r.reference_rows, 3) << r.variant;
    ASSERT_EQ(r.comparisons.size(), 1u) << r.variant;
    EXPECT_EQ(r.comparisons.front().elements, 3 * 64) << r.variant;
  }
  // The moe op (one rank) likewise: its first rows' plan is built routed uniformly, and checked
  // on the file's routing.
  const ShardShape one = tp_moe_shard("tiny-qwen3-moe.json", 1, {"file:" + file.string()});
  auto backend = make_cpu_backend();
  for (const auto& r : verify_op(*backend, "moe", one, 16, DType::bf16, 3, true, 3, nullptr)) {
    EXPECT_TRUE(r.ok() && r.checked()) << r.summary();
    EXPECT_EQ(r.reference_rows, 3) << r.variant;
  }
  std::filesystem::remove(file);
}

TEST(TpMoe, RefusesWhatItDoesNotBuild) {
  const ShardShape s = tp_moe_shard("tiny-qwen3-moe.json", 4, {"uniform", "linear", 3});
  const std::string why = error_of([&] { build_plan("tp_moe", "ep_ar", s, 4, DType::bf16); });
  EXPECT_NE(why.find("--redundant-experts=3"), std::string::npos) << why;
  EXPECT_NE(
      error_of([&] { build_plan("tp_moe", "ep_a2a_x", s, 4, DType::bf16); }).find("valid: tp"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              build_plan("tp_moe", "tp", tp_moe_shard("tiny-gpt-oss.json", 2), 4, DType::bf16);
            }).find("interleaved"),
            std::string::npos);
}

// End to end: every variant verified on every rank, and the entry says per rank what it held,
// ran and took, which rank was slowest and how long the others waited.
TEST(TpMoeCli, RunsVerifiedWithPerRankFields) {
  const auto report = fusebench::testing::temp_path("tp_moe", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + std::string(FUSEBENCH_TEST_CONFIGS) +
      "/tiny-qwen3-moe.json --ops=tp_moe --tp=2 --tokens=1,16 --dtypes=bf16 --routing=zipf:1.2 "
      "--expert-placement=round_robin --verify --timing-max-time=0.05 --report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tp_moe/ep_ag_rs/rank:1: OK"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tp_moe/ep_a2a/rank:1: OK"), std::string::npos) << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("tp_moe/", 0) != 0) continue;
    ++entries;
    EXPECT_EQ(e["moe"]["routing"]["routing"], "zipf:1.2") << name;
    const auto& ranks = e["moe_ranks"];
    EXPECT_EQ(ranks["ranks"], 2) << name;
    EXPECT_EQ(ranks["placement"]["rows_per_rank"].size(), 2u) << name;
    if (name.rfind("tp_moe/tp/", 0) != 0) {
      EXPECT_EQ(ranks["placement"]["strategy"], "round_robin") << name;
    }
    EXPECT_GT(ranks["predicted"]["pipeline_seconds"].get<double>(), 0) << name;
    for (const char* c : {"compute_seconds_rank0", "compute_seconds_rank1", "compute_slowest_rank",
                          "compute_imbalance", "compute_wait_fraction"})
      EXPECT_TRUE(e.contains(c)) << name << " " << c;
    EXPECT_GE(e["compute_imbalance"].get<double>(), 1.0) << name;
    EXPECT_EQ(e["launches"], e["model_launches"]) << name;
    // Bytes per collective, measured by the in-process communicator and modelled by the plan.
    EXPECT_EQ(e["comm_bytes_measured"], e["comm_bytes"]) << name;
    for (const std::string kind : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) {
      if (e.contains(kind + "_bytes")) {
        EXPECT_EQ(e[kind + "_bytes_measured"], e[kind + "_bytes"]) << name << " " << kind;
      }
    }
    EXPECT_EQ(e["comm_bytes_measured_per_rank"].size(), 2u) << name;
    EXPECT_EQ(e["comm_bytes_counted"].get<std::string>().rfind("measured: ", 0), 0u) << name;
  }
  EXPECT_EQ(entries, 8);
  std::filesystem::remove(report);
}

// The modelled communicator moves nothing: its entries count the bytes it priced, labelled
// modelled, never measured.
TEST(TpMoeCli, ModelledBytesAreLabelledModelled) {
  const auto report = fusebench::testing::temp_path("tp_moe_modelled", "report.json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --model-config=" + std::string(FUSEBENCH_TEST_CONFIGS) +
      "/tiny-qwen3-moe.json --ops=tp_moe --tp=2 --tokens=4 --dtypes=bf16 --comm=modelled "
      "--timing-max-time=0.05 --report=" +
      report.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int entries = 0;
  const nlohmann::json j = fusebench::testing::load_json(report);
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("tp_moe/", 0) != 0) continue;
    ++entries;
    EXPECT_FALSE(e.contains("comm_bytes_measured")) << name;
    EXPECT_EQ(e["comm_bytes_modelled"], e["comm_bytes"]) << name;
    EXPECT_EQ(e["comm_bytes_counted"].get<std::string>().rfind("modelled: ", 0), 0u) << name;
  }
  EXPECT_EQ(entries, 4);
  std::filesystem::remove(report);
}

// An engine's recorded expert loads (a tokens_per_expert file) run through every variant
// verified (--verify, and --verify-only), and the entries name the slowest rank: the one whose
// experts take the most rows.
TEST(TpMoeCli, CountFileVerifiesAndNamesTheSlowestRank) {
  const auto file = write_count_file("tp_moe_cli");
  const auto report = fusebench::testing::temp_path("tp_moe_counts", "report.json");
  const std::string args = "--backend=cpu --model-config=" + std::string(FUSEBENCH_TEST_CONFIGS) +
                           "/tiny-qwen3-moe.json --ops=tp_moe --tp=2 --tokens=16 --dtypes=bf16 "
                           "--routing=file:" +
                           file.string() + " --report=" + report.string();
  const auto r = fusebench::testing::run_fusebench(args + " --verify --timing-max-time=0.05");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* v : {"tp", "ep_ar", "ep_ag_rs", "ep_a2a"})
    for (int rank : {0, 1})
      EXPECT_NE(
          r.output.find("tp_moe/" + std::string(v) + "/rank:" + std::to_string(rank) + ": OK"),
          std::string::npos)
          << v << " " << rank << "\n"
          << r.output;
  const nlohmann::json j = fusebench::testing::load_json(report);
  ASSERT_EQ(j["context"]["verification"].size(), 8u) << j["context"]["verification"].dump();
  for (const auto& v : j["context"]["verification"]) EXPECT_TRUE(v["ok"].get<bool>()) << v.dump();
  int entries = 0;
  for (const auto& e : j["benchmarks"]) {
    const std::string name = e["name"];
    if (name.rfind("tp_moe/", 0) != 0) continue;
    ++entries;
    EXPECT_EQ(e["moe"]["routing"]["histogram"].get<std::vector<std::int64_t>>(), kRecordedLoads);
    const auto& placement = e["moe_ranks"]["placement"];
    if (name.rfind("tp_moe/tp/", 0) == 0) continue;  // every rank runs every slot
    EXPECT_EQ(placement["rows_per_rank"].get<std::vector<std::int64_t>>(),
              (std::vector<std::int64_t>{28, 4}))
        << name;
    EXPECT_EQ(placement["slowest_rank"], 0) << name;
    EXPECT_EQ(e["moe_ranks"]["predicted"]["slowest_rank"], 0) << name;
  }
  EXPECT_EQ(entries, 4);
  const auto only = fusebench::testing::run_fusebench(args + " --verify-only");
  ASSERT_EQ(only.exit_code, 0) << only.output;
  EXPECT_NE(only.output.find("tp_moe/ep_a2a/rank:1: OK"), std::string::npos) << only.output;
  std::filesystem::remove(report);
  std::filesystem::remove(file);
}

// A flag of the op given without it is refused, naming it.
TEST(TpMoeCli, PlacementFlagsWithoutTheOpAreRefused) {
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --models=qwen3-30b-a3b --ops=moe --tokens=1 --redundant-experts=8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--redundant-experts=8 applies to the tp_moe op only"), std::string::npos)
      << r.output;
  const auto bad = fusebench::testing::run_fusebench(
      "--backend=cpu --models=qwen3-30b-a3b --ops=tp_moe --tokens=1 --expert-placement=striped");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("striped"), std::string::npos) << bad.output;
}

}  // namespace
