#include "checkpoint_weights.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "fusebench/checkpoint.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"

namespace fusebench::bench {
namespace fs = std::filesystem;
namespace {

std::string dtype_list(const std::set<TensorDtype>& dtypes) {
  std::string out;
  for (TensorDtype d : dtypes) out += (out.empty() ? "" : ", ") + std::string(to_string(d));
  return out;
}

// Every weight part of a fixture's plan as the plan asks for it.
template <class F>
void for_each_weight_part(const Fixture& f, F&& body) {
  const Plan plan = f.plan();
  for (const auto& b : plan.buffers) {
    if (b.role != BufferRole::weight) continue;
    for (std::size_t p = 0; p < b.parts.size(); ++p) {
      const BufferSpec::Window whole{b.part_rows[p], b.cols, 0, 0};
      const auto& w = p < b.part_windows.size() ? b.part_windows[p] : whole;
      body(WindowRequest{b.parts[p], b.role, w.logical_rows, w.logical_cols, w.row0, w.col0,
                         b.part_rows[p], b.cols, plan.dtype});
    }
  }
}

}  // namespace

CheckpointModel open_checkpoint_model(const std::string& dir, int layer, std::int64_t expert,
                                      bool all_experts) {
  try {
    const std::string config = (fs::path(dir) / "config.json").string();
    if (const auto what = not_a_regular_file(config); what == "does not exist") {
      throw std::invalid_argument(dir +
                                  " has no config.json (a Hugging Face model directory holds one "
                                  "beside its *.safetensors; the model's shape comes from it)");
    } else if (!what.empty()) {
      throw std::invalid_argument(config + " " + what +
                                  "; expected a regular file (the model's config.json)");
    }
    CheckpointModel out;
    out.model = load_hf_config(config);
    const LayerFamily& table_family = find_layer_family(out.model.family);
    if (expert >= 0 && out.model.experts == 0) {
      throw std::invalid_argument("--expert=" + std::to_string(expert) + ": " + config +
                                  " describes no routed experts (model_type '" + out.model.family +
                                  "')");
    }
    const auto checkpoint = std::make_shared<const Checkpoint>(dir);
    // config.json's quantization_config: the codes and scales the weights are stored as.
    const auto quant = read_checkpoint_quant_file(config);
    const LayerFamily family = with_stacked_experts(table_family, *checkpoint, std::max(layer, 0));
    auto weights =
        std::make_shared<HfLayerWeights>(checkpoint, family, out.model, std::max(layer, 0),
                                         std::max<std::int64_t>(expert, 0), quant);
    if (all_experts && weights->serves(LayerKind::expert)) {
      for (std::int64_t e = 0; e < out.model.experts; ++e)
        weights->add_expert(
            HfLayerWeights(checkpoint, family, out.model, std::max(layer, 0), e, quant));
    }
    out.layer = std::move(weights);
    return out;
  } catch (const CheckpointError& e) {
    throw CheckpointError(std::string("--weights: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--weights: ") + e.what());
  }
}

DType checkpoint_run_dtype(const HfLayerWeights& layer, const std::string& dir,
                           const Backend& backend, const std::string& dtype_flag) {
  if (const auto& q = layer.quant()) {
    throw std::invalid_argument("--weights: " + dir + " is a quantized checkpoint (" + q->read_as +
                                "): it runs only at its own spec, fusebench " + dtype_flag + "=" +
                                q->spec.name() + " (docs/checkpoints.md)");
  }
  const std::set<TensorDtype> stored = layer.stored_dtypes();
  if (stored.size() != 1) {
    throw std::invalid_argument("--weights: " + dir + " layer " + std::to_string(layer.layer()) +
                                " is stored in several dtypes (" + dtype_list(stored) +
                                "), so it has no dtype of its own to run in: pick one with " +
                                dtype_flag + " (fp32 holds BF16 and F16 values exactly)");
  }
  const TensorDtype own = *stored.begin();
  const auto run = exact_run_dtype(own);
  if (!run) {
    throw std::invalid_argument("--weights: " + dir + " is stored in " +
                                std::string(to_string(own)) + ": " + unrunnable_reason(own));
  }
  if (const auto why = backend.unsupported_reason(*run); !why.empty()) {
    throw std::invalid_argument(
        "--weights: " + dir + " is stored in " + std::string(to_string(own)) + ", which the " +
        backend.name() + " backend cannot run (" + why + "): give " + dtype_flag +
        "=fp32 to run it converted exactly (every " + std::string(to_string(own)) +
        " value is an fp32 value)" +
        (*run == DType::f16
             ? ", or " + dtype_flag + "=bf16 (rounds each value to bf16's 8-bit mantissa)"
             : ""));
  }
  return *run;
}

bool conversion_exact(const HfLayerWeights& layer, DType run) {
  const auto stored = layer.stored_dtypes();
  return std::all_of(stored.begin(), stored.end(),
                     [&](TensorDtype d) { return converts_exactly(d, run); });
}

std::string conversion_text(const HfLayerWeights& layer, DType run) {
  std::string exact, rounds;
  for (TensorDtype d : layer.stored_dtypes()) {
    const std::string pair = std::string(to_string(d)) + " -> " + std::string(to_string(run));
    std::string& list = converts_exactly(d, run) ? exact : rounds;
    list += (list.empty() ? "" : ", ") + pair;
  }
  if (rounds.empty()) return "exact (" + exact + ")";
  return "rounds (" + rounds +
         ": each value to the nearest even of the run dtype; a value beyond its range is "
         "refused)" +
         (exact.empty() ? "" : "; exact: " + exact);
}

void check_checkpoint_fixtures(const std::vector<Fixture>& fixtures) {
  std::set<std::tuple<const HfLayerWeights*, std::string, std::int64_t, std::int64_t>> done;
  for (const auto& f : fixtures) {
    if (!f.checkpoint) continue;
    const HfLayerWeights& layer = *f.checkpoint;
    for_each_weight_part(f, [&](WindowRequest r) {
      if (!done.insert({&layer, r.name, r.logical_rows, r.logical_cols}).second) return;
      if (!layer.has(r.name)) {
        throw std::invalid_argument("--weights: " + f.name() + " needs the weight " + r.name +
                                    ", which " + layer.describe() + " does not provide");
      }
      r.rows = r.cols = 0;  // the shape and the mapping are checked; no data is read
      try {
        layer.window(r);
      } catch (const CheckpointError& e) {
        throw CheckpointError("--weights: " + f.name() + ": " + e.what());
      }
    });
  }
}

void check_checkpoint_values(const std::vector<Fixture>& fixtures) {
  std::set<std::tuple<const HfLayerWeights*, std::string, DType>> done;
  for (const auto& f : fixtures) {
    if (!f.checkpoint) continue;
    const HfLayerWeights& layer = *f.checkpoint;
    for_each_weight_part(f, [&](WindowRequest r) {
      // Every value is read once: reading refuses NaN and Inf (any dtype) and values the run
      // dtype cannot hold (conversion_may_overflow), before anything runs.
      const DType key = conversion_may_overflow(layer.stored_dtype_of(r.name), r.dtype)
                            ? r.dtype
                            : DType::f32;  // finiteness alone does not depend on the run dtype
      if (!done.insert({&layer, r.name, key}).second) return;
      // The whole logical tensor (every rank's window is a part of it), a block of rows at a time.
      const std::int64_t block =
          std::max<std::int64_t>(1, (std::int64_t{1} << 22) / r.logical_cols);
      r.col0 = 0;
      r.cols = r.logical_cols;
      for (std::int64_t row = 0; row < r.logical_rows; row += block) {
        r.row0 = row;
        r.rows = std::min(block, r.logical_rows - row);
        try {
          layer.window(r);
        } catch (const CheckpointError& e) {
          throw CheckpointError("--weights: " + std::string(e.what()));
        }
      }
    });
  }
}

nlohmann::json weights_context(const Sweep& sweep) {
  nlohmann::json out = {
      {"random",
       "weights:random entries: every weight and bias uniform in [-1, 1) scaled by "
       "1/sqrt(in_features), from the generator seeded by context.seed"},
      {"checkpoints", nlohmann::json::array()}};
  for (std::size_t i = 0; i < sweep.models.size(); ++i) {
    const auto& layer = i < sweep.checkpoints.size() ? sweep.checkpoints[i] : nullptr;
    if (!layer) continue;
    const ModelShape& m = sweep.models[i];
    const Checkpoint& c = layer->checkpoint();
    nlohmann::json j = {
        {"model", m.name},
        {"directory", fs::path(c.dir()).lexically_normal().filename().string()},
        {"path", sweep.checkpoint_dirs[i]},
        {"layer", layer->layer()},
        {"fingerprint", c.fingerprint()},
        {"fingerprint_of",
         "FNV-1a 64 of the index and every file's name and header (an identity, not a security "
         "hash)"},
        {"model_type", m.family},
        {"mapping", layer->family()},
        {"files", c.files().size()},
        {"index",
         c.index_path().empty() ? nlohmann::json(nullptr) : nlohmann::json(c.index_path())},
        {"sources", layer->sources()},
        {"inputs", "random: the activations x come from the generator seeded by context.seed"},
        {"read",
         "memory-mapped; only the windows of this layer's tensors that each fixture holds are "
         "read"}};
    if (m.experts > 0) j["expert"] = layer->expert();
    if (!layer->all_experts().empty()) {
      // The moe op: every routed expert (w_expert{e}_* in sources), and the router that routed
      // its tokens (--routing=router; null: another source routed them).
      j["experts"] = layer->all_experts();
      j["router"] = nullptr;
      for (const auto& f : sweep.fixtures) {
        if (f.checkpoint == layer && f.shard.moe && f.shard.moe->router)
          j["router"] = f.shard.moe->router->name;
      }
      // qwen2_moe's gated shared expert: the Linear(hidden, 1) whose sigmoid scales it.
      const auto sources = layer->sources();
      if (const auto gate = sources.find("w_shared_expert_sigmoid_gate"); gate != sources.end())
        j["shared_expert_gate"] = gate->second;
    }
    nlohmann::json stored = nlohmann::json::array();
    for (TensorDtype d : layer->stored_dtypes()) stored.push_back(to_string(d));
    j["stored_dtypes"] = stored;
    if (const auto& q = layer->quant()) {
      j["quantization"] = {
          {"quant_method", q->method},
          {"read_as", q->read_as},
          {"spec", q->spec.name()},
          {"stored", to_string(q->stored)},
          {"scales", layer->scale_sources()},
          {"unquantized",
           "the stored codes times their scales (dequantized), rounded to the run's bf16: what "
           "quant_error compares against"},
          {"fusion",
           "split: each shard its stored scales; fused: per-tensor shards requantized to the "
           "largest scale (vLLM's requantize_with_max_scale), fused_channelwise: the shard scales "
           "one per row, per-channel and block scales stacked along N"}};
      if (q->spec.scheme == ActScheme::static_scale)
        j["quantization"]["input_scale"] =
            "the largest stored input_scale of the weights each plan quantizes (vLLM's fused "
            "layers take the max of their shards')";
    }
    std::set<DType> run;
    for (const auto& f : sweep.fixtures) {
      if (f.checkpoint == layer) run.insert(f.dtype);
    }
    for (DType d : run) {
      j["conversions"][std::string(to_string(d))] =
          layer->quant()
              ? nlohmann::json{{"exact", false},
                               {"how",
                                "the quantized GEMMs use the stored codes and scales as they are; "
                                "the unquantized weights (quant_error's reference) are code * "
                                "scale rounded to " +
                                    std::string(to_string(d))}}
              : nlohmann::json{{"exact", conversion_exact(*layer, d)},
                               {"how", conversion_text(*layer, d)}};
    }
    j["left_out"] = nlohmann::json::array();
    for (const auto& r : sweep.refused) {
      if (r.model == m.name && r.op.find(" layer:") != std::string::npos)
        j["left_out"].push_back({{"op", r.op}, {"reason", r.reason}});
    }
    out["checkpoints"].push_back(std::move(j));
  }
  return out;
}

}  // namespace fusebench::bench
