// fusebench-region: runs one fixture's region (after one warm-up run) and exits, for external
// profilers (ncu, nsys) to measure exactly what fusebench measures, without Google Benchmark's
// loop. The fixture is built as fusebench builds it (build_sweep), TP ops with the communicator
// fusebench's --comm would give them (comm/tp_run.hpp), so their ranks and collectives run too.
//   ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum
//       build/bin/fusebench-region --op=qkv --variant=fused --model=llama3-8b --tokens=128
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/flag_checks.hpp"
#include "comm/tp_run.hpp"
#include "fusebench/backend.hpp"
#include "fusebench/communicator.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/nvtx.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/shapes.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"
#include "runner/sweep.hpp"

using namespace fusebench;

namespace {

// --variant's default: the variant a profile is usually wanted of (the fused or paired one).
std::string default_variant(const std::string& op) {
  const auto& variants = find_op(op).variants;
  for (const char* v : {"fused", "paired"}) {
    if (std::find(variants.begin(), variants.end(), v) != variants.end()) return v;
  }
  return variants.front();
}

std::string variant_help() {
  std::string text =
      "variant (default: fused for qkv/gate_up, paired for tp_attn/tp_mlp, the only one "
      "of a collective):";
  for (const auto& op : op_registry()) {
    text += " " + op.name + ":";
    for (std::size_t i = 0; i < op.variants.size(); ++i) text += (i ? "," : "") + op.variants[i];
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fusebench-region: run one fusebench region (one warm-up run, then --iterations measured "
      "runs, each inside the NVTX range fusebench@region) for ncu/nsys cross-checks"};
  std::string op = op_registry().front().name, variant, model_name = "qwen3-0.6b", config, layer,
              dtype_name = "bf16", backend_name = "auto", comm = "auto",
              link_profile = "nvlink-h200";
  std::int64_t tokens = 1;
  int tp = 1, iterations = 1;
  bool flush = true;
  std::uint64_t seed = 1;
  std::string ops;
  for (const auto& o : op_registry()) ops += (ops.empty() ? "" : ", ") + o.name;
  app.add_option("--op", op, "op: " + ops)
      ->capture_default_str()
      ->check(bench::checked_by([](const std::string& name) { find_op(name); }));
  app.add_option("--variant", variant, variant_help());
  std::string presets;  // from the preset table, so the help cannot leave one out
  for (const auto& m : model_presets()) presets += (presets.empty() ? "" : ", ") + m.name;
  app.add_option("--model", model_name, "model preset: " + presets)
      ->capture_default_str()
      ->check(bench::checked_by([](const std::string& name) { find_model(name); }));
  app.add_option("--model-config", config, "HF config.json instead of --model");
  std::string weights;
  int weights_layer = -1;
  std::int64_t expert = -1;
  app.add_option("--weights", weights,
                 "Hugging Face model directory instead of --model: its config.json and the real "
                 "weights of one decoder layer, as fusebench --weights");
  app.add_option("--weights-layer", weights_layer,
                 "decoder layer of --weights (fusebench's --layer; default 0)")
      ->check(bench::whole_number<int>("a decoder layer index >= 0", 0));
  app.add_option("--expert", expert, "routed expert of an MoE --weights layer (default 0)")
      ->check(bench::whole_number<std::int64_t>("a routed expert index >= 0", 0));
  app.add_option("--layer", layer,
                 "the op's layer (the name's layer: segment): attention|mla for qkv/tp_attn, "
                 "dense|expert|shared_expert for gate_up/tp_mlp (default: the model's first, as "
                 "fusebench --list orders them)");
  app.add_option("--tokens", tokens, "token count M")
      ->capture_default_str()
      ->check(bench::whole_number<std::int64_t>("a token count, a whole number >= 1", 1));
  app.add_option("--tp", tp,
                 "tensor-parallel size: qkv/gate_up run one rank's shard; tp_attn/tp_mlp and the "
                 "collective ops (tp >= 2) run every rank")
      ->capture_default_str()
      ->check(bench::whole_number<int>("a tensor-parallel size, a whole number >= 1", 1));
  // One dtype (fusebench's --dtypes takes a list): the messages of the sweep name this flag.
  auto* dtype_option = app.add_option(
      "--dtype", dtype_name, "bf16, fp16 (GPU), fp32 (--weights: default the checkpoint's own)");
  dtype_option->capture_default_str()->check(
      bench::checked_by([](const std::string& name) { parse_dtype(name); }));
  app.add_option("--backend", backend_name, "auto | cuda | cpu")->capture_default_str();
  app.add_option(
         "--comm", comm,
         "TP collectives, as fusebench --comm: auto (CPU: inprocess; GPU: nccl when tp GPUs, "
         "else modelled) | nccl | modelled | inprocess (not under mpirun)")
      ->capture_default_str();
  app.add_option("--link-profile", link_profile,
                 "link model of --comm=modelled (fusebench --help lists them)")
      ->capture_default_str();
  app.add_option("--iterations", iterations, "measured runs after one warm-up run")
      ->capture_default_str()
      ->check(bench::whole_number<int>("measured runs, a whole number >= 1", 1));
  app.add_option("--flush-l2", flush, "flush L2 before each measured run")->capture_default_str();
  app.add_option("--seed", seed, "inputs and weights seed")
      ->capture_default_str()
      ->check(bench::whole_number<std::uint64_t>("a whole number 0..18446744073709551615"));
  // Bad input: exit 2 with one message, as fusebench's.
  const std::string help = "fusebench-region --help lists the flags";
  try {
    bench::reject_unknown_flags(app, argc, argv, {}, help);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "fusebench-region: error: " << e.what() << " (" << help << ")\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "fusebench-region: error: " << e.what() << "\n";
    return 2;
  }
  const bool dtype_given = dtype_option->count() > 0;
  try {
    if (is_collective_op(op) && tp < 2)
      throw std::invalid_argument("--op=" + op + " needs --tp >= 2 (nothing to exchange at tp=1)");
    if (variant.empty()) variant = default_variant(op);
    if (const auto& v = find_op(op).variants; std::find(v.begin(), v.end(), variant) == v.end()) {
      std::string valid;
      for (const auto& name : v) valid += (valid.empty() ? "" : ", ") + name;
      throw std::invalid_argument("--variant: '" + variant + "' is not a variant of " + op +
                                  " (valid: " + valid + ")");
    }
    auto backend = make_backend(parse_backend_kind(backend_name)).backend;
    const bench::CommChoice comm_choice = bench::parse_comm(comm);  // --comm, once
    CommSettings settings;
    settings.requested = bench::to_string(comm_choice);
    settings.timeout_s = default_comm_timeout();
    settings.link = link_profile == "measured" ? measure_link_profile(*backend, settings)
                                               : find_link_profile(link_profile);
    // The fixture exactly as the benchmark builds it, communicator included.
    bench::Options options;
    options.backend = backend_name;
    if (!weights.empty()) {
      if (!config.empty())
        throw std::invalid_argument("--weights and --model-config both name the model: give one");
      options.weights = {weights};
      options.layer = weights_layer;
      options.expert = expert;
    } else if (weights_layer >= 0) {
      throw std::invalid_argument(
          "--weights-layer picks a decoder layer of a checkpoint: give the checkpoint too, with "
          "--weights=DIR (a Hugging Face model directory); --model and --model-config have "
          "random weights, no layers to pick");
    } else if (expert >= 0) {
      throw std::invalid_argument(
          "--expert picks a routed expert of an MoE layer of a checkpoint: it needs "
          "--weights=DIR, the Hugging Face directory of an MoE model (e.g. Qwen3-30B-A3B), and "
          "--weights-layer=N for a layer other than 0; --model and --model-config have random "
          "weights, no experts to pick");
    } else if (config.empty()) {
      options.models = {model_name};
    } else {
      options.model_configs = {config};
    }
    options.ops = {op};
    options.variants = {variant};
    options.tokens = {tokens};
    options.tp = {tp};
    if (weights.empty() || dtype_given) options.dtypes = {dtype_name};
    options.dtype_flag = "--dtype";
    options.comm = comm_choice;
    const bench::Sweep sweep = bench::build_sweep(options, *backend, &settings);
    const auto chosen =
        std::find_if(sweep.fixtures.begin(), sweep.fixtures.end(),
                     [&](const bench::Fixture& f) { return layer.empty() || f.layer == layer; });
    if (chosen == sweep.fixtures.end()) {
      std::string valid;
      for (const auto& f : sweep.fixtures) {
        if (valid.find(f.layer) == std::string::npos)
          valid += (valid.empty() ? "" : ", ") + (f.layer.empty() ? "(none)" : f.layer);
      }
      std::string left_out;
      for (const auto& r : sweep.refused) left_out += "; " + r.op + " left out: " + r.reason;
      throw std::invalid_argument("--layer: " + op + " on " + sweep.models.front().name +
                                  " has no layer '" + layer + "' (valid: " + valid + ")" +
                                  left_out);
    }
    const bench::Fixture& f = *chosen;

    const Plan plan = f.plan();
    const Cost cost = cost_of(plan);
    Workspace ws(*backend, plan, seed, f.weight_source());
    std::unique_ptr<TpRun> ranks;  // the other ranks and the communicator (member 0: this one)
    if (is_tp_op(f.op))
      ranks =
          std::make_unique<TpRun>(std::vector<Workspace*>{&ws},
                                  std::vector<TpMember>{bench::tp_member(f, 0)}, seed, settings);
    const auto region = [&] { ranks ? ranks->region() : ws.run(); };
    region();  // warm-up (heuristics, module load): profile with --launch-skip 0 to see it too
    backend->synchronize();
    for (int i = 0; i < iterations; ++i) {
      if (flush) backend->flush_l2();
      // Profilers select this range: ncu --nvtx --nvtx-include "fusebench@region/"
      NvtxRange range("region");
      region();
      backend->synchronize();
    }
    ranks.reset();
    std::cout << "region " << f.data_name() << " backend=" << backend->name()
              << " runs=" << iterations << (f.comm.empty() ? "" : " comm=" + f.comm)
              << " model_launches=" << cost.launches << " model_bytes=" << cost.bytes
              << " model_flops=" << cost.flops << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fusebench-region: error: " << e.what() << "\n";
    return 2;
  }
}
