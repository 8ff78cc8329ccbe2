#pragma once
// The JSON report: Google Benchmark's schema (context + benchmarks[]) plus our context and
// per-entry fields. Strict JSON: non-finite numbers are dropped, never written as NaN.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fusebench {

// Writes to a temporary file in the same directory, flushes it, then renames it over `path`,
// so a reader never sees a half-written report. Creates missing parent directories.
void write_file_atomically(const std::string& path, const std::string& content);

// One Google Benchmark run as a JSON object in GBench's field names.
nlohmann::json run_to_json(const benchmark::BenchmarkReporter::Run& run);
// GBench's own context fields (date, host_name, num_cpus, caches, ...).
nlohmann::json gbench_context_to_json(const benchmark::BenchmarkReporter::Context& context);
// Removes non-finite numbers (recursively), recording each removed key in `dropped`.
nlohmann::json sanitize(const nlohmann::json& value, std::vector<std::string>* dropped = nullptr,
                        const std::string& path = "");

struct ReportInputs;

// Our context: versions, device, command line, git revision. `backend_context` comes from
// Backend::context().
nlohmann::json collect_context(const nlohmann::json& backend_context, int argc, char** argv);
std::string git_revision();
// CPU model name from /proc/cpuinfo ("unknown" elsewhere).
std::string cpu_model_name();
// Library versions known at run time: NCCL, CUPTI, cuBLASLt; each either a version string or
// "unavailable: <reason>".
nlohmann::json library_versions();

}  // namespace fusebench
