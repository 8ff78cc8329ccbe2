#pragma once
// One list of the files a run reads, one reader for them, and one check for every file it writes
// (issue 37). The rules, stated once in docs/usage.md ("Files read and written"):
//   - every input is read by read_input_file: a regular file (a fifo, a device or a directory is
//     refused, never waited on: opened with O_NONBLOCK), at most kMaxInputBytes, and registered;
//   - every JSON input is parsed by parse_input_json: at most kMaxJsonDepth levels deep (refused
//     while parsing, before anything recurses over it), optionally with no key twice in an object;
//   - every output path goes through check_output: the rules of resolve_output (output_path.hpp),
//     and never one of the registered inputs nor another output of the run, compared by device
//     and inode where the file exists (so a symlink or a hard link is the same file) and by the
//     resolved path where it does not.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fusebench/output_path.hpp"

namespace fusebench {

// Larger than any config, routing file, report or safetensors header the suite reads (a report
// of a full GPU sweep is a few MB); small enough that /dev/zero-like input cannot exhaust memory.
inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;
// The deepest real input (a report's context) nests 6 levels; nlohmann's recursive walks
// (dump, comparison, copies) are safe far beyond this.
inline constexpr int kMaxJsonDepth = 64;

// An input refused by the rules above: bad input (exit 2), naming the file and the rule.
class InputFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Who describes an input: the flag that names it ("read by --weights") is said rather than the
// reader that opened it ("a checkpoint shard").
enum class InputNamedBy { flag, reader };

// Registers `path` as read by this run, as `what` ("the routing file"). A directory (a
// checkpoint) stands for the .json and .safetensors files directly in it, as they are now.
// Thread-safe; a path registered twice is kept once.
void register_input(const std::string& what, const std::string& path,
                    InputNamedBy by = InputNamedBy::flag);

// Reads the whole of `path` (described as `what` in errors, e.g. "--routing=file:") after
// registering it. Throws InputFileError naming the path when it is not a regular file, cannot be
// opened or read, or holds more than `max_bytes` (the limit is in the message).
std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes = kMaxInputBytes);

struct JsonInputRules {
  int max_depth = kMaxJsonDepth;
  bool unique_keys = false;  // refuse a key given twice in one object (JSON keeps the last)
  // How the repeated key and its path are quoted in that message; null: the key in double
  // quotes, the path as is. (The config reader passes printable.hpp's quote_name, which also
  // escapes what a terminal would act on.)
  std::string (*quote)(std::string_view) = nullptr;
};
// Parses `text` (from `name`, for errors). Throws InputFileError for nesting deeper than
// rules.max_depth or, with unique_keys, a repeated key (naming it and where); a syntax error is
// nlohmann::json::parse_error, as from nlohmann::json::parse, for the caller to word.
nlohmann::json parse_input_json(std::string_view text, const std::string& name,
                                JsonInputRules rules = {});

// The one check for an output: resolve_output's rules (a directory, block device, socket or
// closed descriptor refused), then refused (std::invalid_argument naming both paths) when it is
// a registered input or the same file as an output checked before it in this process (two
// outputs on one character device such as /dev/null are fine). Registers it as an output and
// returns how to write it (write_output).
OutputTarget check_output(const std::string& path, const std::string& flag);

// Forgets every registered input and output: for tests that play several runs in one process.
void reset_file_registry();

}  // namespace fusebench
