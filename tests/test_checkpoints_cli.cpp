// --weights=DIR end to end through the binaries on the CPU backend (docs/checkpoints.md), on the
// checkpoints tests/checkpoints/make_checkpoints.py writes (the ctest fixture runs it first):
// dense, biased, Phi-3-fused, sharded, MoE and MLA checkpoints verify on their own weights and
// say so in names and context; a NaN in one layer shows the run reads the layer --layer
// picks; every hostile checkpoint exits 2 naming file and tensor, leaving the report untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "cli_run.hpp"
#include "fusebench/checkpoint.hpp"

namespace {

namespace fs = std::filesystem;
using fusebench::testing::CliResult;

const fs::path kDir = FUSEBENCH_CHECKPOINTS_DIR;

std::string dir(const std::string& name) { return (kDir / name).string(); }

CliResult run(const std::string& args) {
  return fusebench::testing::run_fusebench("--backend=cpu --timing-max-time=0.02 " + args);
}

fs::path temp_path(const std::string& name) {
  return fusebench::testing::temp_path("fusebench_checkpoints_cli", name);
}

const nlohmann::json& manifest() {
  static const nlohmann::json m = [] {
    std::ifstream in(kDir / "expected.json");
    if (!in) {
      ADD_FAILURE() << (kDir / "expected.json")
                    << " is missing: the make_checkpoints ctest fixture writes it";
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(in);
  }();
  return m;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs with --verify and a report; checks what every checkpoint run must show and returns the
// report: exit 0, verification passed on checkpoint weights, every entry named and labelled
// weights:checkpoint with its conversion, one context.weights.checkpoints entry for `name`
// carrying the library's own fingerprint of the directory.
nlohmann::json verified_checkpoint_run(const std::string& name, const std::string& args,
                                       int layer) {
  const auto path = temp_path(name + ".json");
  const CliResult r =
      run("--weights=" + dir(name) + " " + args + " --verify --report=" + path.string());
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("fusebench: verification passed"), std::string::npos) << r.output;
  if (r.exit_code != 0) return nlohmann::json::object();
  const auto report = fusebench::testing::load_json(path);
  fs::remove(path);

  const auto& verification = report.at("context").at("verification");
  EXPECT_FALSE(verification.empty());
  for (const auto& v : verification) {
    EXPECT_TRUE(v.at("ok").get<bool>()) << v;
    EXPECT_EQ(v.at("weights"), "checkpoint") << v;
  }
  EXPECT_FALSE(report.at("benchmarks").empty());
  for (const auto& b : report.at("benchmarks")) {
    const auto entry = b.at("name").get<std::string>();
    EXPECT_NE(entry.find("/model:" + name + "/"), std::string::npos) << entry;
    EXPECT_NE(entry.find("/weights:checkpoint/"), std::string::npos) << entry;
    EXPECT_EQ(b.at("weights"), "checkpoint") << entry;
    EXPECT_EQ(b.at("weights_conversion_exact"), true) << entry;
    EXPECT_EQ(b.at("weights_conversion").get<std::string>().rfind("exact (", 0), 0u) << entry;
  }
  const auto& models = report.at("context").at("models");
  EXPECT_EQ(models.size(), 1u);
  if (!models.empty()) {
    EXPECT_EQ(models[0].at("weights"), "checkpoint");
  }
  const auto& checkpoints = report.at("context").at("weights").at("checkpoints");
  EXPECT_EQ(checkpoints.size(), 1u);
  if (checkpoints.size() != 1) return report;
  const auto& c = checkpoints[0];
  EXPECT_EQ(c.at("model"), name);
  EXPECT_EQ(c.at("directory"), name);
  EXPECT_EQ(c.at("path"), dir(name));
  EXPECT_EQ(c.at("layer"), layer);
  EXPECT_EQ(c.at("fingerprint"), fusebench::Checkpoint(dir(name)).fingerprint());
  EXPECT_FALSE(c.at("sources").empty());
  return report;
}

const nlohmann::json& checkpoint_context(const nlohmann::json& report) {
  return report.at("context").at("weights").at("checkpoints").at(0);
}

std::set<std::string> layer_segments(const nlohmann::json& report) {
  std::set<std::string> out;
  for (const auto& b : report.at("benchmarks")) {
    const auto name = b.at("name").get<std::string>();
    const auto at = name.find("/layer:");
    out.insert(name.substr(at + 7, name.find('/', at + 7) - at - 7));
  }
  return out;
}

}  // namespace

// The issue's own command: a Qwen3-like GQA checkpoint (q_size != hidden), stored bf16, runs in
// bf16 (its own dtype) and verifies fused == split == float64 at tokens 1 and 16.
TEST(CheckpointsCli, DenseCheckpointVerifiesOnItsOwnWeightsInItsOwnDtype) {
  const auto report = verified_checkpoint_run("qwen3_gqa", "--tokens=1,16", 0);
  if (report.empty()) return;
  std::set<std::string> dtypes, tokens;
  for (const auto& b : report.at("benchmarks")) {
    dtypes.insert(b.at("dtype").get<std::string>());
    tokens.insert(std::to_string(b.at("tokens").get<int>()));
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"bf16"}));
  EXPECT_EQ(tokens, (std::set<std::string>{"1", "16"}));
  EXPECT_EQ(layer_segments(report), (std::set<std::string>{"attention", "dense"}));
  const auto& c = checkpoint_context(report);
  EXPECT_EQ(c.at("model_type"), "qwen3");
  EXPECT_EQ(c.at("mapping"), "qwen3");  // Qwen3: o_proj without bias
  EXPECT_EQ(c.at("stored_dtypes"), nlohmann::json::array({"BF16"}));
  EXPECT_EQ(c.at("conversions").at("bf16").at("exact"), true);
  EXPECT_EQ(c.at("index"), nullptr);
  EXPECT_EQ(c.at("sources").at("w_q"), "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(c.at("sources").at("w_down"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_FALSE(c.at("sources").contains("b_q"));
}

