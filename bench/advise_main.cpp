// fusebench-advise REPORT.json [MORE.json ...]: the dispatch table (docs/advise.md).
#include <iostream>

#include "fusebench/advise.hpp"

int main(int argc, char** argv) {
  return fusebench::advise::run_cli(argc, argv, std::cout, std::cerr);
}
