// fusebench-region: runs one fixture's region a few times and exits, for external profilers
// (ncu, nsys) to measure exactly what fusebench measures, without Google Benchmark's loop.
//   ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum
//       build/bin/fusebench-region --op=qkv --variant=fused --model=llama3-8b --tokens=128
#include <CLI/CLI.hpp>
#include <iostream>

#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/nvtx.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

int main(int argc, char** argv) {
  CLI::App app{"Run one fusebench region (for ncu/nsys cross-checks)"};
  std::string op = "qkv", variant = "fused", model_name = "qwen3-0.6b", config, dtype_name = "bf16",
              backend_name = "auto";
  std::int64_t tokens = 1;
  int tp = 1, iterations = 1;
  bool flush = true;
  app.add_option("--op", op);
  app.add_option("--variant", variant);
  app.add_option("--model", model_name);
  app.add_option("--model-config", config, "HF config.json instead of --model");
  app.add_option("--tokens", tokens);
  app.add_option("--tp", tp);
  app.add_option("--dtype", dtype_name);
  app.add_option("--backend", backend_name);
  app.add_option("--iterations", iterations, "measured runs after one warm-up run");
  app.add_option("--flush-l2", flush, "flush L2 before each measured run (default true)");
  CLI11_PARSE(app, argc, argv);
  try {
    const ModelShape model = config.empty() ? find_model(model_name) : load_hf_config(config);
    const Plan plan = build_plan(op, variant, shard(model, tp), tokens, parse_dtype(dtype_name));
    auto backend = make_backend(parse_backend_kind(backend_name)).backend;
    Workspace ws(*backend, plan, 1);
    ws.run();  // warm-up (heuristics, module load): profile with --launch-skip 0 to see it too
    backend->synchronize();
    for (int i = 0; i < iterations; ++i) {
      if (flush) backend->flush_l2();
      // Profilers select this range: ncu --nvtx --nvtx-include "fusebench@region/"
      NvtxRange range("region");
      ws.run();
      backend->synchronize();
    }
    backend->synchronize();
    const Cost cost = cost_of(plan);
    std::cout << "region " << op << "/" << variant << " model=" << model.name
              << " tokens=" << tokens << " tp=" << tp << " dtype=" << dtype_name
              << " backend=" << backend->name() << " runs=" << iterations
              << " model_launches=" << cost.launches << " model_bytes=" << cost.bytes
              << " model_flops=" << cost.flops << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fusebench-region: error: " << e.what() << "\n";
    return 2;
  }
}