// Phi-3's fused qkv_proj/gate_up_proj split by output sizes; a checkpoint sharded over two files
// with an index, its layer 1 spanning both.
TEST(CheckpointsCli, FusedAndShardedCheckpointsVerify) {
  const auto phi3 = verified_checkpoint_run("phi3_fused", "--tokens=3", 0);
  if (!phi3.empty()) {
    // q_size 4 heads x 16 = 64 rows, then k's 2 KV heads x 16: vLLM's shard offsets.
    EXPECT_EQ(checkpoint_context(phi3).at("sources").at("w_k"),
              "model.layers.0.self_attn.qkv_proj.weight rows [64, 96)");
    EXPECT_EQ(checkpoint_context(phi3).at("sources").at("w_up"),
              "model.layers.0.mlp.gate_up_proj.weight rows [80, 160)");
  }
  const auto sharded = verified_checkpoint_run("llama_sharded", "--layer=1 --tokens=3", 1);
  if (!sharded.empty()) {
    const auto& c = checkpoint_context(sharded);
    EXPECT_EQ(c.at("files"), 2);
    EXPECT_EQ(c.at("index"), dir("llama_sharded") + "/model.safetensors.index.json");
    EXPECT_EQ(c.at("sources").at("w_up"), "model.layers.1.mlp.up_proj.weight");
  }
}

