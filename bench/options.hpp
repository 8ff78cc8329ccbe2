#pragma once
// Parses fusebench's own command-line flags (Google Benchmark's --benchmark_* flags live beside
// them) into the runner's Options.
#include "runner/run_options.hpp"

namespace fusebench::bench {

// Parses argv after Google Benchmark removed its own flags and checks the values (ranges,
// duplicates, combinations). Returns -1 when the run should go on, else the exit code: 0 after
// printing help, 2 after printing "fusebench: error: ..." (rank 0 alone prints under mpirun).
int parse_options(int argc, char** argv, Options& options);

}  // namespace fusebench::bench
