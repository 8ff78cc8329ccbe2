// Checkpoint opening as the runner does it (src/runner/checkpoint_weights.hpp), on a tiny Llama
// checkpoint saved by transformers (tests/families/checkpoints/llama): the model from its
// config, the layer's weights checked against the fixtures, and context.weights.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "error_of.hpp"
#include "runner/checkpoint_weights.hpp"
#include "runner/sweep.hpp"

namespace fb = fusebench;
namespace fs = std::filesystem;

namespace {

const std::string kLlama = std::string(FUSEBENCH_FAMILY_CHECKPOINTS) + "/llama";

}  // namespace

TEST(RunnerCheckpoint, OpensTheModelAndLayerFromTheDirectory) {
  const fb::bench::CheckpointModel cm = fb::bench::open_checkpoint_model(kLlama, 1, -1);
  EXPECT_EQ(cm.model.family, "llama");
  EXPECT_EQ(cm.model.hidden, 64);
  EXPECT_EQ(cm.model.heads, 4);
  EXPECT_EQ(cm.model.kv_heads, 2);
  EXPECT_EQ(cm.model.intermediate, 96);
  ASSERT_TRUE(cm.layer);
  EXPECT_EQ(cm.layer->layer(), 1);
  const auto backend = fb::make_cpu_backend();
  // Stored F32: the CPU runs it as it is, exactly.
  EXPECT_EQ(fb::bench::checkpoint_run_dtype(*cm.layer, kLlama, *backend), fb::DType::f32);
  EXPECT_TRUE(fb::bench::conversion_exact(*cm.layer, fb::DType::f32));
  EXPECT_FALSE(fb::bench::conversion_exact(*cm.layer, fb::DType::bf16));
  EXPECT_NE(fb::bench::conversion_text(*cm.layer, fb::DType::bf16).find("rounds"),
            std::string::npos);
}

TEST(RunnerCheckpoint, BadDirectoryAndLayerAreNamed) {
  const std::string missing =
      error_of([] { fb::bench::open_checkpoint_model("/nonexistent/ckpt", -1, -1); });
  EXPECT_NE(missing.find("/nonexistent/ckpt"), std::string::npos) << missing;
  const std::string layer = error_of([] { fb::bench::open_checkpoint_model(kLlama, 7, -1); });
  EXPECT_NE(layer.find('7'), std::string::npos) << layer;
  EXPECT_NE(layer.find("layer"), std::string::npos) << layer;
}

TEST(RunnerCheckpoint, SweepFixturesAreServedAndContextNamesTheSources) {
  fb::bench::Options o;
  o.weights = {kLlama};
  o.ops = {"qkv", "gate_up"};
  o.tokens = {2};
  const auto backend = fb::make_cpu_backend();
  const fb::bench::Sweep sweep = fb::bench::build_sweep(o, *backend);
  ASSERT_FALSE(sweep.fixtures.empty());
  for (const auto& f : sweep.fixtures) {
    EXPECT_NE(f.name().find("/weights:"), std::string::npos) << f.name();
    EXPECT_TRUE(f.checkpoint) << f.name();
  }
  EXPECT_NO_THROW(fb::bench::check_checkpoint_fixtures(sweep.fixtures));
  EXPECT_NO_THROW(fb::bench::check_checkpoint_values(sweep.fixtures));
  const nlohmann::json ctx = fb::bench::weights_context(sweep);
  ASSERT_EQ(ctx.at("checkpoints").size(), 1u);
  const auto& c = ctx["checkpoints"][0];
  EXPECT_EQ(c.at("model_type"), "llama");
  EXPECT_EQ(c.at("layer"), 0);
  EXPECT_EQ(c.at("directory"), "llama");
  const std::string sources = c.at("sources").dump();
  EXPECT_NE(sources.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << sources;
  EXPECT_NE(sources.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << sources;
  EXPECT_TRUE(c.at("conversions").at("fp32").at("exact").get<bool>());
}