// Qwen2's q/k/v bias comes from the checkpoint; its F16 cannot run on the CPU, which says which
// --dtypes would, and fp32 holds every F16 value exactly.
TEST(CheckpointsCli, BiasedFp16CheckpointNeedsFp32OnTheCpuAndVerifiesWithItsBias) {
  const CliResult own = run("--weights=" + dir("qwen2_bias") + " --tokens=1");
  EXPECT_EQ(own.exit_code, 2) << own.output;
  EXPECT_NE(own.output.find("stored in F16"), std::string::npos) << own.output;
  EXPECT_NE(own.output.find("--dtypes=fp32"), std::string::npos) << own.output;

  const auto report = verified_checkpoint_run("qwen2_bias", "--tokens=1,5 --dtypes=fp32", 0);
  if (report.empty()) return;
  const auto& c = checkpoint_context(report);
  EXPECT_EQ(c.at("sources").at("b_q"), "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(c.at("sources").at("b_v"), "model.layers.0.self_attn.v_proj.bias");
  EXPECT_EQ(c.at("conversions").at("fp32").at("how"), "exact (F16 -> fp32)");
  bool bias_kernel = false;
  for (const auto& b : report.at("benchmarks")) {
    if (b.at("name").get<std::string>().rfind("qkv/fused_bias_kernel/", 0) == 0) bias_kernel = true;
  }
  EXPECT_TRUE(bias_kernel) << "a biased checkpoint runs the separate bias-add variant too";
}

// --layer picks the decoder layer, --expert the routed expert: names say layer:expert, the
// context names the expert and the tensors (vLLM's mlp.experts.E / Mixtral's w1/w3/w2), and the
// dense MLP a MoE layer lacks is left out with the reason.
TEST(CheckpointsCli, MoeLayerAndExpertPickTheExpertsTensors) {
  const auto qwen = verified_checkpoint_run("qwen3_moe", "--layer=1 --expert=2 --tokens=2", 1);
  if (!qwen.empty()) {
    EXPECT_EQ(layer_segments(qwen), (std::set<std::string>{"attention", "expert"}));
    const auto& c = checkpoint_context(qwen);
    EXPECT_EQ(c.at("expert"), 2);
    EXPECT_EQ(c.at("sources").at("w_expert_gate"), "model.layers.1.mlp.experts.2.gate_proj.weight");
    EXPECT_EQ(c.at("sources").at("w_expert_down"), "model.layers.1.mlp.experts.2.down_proj.weight");
    ASSERT_EQ(c.at("left_out").size(), 1u) << c;
    EXPECT_NE(c.at("left_out")[0].at("reason").get<std::string>().find("holds no dense MLP"),
              std::string::npos);
  }
  // Layer 0 of the same checkpoint is dense (mlp_only_layers).
  const auto dense = verified_checkpoint_run("qwen3_moe", "--tokens=2", 0);
  if (!dense.empty()) {
    EXPECT_EQ(layer_segments(dense), (std::set<std::string>{"attention", "dense"}));
    EXPECT_EQ(checkpoint_context(dense).at("sources").at("w_gate"),
              "model.layers.0.mlp.gate_proj.weight");
  }
  const auto mixtral = verified_checkpoint_run("mixtral_moe", "--expert=1 --tokens=2", 0);
  if (!mixtral.empty()) {
    EXPECT_EQ(checkpoint_context(mixtral).at("sources").at("w_expert_gate"),
              "model.layers.0.block_sparse_moe.experts.1.w1.weight");
    EXPECT_EQ(checkpoint_context(mixtral).at("sources").at("w_expert_up"),
              "model.layers.0.block_sparse_moe.experts.1.w3.weight");
  }
  // Qwen2-MoE: an expert and the shared expert, with q/k/v bias, stored fp32.
  const auto shared = verified_checkpoint_run("qwen2_moe_shared", "--expert=3 --tokens=2", 0);
  if (!shared.empty()) {
    EXPECT_EQ(layer_segments(shared),
              (std::set<std::string>{"attention", "expert", "shared_expert"}));
    EXPECT_EQ(checkpoint_context(shared).at("sources").at("w_shared_expert_up"),
              "model.layers.0.mlp.shared_expert.up_proj.weight");
    EXPECT_EQ(checkpoint_context(shared).at("sources").at("b_k"),
              "model.layers.0.self_attn.k_proj.bias");
  }
}

// qwen2_moe's moe block on its own weights: every expert, the router, the shared expert and the
// shared_expert_gate that scales it (named in context.weights), every variant verified.
TEST(CheckpointsCli, QwenTwoMoeBlockVerifiesWithItsSharedExpertGate) {
  const auto report = verified_checkpoint_run("qwen2_moe_shared", "--ops=moe --tokens=1,5", 0);
  if (report.empty()) return;
  std::set<std::string> variants;
  for (const auto& b : report.at("benchmarks")) {
    const auto name = b.at("name").get<std::string>();
    variants.insert(name.substr(0, name.find('/', 4)));
  }
  EXPECT_EQ(variants, (std::set<std::string>{"moe/per_expert", "moe/per_expert_split",
                                             "moe/grouped", "moe/padded"}));
  const auto& c = checkpoint_context(report);
  EXPECT_EQ(c.at("shared_expert_gate"), "model.layers.0.mlp.shared_expert_gate.weight");
  EXPECT_EQ(c.at("sources").at("w_shared_expert_sigmoid_gate"),
            "model.layers.0.mlp.shared_expert_gate.weight");
  EXPECT_NE(c.at("router").get<std::string>().find("model.layers.0.mlp.gate.weight"),
            std::string::npos)
      << c.at("router");
}

// DeepSeek-V3's MLA: q_a_proj and kv_a_proj_with_mqa merged (layer:mla), routed and shared
// experts on an MoE layer.
TEST(CheckpointsCli, MlaCheckpointVerifiesTheFusedQkvAOnItsWeights) {
  const auto report = verified_checkpoint_run("deepseek_mla", "--layer=1 --expert=1 --tokens=2", 1);
  if (report.empty()) return;
  EXPECT_EQ(layer_segments(report), (std::set<std::string>{"mla", "expert", "shared_expert"}));
  const auto& c = checkpoint_context(report);
  EXPECT_EQ(c.at("sources").at("w_q_a"), "model.layers.1.self_attn.q_a_proj.weight");
  EXPECT_EQ(c.at("sources").at("w_kv_a"), "model.layers.1.self_attn.kv_a_proj_with_mqa.weight");
  EXPECT_EQ(c.at("sources").at("w_shared_expert_gate"),
            "model.layers.1.mlp.shared_experts.gate_proj.weight");
}

// The TP pipelines on the checkpoint: each rank's window of the real weights, tp 2 and tp 4
// (4 > the 2 KV heads: replicated), verified against the unsharded layer.
TEST(CheckpointsCli, TpRanksVerifyOnTheCheckpointWithReplicatedKvHeads) {
  const auto report =
      verified_checkpoint_run("qwen3_gqa", "--ops=tp_attn,tp_mlp --tp=2,4 --tokens=3", 0);
  if (report.empty()) return;
  std::set<int> tps;
  std::set<std::string> variants;
  for (const auto& v : report.at("context").at("verification")) {
    tps.insert(v.at("tp").get<int>());
    const auto variant = v.at("variant").get<std::string>();  // e.g. "sp/rank:1"
    variants.insert(v.at("op").get<std::string>() + "/" + variant.substr(0, variant.find('/')));
  }
  EXPECT_EQ(tps, (std::set<int>{2, 4}));
  // Every pipeline, sequence-parallel and overlapped ones included (issue 13), reads its rank's
  // windows of the checkpoint.
  for (const std::string v : {"naive", "paired", "sp", "overlap"}) {
    EXPECT_EQ(variants.count("tp_attn/" + v), 1u) << v;
    EXPECT_EQ(variants.count("tp_mlp/" + v), 1u) << v;
  }
}

// A NaN in layer 1's k_proj: layer 0 verifies, layer 1 is refused at load naming layer 1's k_proj
// and the NaN's index, so the runs read the checkpoint layer --layer picks (random weights would
// pass both). The report is not touched.
TEST(CheckpointsCli, TheRunComputesOnTheLayerLayerPicks) {
  const auto& nan = manifest().at("cli_nan");
  const std::string weights = "--weights=" + dir(nan.at("path").get<std::string>());
  const CliResult clean = run(weights + " --layer=0 --verify --tokens=2");
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find("verification passed"), std::string::npos) << clean.output;

  const auto path = temp_path("nan.json");
  fs::remove(path);
  const CliResult poisoned =
      run(weights + " --layer=1 --verify --tokens=2 --report=" + path.string());
  EXPECT_EQ(poisoned.exit_code, 2) << poisoned.output;
  EXPECT_NE(poisoned.output.find("tensor '" + nan.at("tensor").get<std::string>() + "'"),
            std::string::npos)
      << poisoned.output;
  // values[2, 3] of a [kv * head_dim, hidden] = [8, 16] k_proj: element 2 * 16 + 3.
  EXPECT_NE(poisoned.output.find("value nan at element 35 (index [2, 3] of shape [8, 16]) is not "
                                 "finite"),
            std::string::npos)
      << poisoned.output;
  EXPECT_EQ(poisoned.output.find("verification"), std::string::npos) << poisoned.output;
  EXPECT_FALSE(fs::exists(path));
}

