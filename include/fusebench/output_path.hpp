#pragma once
// One rule for every file a fusebench binary writes (a report, a summary, advice), so that an
// output path never destroys what it names (issue 27):
//   - a regular file, or a path that does not exist yet, is written atomically: a temporary file
//     beside it, then renamed over it;
//   - a symlink is followed to its final target, which is then written as above (the link stays
//     a link; a dangling link's target is created);
//   - "-", /dev/stdout, /dev/stderr and /dev/fd/N (or /proc/self/fd/N) go to that descriptor,
//     and a fifo or a character device (/dev/null, a terminal) is opened and streamed to:
//     written once, at the end, and not atomically (said in `note`); opened with O_NONBLOCK,
//     so a fifo without a reader is an error (ENXIO), never a wait with signals masked;
//   - a directory, a block device or a socket is refused, naming the path and what is valid.
// Nothing that is not a regular file is ever replaced.
#include <string>
#include <utility>
#include <vector>

namespace fusebench {

struct OutputTarget {
  std::string given;    // the path as the user gave it
  std::string path;     // where it is written: the symlink's final target, or `given`
  int fd = -1;          // >= 0: written to this open descriptor ("-", /dev/stdout, ...)
  bool atomic = true;   // false: a stream (a descriptor, fifo or character device)
  bool exists = false;  // the (final) path exists already
  std::string note;     // for stderr: how it is written when not plainly ("" when plainly)
};

// Classifies `path` (given as `flag`=path) by the rule above; throws std::invalid_argument naming
// the value and what is valid for a directory, a block device, a socket, a closed descriptor or
// a symlink loop. Creates nothing.
OutputTarget resolve_output(const std::string& path, const std::string& flag);

// Writes `content` to `target`: atomically for a regular file (its mode kept when it existed),
// else in one stream. Throws std::runtime_error with the reason when the write fails.
void write_output(const OutputTarget& target, const std::string& content);

// Appends `content` to `target` (created when absent, never truncated: GitHub's step summary has
// several writers), opened as write_output opens a stream. Throws std::runtime_error with the
// reason when the open or a write fails.
void append_output(const OutputTarget& target, const std::string& content);

// Refuses (std::invalid_argument naming both) an output that is one of the inputs (the same
// comparison as check_output, input_files.hpp, on a list of its own): `inputs`
// holds {what, path} pairs ("the baseline report", "base.json"); a directory (a checkpoint)
// stands for the .json and .safetensors files directly in it.
// Compared by file identity (device and inode) where both exist, and by their resolved paths,
// so "./x", "x" and a symlink to x are one file.
void refuse_output_over_input(const std::string& output, const std::string& flag,
                              const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace fusebench
