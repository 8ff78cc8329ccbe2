// Row-parallel bias under tensor parallelism: vLLM's RowParallelLinear adds its bias on tp rank 0
// only, before the all-reduce (sequence parallel: before the reduce-scatter, on every chunk of
// overlap); on every rank the result is wrong by (tp - 1) * bias. Every variant follows the rule
// (and passes the TP verifier), and the verifier catches a pipeline that breaks it.
#include <gtest/gtest.h>

#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

// Llama with attention_bias and mlp_bias (q/k/v, o_proj, gate/up and down biases); small enough
// for 2 cores, kv heads 2 < tp 4 so tp 4 also replicates the kv bias.
ModelShape biased() {
  return parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
          "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
          "attention_bias": true, "mlp_bias": true})",
      "biased.json");
}

const char* row_layer(const std::string& op) { return op == "tp_attn" ? "o_proj" : "down_proj"; }

const char* column_layer(const std::string& op) {
  return op == "tp_attn" ? "qkv_proj" : "gate_up_proj";
}

// The GEMMs of a layer: the one step `label`, or overlap's chunks of it (`label`_chunk).
std::vector<GemmStep*> steps_named(Plan& p, const std::string& label) {
  std::vector<GemmStep*> out;
  for (Step& s : p.steps) {
    if (auto* g = std::get_if<GemmStep>(&s);
        g && (g->label == label || g->label == label + "_chunk"))
      out.push_back(g);
  }
  if (out.empty()) throw std::logic_error("no step " + label);
  return out;
}
GemmStep& step_named(Plan& p, const std::string& label) { return *steps_named(p, label).front(); }

// The wrong pipeline: the row-parallel layer's bias (every rank holds it) added on this rank too
// (on every chunk of it).
Plan with_bias_on_every_rank(Plan p) {
  const std::string name = p.op == "tp_attn" ? "b_o" : "b_down";
  for (int b = 0; b < static_cast<int>(p.buffers.size()); ++b) {
    if (p.buffers[static_cast<std::size_t>(b)].name != name) continue;
    for (GemmStep* g : steps_named(p, row_layer(p.op))) g->bias = View{b, 0, 0, p.shard.hidden, 1};
  }
  if (!step_named(p, row_layer(p.op)).has_bias()) throw std::logic_error("no " + name);
  return p;
}

}  // namespace

TEST(TpRowBias, OnlyRankZeroAddsTheRowParallelBias) {
  for (const std::string op : {"tp_attn", "tp_mlp"}) {
    for (const std::string variant : {"paired", "naive", "sp", "overlap"}) {
      ShardShape s = shard(biased(), 4);
      for (int r = 0; r < 4; ++r) {
        s.rank = r;
        // 9 tokens: 3 rows per rank, 3 overlap chunks of one row each.
        Plan p = build_plan(op, variant, s, 9, DType::f32);
        const auto row = steps_named(p, row_layer(op));
        EXPECT_EQ(row.size(), variant == "overlap" ? 3u : 1u) << op << "/" << variant;
        for (const GemmStep* g : row)
          EXPECT_EQ(g->has_bias(), r == 0) << op << "/" << variant << " rank " << r;
        // The column-parallel layer: every rank its own rows of the bias, on every chunk.
        for (const GemmStep* g : steps_named(p, column_layer(op)))
          EXPECT_TRUE(g->has_bias()) << op << "/" << variant << " rank " << r;
      }
    }
  }
}

TEST(TpRowBias, PipelinesWithBiasEqualTheUnshardedPair) {
  for (const std::string op : {"tp_attn", "tp_mlp"}) {
    for (int tp : {1, 2, 4}) {
      // 3 tokens: padded at tp 2 and 4 (sp, overlap), so the padding rows pass the biases too.
      const auto results = verify_tp_op_inprocess(op, shard(biased(), tp), 3, DType::f32, 21, true);
      // naive, paired, sp and overlap, one result per rank each.
      ASSERT_EQ(results.size(), 4u * static_cast<std::size_t>(tp));
      for (const auto& r : results) EXPECT_TRUE(r.ok()) << "tp=" << tp << " " << r.summary();
    }
  }
}

// The check the rule rests on: with the bias on every rank, the all-reduce adds it tp times and
// the verifier must say so on every rank (against float64 and against the unsharded pipeline).
TEST(TpRowBias, VerifierCatchesTheBiasOnEveryRank) {
  for (const std::string op : {"tp_attn", "tp_mlp"}) {
    for (const std::string variant : {"paired", "naive", "sp", "overlap"}) {
      const int tp = 2;
      auto comms = make_inprocess_group(tp, default_comm_timeout());
      std::vector<VerifyResult> results(tp);
      run_ranks(tp, [&](int r) {
        ShardShape s = shard(biased(), tp);
        s.rank = r;
        auto backend = make_cpu_backend();
        const Plan wrong = with_bias_on_every_rank(build_plan(op, variant, s, 3, DType::f32));
        results[static_cast<std::size_t>(r)] =
            verify_tp_plan(*backend, *comms[static_cast<std::size_t>(r)], wrong, 5, true);
      });
      for (const auto& r : results) {
        EXPECT_FALSE(r.ok()) << op << "/" << variant << ": " << r.summary();
        for (const auto& c : r.comparisons) {
          if (c.output == "out") {
            EXPECT_GT(c.mismatches, 0) << c.against << " " << r.summary();
          }
        }
      }
    }
  }
}
