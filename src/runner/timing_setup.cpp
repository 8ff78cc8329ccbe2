#include "timing_setup.hpp"

#include <algorithm>
#include <chrono>

#include "measure/blocks.hpp"
#include "measure/cache_size.hpp"
#include "measure/intervals.hpp"

namespace fusebench::bench {

nlohmann::json apply_cpu_thread_policy(const Options& o, Backend& backend) {
  if (backend.name() != "cpu") {
    return {{"requested", o.cpu_threads.text},
            {"note", "the " + backend.name() + " backend runs no CPU GEMM: not applied"}};
  }
  const measure::ThreadPolicy policy = measure::measure_thread_policy(o.cpu_threads.text);
  Backend::set_host_thread_budget(policy.threads);
  return policy.json;
}

TimingSetup setup_timing(const Options& o, Backend& backend, const Sweep& sweep,
                         nlohmann::json& context) {
  TimingSetup t;
  // Preempted samples: our threads' run delay around every host-timed sample.
  t.run_delay = std::make_unique<measure::RunDelayProbe>();
  t.settings.engine.run_delay = t.run_delay.get();
  context["contention"] = {
      {"preemption_check",
       t.run_delay->available()
           ? nlohmann::json("/proc/self/task/*/schedstat run delay")
           : nlohmann::json("unavailable: " + t.run_delay->unavailable_reason())},
      {"preempted_fraction", measure::kPreemptedFraction},
      {"contended_drop_share", measure::kContendedDropShare},
      {"contended_min_drops", measure::kContendedMinDrops},
      {"contended_foreign_cores", measure::kContendedForeignCores},
      {"method",
       "host-timed samples (every CPU sample; eager and graph on a GPU): the run delay of this "
       "process's threads (time runnable but waiting for a CPU, /proc/self/task/*/schedstat) "
       "summed over the sample; above preempted_fraction of the sample's wall time the sample "
       "is preempted: dropped and counted (samples_dropped_preempted). A group that did not "
       "converge with at least contended_drop_share of its samples (and at least 6) preempted "
       "stops "
       "timing_stop: contended. A group whose own threads outnumber the cores (in-process TP "
       "ranks) cannot tell its own waits from a neighbour's: it is contended when other "
       "processes used more than contended_foreign_cores cores on average meanwhile "
       "(/proc/stat minus this process). Contended entries are not judged by the charts, "
       "summaries and gate."}};
  const bool gpu = backend.name() != "cpu";
  backend.set_gemm_algo_policy(o.gemm_algo);
  std::string why;
  t.device = measure::make_device_timing(backend, &why);
  measure::StoppingRule& rule = t.settings.engine.rule;
  // Defaults sized for the sweep (docs/timing.md): the GPU default sweep has ~120 groups x 2
  // regimes and must fit a device check of a few minutes; nvbench's own are 0.5 s / 15 s. The
  // interval targets: 1% on a GPU, 3% on a shared two-core CPU, where 1% would time out.
  rule.target_ci = o.timing_target_ci > 0 ? o.timing_target_ci : (gpu ? 0.01 : 0.03);
  rule.min_time_s = o.timing_min_time >= 0 ? o.timing_min_time : (gpu ? 0.05 : 0.02);
  rule.max_time_s = o.timing_max_time >= 0 ? o.timing_max_time : (gpu ? 1.0 : 0.5);
  t.settings.engine.device = t.device.get();
  t.settings.timing_blocks = static_cast<std::size_t>(o.timing_blocks.count.value_or(0));
  // Rotation defeats the GPU's L2; on the CPU the last-level cache (when the OS says).
  if (gpu) {
    t.settings.cache_bytes = context.value("gpu_l2_bytes", std::size_t{0});
    t.settings.rotation_budget_bytes = std::size_t{4} << 30;
  } else {
    t.settings.cache_bytes = measure::host_last_level_cache().bytes;  // = context.host_cache
    t.settings.rotation_budget_bytes = std::size_t{256} << 20;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<QuantSpec> quant;  // every quantized spec of the sweep, in order
  for (const Fixture& f : sweep.fixtures) {
    if (f.quant && std::find(quant.begin(), quant.end(), *f.quant) == quant.end())
      quant.push_back(*f.quant);
  }
  t.ceilings = std::make_unique<measure::MeasuredCeilings>(
      measure::measure_ceilings(backend, sweep.dtypes, t.device.get(), quant));
  t.ceilings->json["measure_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.settings.ceilings = t.ceilings.get();
  t.ceilings_log = std::make_unique<measure::CeilingsLog>(*t.ceilings);
  t.settings.ceilings_log = t.ceilings_log.get();
  context["ceilings"] = t.ceilings_log->json();
  // A shared host's bandwidth moves over minutes: measured again between groups (the GPU's
  // ceilings hold still, so once unless asked).
  t.settings.ceilings_every_s = o.ceilings_every >= 0 ? o.ceilings_every : (gpu ? 0.0 : 30.0);
  t.settings.remeasure_ceilings = [&backend, dtypes = sweep.dtypes, quant, device = t.device.get(),
                                   log = t.ceilings_log.get()] {
    const double at = log->now_s();
    log->add_measurement(at, measure::measure_ceilings(backend, dtypes, device, quant));
  };

  // The throttle rule compares each sample's clock with the clock a sustained GEMM load runs at
  // (probed while the ceilings were taken), not with the peak clock: at the power cap a big
  // bf16 GEMM runs well below cudaDevAttrClockRate, and its samples are not throttled.
  nlohmann::json clock;
  if (t.device) {
    const double default_mhz = t.device->default_clock_mhz();
    const auto loaded = t.ceilings->loaded_clock_mhz;
    rule.reference_clock_mhz = loaded ? *loaded : default_mhz;
    clock = {{"source",
              "clock64 over 10 us of globaltimer, one SM, just before and just after every "
              "sample; the lower counts"},
             {"default_mhz", default_mhz},
             {"reference", loaded ? "clock under load, measured with the ceilings"
                                  : "default clock (the clock under load was not readable)"},
             {"reference_mhz", rule.reference_clock_mhz},
             {"throttle_fraction", rule.throttle_fraction},
             {"throttle_below_mhz", rule.throttle_fraction * rule.reference_clock_mhz}};
    if (loaded) clock["under_load_mhz"] = *loaded;
    // The window one probe really measured over: a timer ticking coarser than the 10 us asked
    // for makes it one tick, and every sample then pays two of them.
    t.device->probe_clock();
    backend.synchronize();
    if (const double window = t.device->probed_window_ns(); window > 0) {
      clock["probe_window_ns"] = window;
    } else {
      clock["probe_window_unavailable"] = "the clock probe returned no reading";
    }
  } else {
    clock = {{"source", "unavailable: " + why + "; no sample is dropped for throttling"}};
  }
  context["timing"] = {
      {"regimes", sweep.timing},
      {"regime_definitions",
       {{"cold", "L2 flushed before each sample; CUDA events around one run (device time)"},
        {"batch",
         "runs queued behind a blocking kernel, then released: device time per run, host launch "
         "cost hidden"},
        {"eager",
         "host wall time per run: runs issued back to back as an engine would, synchronised at the "
         "end of each sample"},
        {"graph",
         "each rotation set captured once into a CUDA graph; host wall time per replay, "
         "synchronised per sample"}}},
      {"interleaving",
       "the variants of one op at one shape, dtype and regime (a comparison group) are measured "
       "together: rounds of one sample of each variant, each on its own workspace and rotation "
       "sets, the order rotated per round (round r starts with the r-th variant mod k); "
       "speedup = median over rounds of baseline time / variant time"},
      {"interval_method", measure::interval_method_text(rule.confidence)},
      {"blocks",
       {{"requested", o.timing_blocks.text},
        {"method", measure::blocks_method_text(rule.confidence)}}},
      {"stopping_rule",
       {{"target_ci", rule.target_ci},
        {"target",
         "relative half-width (high - low) / 2 / value of the 95% interval of every non-baseline "
         "speedup of a group, or of every median when the group lacks its baseline"},
        {"min_time_s", rule.min_time_s},
        {"max_time_s", rule.max_time_s},
        {"max_time_note", "per entry: a group of k variants stops after k x max_time_s"},
        {"min_samples", rule.min_samples},
        {"max_samples", rule.max_samples},
        {"throttle_fraction", rule.throttle_fraction}}},
      {"sm_clock", clock},
      {"gemm_algo", gpu ? o.gemm_algo : std::string("OpenBLAS (no algorithm choice)")},
      {"cache_bytes", t.settings.cache_bytes},
      {"gbench_mapping",
       "one iteration per entry = one measurement; real_time = median time per run; a group is "
       "measured when its first entry runs and each entry reports its part"},
      {"counter_definitions",
       {{"time_median", "median time per run over the valid samples, s (= real_time)"},
        {"time_median_ci_low", "low end of the 95% interval of time_median, s"},
        {"time_median_ci_high", "high end of the 95% interval of time_median, s"},
        {"time_mean", "mean time per run, s"},
        {"time_min", "fastest sample's time per run, s"},
        {"time_cv", "relative standard deviation of the samples (stdev/mean)"},
        {"samples", "valid samples the statistics use"},
        {"samples_dropped_throttled",
         "samples dropped: SM clock below throttle_fraction x the reference clock"},
        {"samples_dropped_block_timeout",
         "batch/cold samples dropped: the blocking kernel timed out before release"},
        {"runs_per_sample",
         "runs per sample (the sample's time divided by this is one sample value)"},
        {"rotation_sets", "copies of the buffers cycled through so weights are not cache-warm"},
        {"timing_rounds", "rounds of the interleaved measurement (one sample per variant each)"},
        {"converged",
         "1 when the interval target was reached, 0 on timeout, max_samples or "
         "blocks_disagree"},
        {"timing_blocks",
         "blocks the group was measured in (intervals widened by their spread when > 1)"},
        {"speedup",
         "baseline time / this variant's time (> 1: faster), median of the per-round paired "
         "ratios"},
        {"speedup_ci_low", "low end of the 95% interval of speedup"},
        {"speedup_ci_high", "high end of the 95% interval of speedup"},
        {"speedup_pairs", "rounds with valid samples of both (the ratios speedup rests on)"},
        {"sm_clock_mhz", "mean SM clock over the valid samples"},
        {"sm_clock_min_mhz", "lowest SM clock of a valid sample"},
        {"sm_clock_max_mhz", "highest SM clock of a valid sample"},
        {"roofline_fraction",
         "roofline time (the published ceilings, per step) / time_median; <= 1 by construction: "
         "the ceilings are raised to any throughput the sweep observed (context.ceilings.raised)"},
        {"contended",
         "1 when the group stopped timing_stop: contended (not judged; timing_contended_note "
         "says why); absent otherwise"},
        {"samples_dropped_preempted",
         "host-timed samples dropped: this process's threads waited for a CPU for more than "
         "context.contention.preempted_fraction of the sample"},
        {"host_wait_fraction",
         "run delay of this process's threads over the entry's samples / their time"},
        {"host_foreign_cores",
         "CPU time other processes used while the group was measured, in cores (average)"},
        {"host_psi_cpu_some",
         "share of the group's time some task on the host waited for a CPU (PSI)"}}}};
  return t;
}

}  // namespace fusebench::bench
