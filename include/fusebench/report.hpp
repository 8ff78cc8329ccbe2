#pragma once
// The JSON report: Google Benchmark's schema (context + benchmarks[]) plus our context and
// per-entry fields. Strict JSON: non-finite numbers are dropped, never written as NaN.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fusebench {

// Writes `content` by the output rule (output_path.hpp): a regular file (or a symlink's target)
// through a temporary file in the same directory, flushed, then renamed over it, so a reader
// never sees a half-written report; a descriptor, fifo or device streamed to. Creates missing
// parent directories.
void write_file_atomically(const std::string& path, const std::string& content);

// Checks, before anything is measured, that a report can be written at `path` (given as
// `flag`=path): throws std::invalid_argument naming the value and what is valid when it is a
// directory (or ends in '/'), when a part of its parent is not a directory, or when the parent
// directory is not writable. Missing parent directories are created; returns the ones created
// (outermost first, empty: none) so the caller can say so.
std::vector<std::string> prepare_report_path(const std::string& path, const std::string& flag);

// One Google Benchmark run as a JSON object in GBench's field names.
nlohmann::json run_to_json(const benchmark::BenchmarkReporter::Run& run);
// GBench's own context fields (date, host_name, num_cpus, caches, ...).
nlohmann::json gbench_context_to_json(const benchmark::BenchmarkReporter::Context& context);
// "release" or "debug" as the Google Benchmark library itself reports it (its NDEBUG, not ours:
// Debian's libbenchmark says "debug").
std::string gbench_library_build_type(const benchmark::BenchmarkReporter::Context& context);
// Removes non-finite numbers (recursively), recording each removed key in `dropped`.
nlohmann::json sanitize(const nlohmann::json& value, std::vector<std::string>* dropped = nullptr,
                        const std::string& path = "");

struct ReportInputs;

// Our context: versions, device, command line, git revision, host cache, build type.
// `backend_context` comes from Backend::context(); `args` is the command line as given
// (Google Benchmark's flags included), shell-quoted into context.command_line.
nlohmann::json collect_context(const nlohmann::json& backend_context,
                               const std::vector<std::string>& args);
// `arg` as a POSIX shell word: unchanged when it needs no quoting, else in single quotes.
std::string shell_quote(const std::string& arg);
std::string git_revision();
// CPU model name from /proc/cpuinfo ("unknown" elsewhere).
std::string cpu_model_name();
// Library versions known at run time: NCCL, CUPTI, cuBLASLt; each either a version string or
// "unavailable: <reason>".
nlohmann::json library_versions();

}  // namespace fusebench
