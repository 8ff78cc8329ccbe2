#include <cmath>
#include <sstream>

#include "fusebench/report.hpp"

namespace fusebench {

nlohmann::json run_to_json(const benchmark::BenchmarkReporter::Run& run) {
  nlohmann::json j;
  j["name"] = run.benchmark_name();
  j["family_index"] = run.family_index;
  j["per_family_instance_index"] = run.per_family_instance_index;
  j["run_name"] = run.run_name.str();
  j["run_type"] =
      run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration ? "iteration" : "aggregate";
  j["repetitions"] = run.repetitions;
  if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Aggregate) {
    j["repetition_index"] = run.repetition_index;
  } else {
    j["aggregate_name"] = run.aggregate_name;
    j["aggregate_unit"] = run.aggregate_unit == benchmark::kPercentage ? "percentage" : "time";
  }
  j["threads"] = run.threads;
#ifdef FUSEBENCH_GBENCH_HAS_SKIPPED
  if (run.skipped) {
    j["error_occurred"] = true;
    j["error_message"] = run.skip_message;
  }
#else
  if (run.error_occurred) {
    j["error_occurred"] = true;
    j["error_message"] = run.error_message;
  }
#endif
  j["iterations"] = run.iterations;
  if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate &&
      run.aggregate_unit == benchmark::kPercentage) {
    // A ratio (e.g. _cv), not a time: Google Benchmark's JSON writes it unscaled.
    j["real_time"] = run.real_accumulated_time;
    j["cpu_time"] = run.cpu_accumulated_time;
  } else {
    j["real_time"] = run.GetAdjustedRealTime();
    j["cpu_time"] = run.GetAdjustedCPUTime();
  }
  j["time_unit"] = benchmark::GetTimeUnitString(run.time_unit);
  for (const auto& [name, counter] : run.counters) j[name] = counter.value;
  if (!run.report_label.empty()) j["label"] = run.report_label;
  return j;
}

nlohmann::json gbench_context_to_json(const benchmark::BenchmarkReporter::Context& context) {
  const auto& cpu = context.cpu_info;
  nlohmann::json caches = nlohmann::json::array();
  for (const auto& c : cpu.caches) {
    caches.push_back(
        {{"type", c.type}, {"level", c.level}, {"size", c.size}, {"num_sharing", c.num_sharing}});
  }
  char date[64] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", std::localtime(&now));
  return {
      {"date", date},
      {"host_name", context.sys_info.name},
      {"executable", benchmark::BenchmarkReporter::Context::executable_name},
      {"num_cpus", cpu.num_cpus},
      {"mhz_per_cpu", static_cast<int>(cpu.cycles_per_second / 1e6)},
      {"cpu_scaling_enabled", cpu.scaling == benchmark::CPUInfo::ENABLED},
      {"caches", caches},
      {"load_avg", cpu.load_avg},
      {"library_build_type", gbench_library_build_type(context)},
  };
}

std::string gbench_library_build_type(const benchmark::BenchmarkReporter::Context& context) {
  // The library decides it from its own NDEBUG, which our build cannot see: ask its JSON
  // reporter, which writes it into the context it prints.
  benchmark::JSONReporter json;
  std::ostringstream out;
  json.SetOutputStream(&out);
  json.SetErrorStream(&out);
  json.ReportContext(context);
  const std::string text = out.str();
  const std::string key = "\"library_build_type\": \"";
  const auto at = text.find(key);
  if (at == std::string::npos) return "unknown";
  const auto begin = at + key.size();
  return text.substr(begin, text.find('"', begin) - begin);
}

nlohmann::json sanitize(const nlohmann::json& value, std::vector<std::string>* dropped,
                        const std::string& path) {
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, item] : value.items()) {
      if (item.is_number_float() && !std::isfinite(item.get<double>())) {
        if (dropped) dropped->push_back(path + key);
        continue;
      }
      out[key] = sanitize(item, dropped, path + key + ".");
    }
    return out;
  }
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < value.size(); ++i) {
      const auto& item = value[i];
      // In an array position matters: keep the slot as null rather than shifting the rest.
      if (item.is_number_float() && !std::isfinite(item.get<double>())) {
        if (dropped) dropped->push_back(path + std::to_string(i));
        out.push_back(nullptr);
        continue;
      }
      out.push_back(sanitize(item, dropped, path + std::to_string(i) + "."));
    }
    return out;
  }
  return value;
}

}  // namespace fusebench