// Random presets and a checkpoint in one sweep: each entry says which weights it ran on.
TEST(CheckpointsCli, RandomAndCheckpointEntriesSayWhichWeights) {
  const CliResult r =
      run("--models=qwen3-0.6b --weights=" + dir("qwen3_gqa") + " --ops=qkv --tokens=1 --list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("qkv/fused/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:fp32/"
                          "weights:random/timing:eager"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("qkv/fused/model:qwen3_gqa/layer:attention/tokens:1/tp:1/dtype:bf16/"
                          "weights:checkpoint/timing:eager"),
            std::string::npos)
      << r.output;
}

// Every hostile checkpoint (the reader's hostile files as model directories, and checkpoints
// whose tensors contradict their config.json) exits 2 before anything is measured, naming the
// file and the tensor or field; a report already at --report is left as it was, and none is
// created.
TEST(CheckpointsCli, HostileCheckpointsExitTwoNamingFileAndTensorAndWriteNoReport) {
  const auto& cases = manifest().at("cli");
  ASSERT_GE(cases.size(), 25u);
  const auto existing = temp_path("existing.json");
  const std::string before = "{\"kept\": true}\n";
  const auto fresh = temp_path("fresh.json");
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    std::string args = "--weights=" + dir(c.at("path").get<std::string>()) + " --tokens=1";
    for (const auto& a : c.at("args")) {
      args += ' ';
      args += a.get<std::string>();
    }
    for (const auto& report : {existing, fresh}) {
      if (report == existing) std::ofstream(existing) << before;
      fs::remove(fresh);
      const CliResult r = run(args + " --verify --report=" + report.string());
      EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.output;
      EXPECT_NE(r.output.find("fusebench: error: --weights: "), std::string::npos) << name << "\n"
                                                                                   << r.output;
      for (const auto& want : c.at("expect"))
        EXPECT_NE(r.output.find(want.get<std::string>()), std::string::npos)
            << name << ": wants " << want << "\n"
            << r.output;
      EXPECT_EQ(r.output.find("Benchmark "), std::string::npos) << name << ": measured\n"
                                                                << r.output;
      EXPECT_EQ(read_file(existing), before) << name;
      EXPECT_FALSE(fs::exists(fresh)) << name;
    }
  }
  fs::remove(existing);
}

