#include "options.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

namespace fusebench::bench {

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{
      "fusebench: split vs fused projections (q/k/v, gate/up) measured in launches, bytes and "
      "time.\nGoogle Benchmark's --benchmark_* flags are accepted too."};
  app.add_option("--backend", o.backend, "auto | cuda | cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  app.add_option("--models", o.models,
                 "model presets: qwen3-0.6b,llama3-8b,qwen3-32b,llama3-70b (default: all four on "
                 "a GPU, qwen3-0.6b on the CPU)")
      ->delimiter(',');
  app.add_option("--model-config", o.model_configs, "HF config.json of a model (repeatable)")
      ->delimiter(',');
  app.add_option("--ops", o.ops,
                 "ops: qkv,gate_up (default); tp_attn,tp_mlp (TP pipelines); allreduce,allgather")
      ->delimiter(',');
  app.add_option("--variants", o.variants, "variants to run (default: all of each op)")
      ->delimiter(',');
  app.add_option("--tokens", o.tokens,
                 "token counts M, e.g. 1,16,128,4096 (default: powers of two 1..16384 on a GPU; "
                 "1,4,16,64,256,1024 on the CPU)")
      ->delimiter(',');
  app.add_option("--tp", o.tp, "tensor-parallel sizes (one rank's shard is run; default 1)")
      ->delimiter(',');
  app.add_option("--dtypes", o.dtypes,
                 "bf16,fp16,fp32 (default: bf16 on a GPU, fp32,bf16 on the CPU)")
      ->delimiter(',');
  app.add_option("--report", o.report,
                 "write the JSON report here (atomically, after every entry)");
  app.add_option("--seed", o.seed, "random seed for inputs and weights (0: fresh)");
  app.add_flag("--verify", o.verify,
               "check every fused variant against split and a float64 reference first");
  app.add_flag("--list", o.list, "list the fixtures and exit");
  app.add_option(
         "--comm", o.comm,
         "TP collectives: auto (CPU: inprocess; GPU: nccl when tp GPUs, else modelled; under "
         "mpirun: nccl/mpi) | nccl | modelled | inprocess | mpi")
      ->check(CLI::IsMember({"auto", "nccl", "modelled", "inprocess", "mpi"}));
  app.add_option(
      "--link-profile", o.link_profile,
      "link model of comm:modelled: nvlink-h100, nvlink-h200, nvlink-b200, pcie-gen5, "
      "pcie-gen4, ib-ndr400, custom:<latency_us>:<busbw_GBps>, or measured (fitted to all-reduces "
      "timed here; needs 2+ GPUs, or the CPU in-process ranks)");
  app.add_flag(
      "--collective-sweep", o.collective_sweep,
      "add allreduce/allgather entries over the message sizes of the TP pipelines (tp >= 2)");
  app.add_option("--launch-counts", o.launch_counts, "launch-count pass after timing: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--dram-counters", o.dram_counters,
                 "DRAM/L2 bytes pass (CUPTI Range Profiler) after timing: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--timing", o.timing,
                 "timing regimes: cold,batch,eager,graph (GPU default batch,eager; CPU: eager)")
      ->delimiter(',');
  app.add_option("--timing-target-ci", o.timing_target_ci,
                 "stop a comparison group once every non-baseline variant's speedup has a 95% "
                 "interval of at most this relative half-width (groups without their baseline: "
                 "each median's interval); default GPU 0.01, CPU 0.03")
      ->check(CLI::PositiveNumber);
  std::string retired_cv;
  app.add_option("--timing-target-cv", retired_cv,
                 "retired: the stopping rule targets intervals now (--timing-target-ci)");
  app.add_option("--timing-min-time", o.timing_min_time,
                 "seconds of measured time each variant accumulates before stopping (GPU 0.05, "
                 "CPU 0.02)");
  app.add_option("--timing-max-time", o.timing_max_time,
                 "wall-clock timeout per entry in seconds; a group of k variants gets k times "
                 "this (GPU 1, CPU 0.5)");
  app.add_option("--gemm-algo", o.gemm_algo,
                 "timed: fastest of the top cuBLASLt heuristics per shape; heuristic: the first")
      ->check(CLI::IsMember({"timed", "heuristic"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.count("--timing-target-cv") > 0) {
    std::cerr << "--timing-target-cv is retired: variants are measured interleaved and the "
                 "stopping rule now targets the 95% confidence interval of each speedup (or of "
                 "each median where the baseline is absent); use --timing-target-ci=<relative "
                 "half-width>, e.g. --timing-target-ci=0.01 (docs/timing.md). time_cv is still "
                 "reported.\n";
    return 2;
  }
  return -1;
}

}  // namespace fusebench::bench
