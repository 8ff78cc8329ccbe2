#pragma once
// No output of fusebench-gate or fusebench-advise may be one of its inputs (issue 27): an output
// path that names an input file (the same file by identity: a symlink, a hard link, `./x`, an
// absolute spelling) is refused before anything is written.
#include <string>
#include <utility>
#include <vector>

namespace fusebench::advise {

// True when `a` and `b` name the same file: by device and inode when both exist (symlinks and
// hard links followed), else by their canonical spellings (`./x`, `d/../x`, a symlinked folder).
bool same_file(const std::string& a, const std::string& b);

// Throws InputError "FLAG OUTPUT is the input INPUT (the same file): ..." for the first output
// that names an input. outputs: (flag, path); empty paths are skipped.
void refuse_output_as_input(const std::vector<std::pair<std::string, std::string>>& outputs,
                            const std::vector<std::string>& inputs);

}  // namespace fusebench::advise