// Flags that need a checkpoint, and values outside it.
TEST(CheckpointsCli, LayerAndExpertOutsideTheCheckpointExitTwo) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {
           Case{"--layer=1", "give the checkpoint too, with --weights=DIR"},
           Case{"--expert=1", "it needs --weights=DIR, the Hugging Face directory of an MoE"},
           Case{"--weights=" + dir("qwen3_gqa") + " --layer=-1", "--layer: '-1' is invalid"},
           Case{"--weights=" + dir("qwen3_gqa") + " --layer=2", "layer 2"},
           Case{"--weights=" + dir("qwen3_gqa") + " --expert=1", "describes no routed experts"},
           Case{"--weights=" + dir("qwen3_moe") + " --layer=1 --expert=4", "expert 4 is outside"},
           Case{"--weights=" + dir("no_such_checkpoint"), "does not exist"},
           Case{"--weights=" + dir("expected.json"), "is not a directory"},
           Case{"--weights=" + dir("hostile"), "has no config.json"},
       }) {
    const CliResult r = run(c.args + " --tokens=1");
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

// fusebench-region runs one op on the checkpoint's layer (--weights-layer, --expert), and refuses
// a hostile checkpoint as fusebench does.
TEST(CheckpointsCli, RegionRunsOnTheCheckpointLayer) {
  const auto region = [](const std::string& args) {
    return fusebench::testing::run_command(std::string(FUSEBENCH_BIN_DIR) +
                                           "/fusebench-region --backend=cpu " + args + " 2>&1");
  };
  const auto shared = region("--weights=" + dir("deepseek_mla") +
                             " --weights-layer=1 --expert=1 --op=gate_up --layer=shared_expert "
                             "--tokens=2");
  EXPECT_EQ(shared.exit_code, 0) << shared.output;
  EXPECT_NE(shared.output.find("region gate_up/fused/model:deepseek_mla/layer:shared_expert/"
                               "tokens:2/tp:1/dtype:bf16/weights:checkpoint"),
            std::string::npos)
      << shared.output;
  const auto tp = region("--weights=" + dir("qwen3_gqa") + " --op=tp_attn --tp=4 --tokens=2");
  EXPECT_EQ(tp.exit_code, 0) << tp.output;
  EXPECT_NE(tp.output.find("/weights:checkpoint/comm:inprocess"), std::string::npos) << tp.output;
  const auto bad = region("--weights=" + dir("hostile/missing_tensor") + " --op=qkv --tokens=2");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("'model.layers.0.self_attn.v_proj.weight'"), std::string::npos)
      << bad.output;
}
