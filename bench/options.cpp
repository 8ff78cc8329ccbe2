#include "options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "cli/flag_checks.hpp"
#include "cli/gbench_flags.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/expert_placement.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"
#include "runner/launch_rank.hpp"

namespace fusebench::bench {

namespace {

std::string preset_names() {
  std::string names;
  for (const auto& m : model_presets()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

bool is_number(std::string_view text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "--models=" with nothing after '=', or "--models" followed by another flag: CLI11 would take
// that flag as the value ("unknown model '--ops=qkv'"), or fail with an exit code of its own.
void reject_missing_values(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() > 3 && arg.substr(0, 2) == "--" && arg.back() == '=') {
      throw std::invalid_argument(std::string(arg) + " has no value (give one after '=', e.g. " +
                                  std::string(arg) + "...; fusebench --help lists the flags)");
    }
    const CLI::Option* opt = app.get_option_no_throw(std::string(arg));
    if (opt == nullptr || opt->get_expected_min() == 0 || arg.find('=') != arg.npos) continue;
    const std::string_view next = i + 1 < argc ? std::string_view(argv[i + 1]) : "";
    if (next.empty() || (next.front() == '-' && !is_number(next))) {
      throw std::invalid_argument(std::string(arg) + " has no value" +
                                  (next.empty() ? "" : " ('" + std::string(next) + "' is a flag)") +
                                  ": give it as " + std::string(arg) +
                                  "=VALUE (fusebench --help lists the flags)");
    }
  }
}

std::uint64_t parse_seed(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw std::invalid_argument("--seed: '" + text +
                                "' is invalid (a whole number 0..18446744073709551615; 0 draws a "
                                "fresh seed)");
  }
  return value;
}

template <class T>
void reject_duplicates(const char* flag, const std::vector<T>& values) {
  std::set<T> seen;
  for (const T& v : values) {
    if (!seen.insert(v).second) {
      std::string text;
      if constexpr (std::is_arithmetic_v<T>) {
        text = std::to_string(v);
      } else {
        text = v;
      }
      throw std::invalid_argument(std::string(flag) + ": '" + text +
                                  "' is given twice (each value once: a repeated value would "
                                  "measure the same fixture twice under one name)");
    }
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// A flag only some ops read (OpInfo::own_flags), with no op asked that reads it, would be dropped
// without a word (a malformed routing file included): refused, naming the ops that read it.
void reject_unread_flags(const CLI::App& app, const Options& o) {
  std::vector<std::string> asked = o.ops, defaults;
  for (const auto& op : op_registry())
    if (op.in_default_sweep) defaults.push_back(op.name);
  if (asked.empty()) asked = defaults;
  for (const auto& op : op_registry()) {
    for (const auto& flag : op.own_flags) {
      const auto* option = app.get_option_no_throw(flag);
      if (option == nullptr || option->count() == 0) continue;
      const bool read = std::any_of(op_registry().begin(), op_registry().end(), [&](const auto& r) {
        return std::find(asked.begin(), asked.end(), r.name) != asked.end() &&
               std::find(r.own_flags.begin(), r.own_flags.end(), flag) != r.own_flags.end();
      });
      if (read) continue;
      const std::string given = flag + "=" + option->as<std::string>();
      throw std::invalid_argument(
          given + " applies to the " + op.name + " op only, and no op asked runs it (--ops=" +
          (o.ops.empty() ? join(defaults) + ", the default" : join(o.ops)) + "): add " + op.name +
          " to --ops, e.g. --ops=" + op.name + " " + given + ", or drop " + flag);
    }
  }
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// The timing flags' ranges and combinations (CLI11 sees each value alone).
void validate_timing(const CLI::App& app, const Options& o) {
  if (app.count("--timing-target-cv") > 0) {
    throw std::invalid_argument(
        "--timing-target-cv is retired: variants are measured interleaved and the stopping rule "
        "now targets the 95% confidence interval of each speedup (or of each median where the "
        "baseline is absent); use --timing-target-ci=<relative half-width>, e.g. "
        "--timing-target-ci=0.01 (docs/timing.md). time_cv is still reported.");
  }
  if (app.count("--timing-target-ci") > 0 &&
      (!std::isfinite(o.timing_target_ci) || !(o.timing_target_ci > 0))) {
    throw std::invalid_argument("--timing-target-ci: " + number(o.timing_target_ci) +
                                " is invalid (a relative half-width > 0, e.g. 0.01)");
  }
  const bool min_given = app.count("--timing-min-time") > 0;
  const bool max_given = app.count("--timing-max-time") > 0;
  if (min_given && (!std::isfinite(o.timing_min_time) || o.timing_min_time < 0)) {
    throw std::invalid_argument("--timing-min-time: " + number(o.timing_min_time) +
                                " is invalid (seconds >= 0, e.g. 0.02)");
  }
  if (max_given && (!std::isfinite(o.timing_max_time) || !(o.timing_max_time > 0))) {
    throw std::invalid_argument("--timing-max-time: " + number(o.timing_max_time) +
                                " is invalid (seconds > 0, e.g. 0.5)");
  }
  if (min_given && max_given && o.timing_min_time > o.timing_max_time) {
    throw std::invalid_argument("--timing-min-time=" + number(o.timing_min_time) +
                                " is longer than --timing-max-time=" + number(o.timing_max_time) +
                                ": no entry could ever converge (the timeout comes first)");
  }
  if (app.count("--ceilings-every") > 0 &&
      (!std::isfinite(o.ceilings_every) || o.ceilings_every < 0)) {
    throw std::invalid_argument("--ceilings-every: " + number(o.ceilings_every) +
                                " is invalid (seconds >= 0, e.g. 30; 0 measures once)");
  }
}

// The flags read as text and made their types once (Options): each error names the flag, the
// value and the valid ones.
struct FlagTexts {
  std::string routing = "router";
  std::vector<std::string> dtypes;
  std::string comm = "auto";
  std::vector<std::string> timing;
  std::string timing_blocks = "auto";
  std::string cpu_threads = "auto";
};

void parse_texts(const FlagTexts& texts, Options& o) {
  o.comm = parse_comm(texts.comm);
  reject_duplicates("--timing", texts.timing);
  o.timing.clear();
  for (const auto& t : texts.timing) o.timing.push_back(measure::parse_regime(t));
  o.timing_blocks = parse_timing_blocks(texts.timing_blocks);
  o.cpu_threads = parse_cpu_threads(texts.cpu_threads);
}

// Checks what CLI11 cannot see: ranges, duplicates, combinations. Throws std::invalid_argument.
void validate(const CLI::App& app, const Options& o) {
  if ((!o.list_for.empty() || o.list_bytes) && !o.list) {
    throw std::invalid_argument(std::string(o.list_bytes ? "--list-bytes" : "--list-for") +
                                " only changes what --list prints: add --list");
  }
  if (o.list && (o.verify || o.verify_only)) {
    const std::string flag = o.verify_only ? "--verify-only" : "--verify";
    throw std::invalid_argument("--list and " + flag +
                                ": --list prints the fixtures and runs nothing, so nothing would "
                                "be verified; drop --list to verify (then the sweep runs), or " +
                                flag + " to list");
  }
  validate_timing(app, o);
  reject_duplicates("--models", o.models);
  reject_duplicates("--model-config", o.model_configs);
  reject_duplicates("--ops", o.ops);
  reject_duplicates("--variants", o.variants);
  reject_duplicates("--tokens", o.tokens);
  reject_duplicates("--tp", o.tp);
  if (o.collective_sweep && std::none_of(o.tp.begin(), o.tp.end(), [](int tp) { return tp > 1; })) {
    throw std::invalid_argument(
        "--collective-sweep adds nothing at tp=1 (there is nothing to exchange): add a tp >= 2, "
        "e.g. --tp=1,2");
  }
  reject_duplicates("--weights", o.weights);
  if (o.weights.empty() && app.count("--layer") > 0) {
    throw std::invalid_argument(
        "--layer picks a decoder layer of a checkpoint: give the checkpoint too, with "
        "--weights=DIR (a Hugging Face model directory); random weights have no layers to pick");
  }
  if (o.weights.empty() && app.count("--expert") > 0) {
    throw std::invalid_argument(
        "--expert picks a routed expert of an MoE layer of a checkpoint: it needs --weights=DIR, "
        "the Hugging Face directory of an MoE model (e.g. Qwen3-30B-A3B), and --layer=N for a "
        "layer other than 0; random weights (--models) have no experts to pick");
  }
  for (const auto& dir : o.weights) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec))
      throw std::invalid_argument("--weights: " + dir + " does not exist");
    if (!std::filesystem::is_directory(dir, ec)) {
      throw std::invalid_argument("--weights: " + dir +
                                  " is not a directory (give the Hugging Face model directory: "
                                  "config.json and *.safetensors)");
    }
  }
  for (const auto& path : o.model_configs) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      throw std::invalid_argument("--model-config: " + path +
                                  " is a directory (give the config.json file in it, e.g. " +
                                  (std::filesystem::path(path) / "config.json").string() + ")");
    }
    if (!std::filesystem::exists(path, ec)) {
      throw std::invalid_argument("--model-config: " + path + " does not exist");
    }
  }
}

}  // namespace

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{
      "fusebench: split vs fused projections (q/k/v, gate/up) measured in launches, bytes and "
      "time.\nGoogle Benchmark's --benchmark_* flags are accepted too."};
  app.add_option("--backend", o.backend, "auto | cuda | cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  app.add_option("--models", o.models,
                 "model presets: " + preset_names() +
                     " (default: qwen3-0.6b, llama3-8b, qwen3-32b, llama3-70b on a GPU, "
                     "qwen3-0.6b on the CPU)")
      ->delimiter(',')
      ->check(checked_by([](const std::string& name) { find_model(name); }));
  app.add_option("--model-config", o.model_configs,
                 "HF config.json of a model, read as vLLM builds its model_type (docs/models.md); "
                 "named by its file name (repeatable)")
      ->delimiter(',');
  app.add_option("--weights", o.weights,
                 "Hugging Face model directory (config.json, *.safetensors): its model runs on "
                 "the real weights of one decoder layer, in the checkpoint's dtype unless "
                 "--dtypes is given (docs/checkpoints.md); beside --models/--model-config, which "
                 "keep random weights (repeatable)");
  app.add_option("--layer", o.layer, "decoder layer of --weights (default 0)")
      ->check(whole_number<int>("a decoder layer index >= 0", 0));
  app.add_option("--expert", o.expert,
                 "routed expert of an MoE layer of --weights (layer:expert fixtures; default 0)")
      ->check(whole_number<std::int64_t>("a routed expert index >= 0", 0));
  FlagTexts texts;  // the flags that become their types once parsed (parse_texts)
  app.add_option("--ops", o.ops,
                 "ops: qkv,gate_up (default); moe (an MoE layer's routed experts); tp_attn,tp_mlp "
                 "(TP pipelines); tp_moe (the MoE block across ranks: TP vs EP); "
                 "allreduce,allgather")
      ->delimiter(',')
      ->check(checked_by([](const std::string& name) { find_op(name); }));
  app.add_option("--routing", texts.routing,
                 "routing of the moe op: router (the model's rule on random router weights and "
                 "hidden states; default) | uniform | balanced | zipf:S | file:PATH (docs/moe.md)")
      ->check(checked_by([](const std::string& value) { parse_routing(value); }));
  app.add_option("--expert-placement", o.expert_placement,
                 "expert placement of the tp_moe op's expert-parallel variants: linear (default) "
                 "| round_robin (vLLM's expert_placement_strategy; docs/tp.md)")
      ->check(checked_by([](const std::string& value) { parse_placement(value); }));
  app.add_option("--redundant-experts", o.redundant_experts,
                 "redundant experts of the tp_moe op's expert-parallel variants (DeepSeek's EPLB, "
                 "vLLM's --enable-eplb num_redundant_experts; default 0: none)")
      ->check(whole_number<std::int64_t>("a count of redundant experts >= 0", 0));
  app.add_option("--variants", o.variants, "variants to run (default: all of each op)")
      ->delimiter(',');
  app.add_option("--tokens", o.tokens,
                 "token counts M, e.g. 1,16,128,4096 (default: powers of two 1..16384 on a GPU; "
                 "1,4,16,64,256,1024 on the CPU)")
      ->delimiter(',')
      ->check(whole_number<std::int64_t>("token counts are whole numbers >= 1, e.g. "
                                         "--tokens=1,16,128",
                                         1));
  app.add_option("--tp", o.tp, "tensor-parallel sizes (one rank's shard is run; default 1)")
      ->delimiter(',')
      ->check(
          whole_number<int>("tensor-parallel sizes are whole numbers >= 1, e.g. --tp=1,2,4", 1));
  app.add_option("--dtypes", texts.dtypes,
                 "bf16,fp16,fp32 (default: bf16 on a GPU, fp32,bf16 on the CPU), and for qkv "
                 "and gate_up the quantized fp8 and int8 as DTYPE[:WEIGHTS[:ACTIVATIONS]]"
                 "[:SCHEME], e.g. fp8, fp8:channel, fp8:block, int8:channel, fp8:tensor:static "
                 "(docs/quant.md)")
      ->delimiter(',')
      ->check(checked_by([](const std::string& name) { DtypeChoice{name}; }));
  app.add_option("--report", o.report,
                 "write the JSON report here (atomically, after every entry)");
  std::string seed_text = "0";  // parsed by parse_seed: CLI11 would wrap "-1" around to 2^64-1
  app.add_option("--seed", seed_text, "random seed for inputs and weights (0: fresh)");
  app.add_flag("--verify", o.verify,
               "check every fused variant against split and a float64 reference first");
  app.add_flag("--verify-only", o.verify_only,
               "check every variant as --verify does, then stop: nothing is timed");
  app.add_flag("--list", o.list, "list the fixtures and exit");
  app.add_option("--list-for", o.list_for,
                 "with --list: the sweep as the cuda backend would form it, here without a GPU "
                 "(GPU defaults, regimes and one-launch variants; nothing runs)")
      ->check(CLI::IsMember({"cuda"}));
  app.add_flag("--list-bytes", o.list_bytes,
               "with --list: each fixture's buffer bytes, comparison group and shared-data group, "
               "tab-separated");
  app.add_option("--comm", texts.comm,
                 "TP collectives: auto (CPU: inprocess; GPU: nccl when tp GPUs, else modelled; "
                 "under mpirun: nccl/mpi) | nccl | modelled | inprocess | mpi");
  app.add_option("--link-profile", o.link_profile,
                 "link model of comm:modelled: nvlink-h100, nvlink-h200, nvlink-b200, pcie-gen5, "
                 "pcie-gen4, ib-ndr400, custom:<latency_us>:<busbw_GBps>, or measured (fitted to "
                 "all-reduces "
                 "timed here; needs 2+ GPUs, or the CPU in-process ranks)")
      ->check(checked_by([](const std::string& name) {
        if (name != "measured") find_link_profile(name);
      }));
  app.add_flag(
      "--collective-sweep", o.collective_sweep,
      "add allreduce/allgather entries over the message sizes of the TP pipelines (tp >= 2)");
  app.add_option("--launch-counts", o.launch_counts, "launch-count pass after timing: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--dram-counters", o.dram_counters,
                 "DRAM/L2 bytes pass (CUPTI Range Profiler) after timing: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--timing", texts.timing,
                 "timing regimes: cold,batch,eager,graph (GPU default batch,eager; CPU: eager)")
      ->delimiter(',');
  // Range checked by validate(): CLI::PositiveNumber's message prints its 300-digit bound.
  app.add_option("--timing-target-ci", o.timing_target_ci,
                 "stop a comparison group once every non-baseline variant's speedup has a 95% "
                 "interval of at most this relative half-width (groups without their baseline: "
                 "each median's interval); default GPU 0.01, CPU 0.03")
      ->check(real_number("a relative half-width > 0, e.g. 0.01"));
  std::string retired_cv;  // refused by validate(), naming its replacement
  app.add_option("--timing-target-cv", retired_cv,
                 "retired: the stopping rule targets intervals now (--timing-target-ci)");
  app.add_option("--timing-min-time", o.timing_min_time,
                 "seconds of measured time each variant accumulates before stopping (GPU 0.05, "
                 "CPU 0.02)")
      ->check(real_number("seconds >= 0, e.g. 0.02"));
  app.add_option("--timing-max-time", o.timing_max_time,
                 "wall-clock timeout per entry in seconds; a group of k variants gets k times "
                 "this (GPU 1, CPU 0.5)")
      ->check(real_number("seconds > 0, e.g. 0.5"));
  app.add_option("--ceilings-every", o.ceilings_every,
                 "measure the roofline ceilings again every SECONDS between groups, and once after "
                 "the last, each entry judged against the nearest (0: once, at the start; CPU 30, "
                 "GPU 0)")
      ->check(real_number("seconds >= 0, e.g. 30"));
  app.add_option("--timing-blocks", texts.timing_blocks,
                 "measure each group in N blocks in a row and widen its intervals by their "
                 "spread (docs/timing.md): auto (5 on the CPU backend, 1 on a GPU) or 1..100");
  app.add_option("--cpu-threads", texts.cpu_threads,
                 "CPU backend: threads of the GEMM libraries: auto (the cores not busy with "
                 "other processes at the start, at least 1; docs/timing.md, Contention) or N");
  app.add_option("--gemm-algo", o.gemm_algo,
                 "timed: fastest of the top cuBLASLt heuristics per shape; heuristic: the first")
      ->check(CLI::IsMember({"timed", "heuristic"}));
  // Bad input: exit 2 with one message (README "Bad input"), printed by rank 0 alone under mpirun.
  const bool speak = speaks_for_the_job();
  try {
    // Before the missing-value check: "--modles=" is a typo first, a missing value second.
    std::vector<std::string> gbench_names;
    for (const auto& f : gbench_flags()) gbench_names.push_back("--" + f.name);
    reject_unknown_flags(app, argc, argv, gbench_names, "fusebench --help lists the flags");
    reject_missing_values(app, argc, argv);
    reject_empty_list_items(app, argc, argv);
    app.parse(argc, argv);
    o.seed = parse_seed(seed_text);
    parse_texts(texts, o);
    validate(app, o);
    reject_unread_flags(app, o);
    // Each flag becomes its type once, here: the sweep never parses a flag's text again.
    o.routing = parse_routing(texts.routing);
    reject_duplicates("--dtypes", texts.dtypes);
    o.dtypes.assign(texts.dtypes.begin(), texts.dtypes.end());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return speak ? app.exit(e) : 0;  // --help
    if (speak) {
      std::cerr << "fusebench: error: " << e.what() << " (fusebench --help lists the flags)\n";
    }
    return 2;
  } catch (const std::invalid_argument& e) {
    if (speak) std::cerr << "fusebench: error: " << e.what() << "\n";
    return 2;
  }
  return -1;
}

}  // namespace fusebench::bench
