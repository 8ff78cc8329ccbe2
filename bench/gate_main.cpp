// fusebench-gate BASELINE.json CURRENT.json: the regression gate (rules in docs/gate.md).
#include <iostream>

#include "fusebench/gate.hpp"

int main(int argc, char** argv) {
  return fusebench::gate::run_cli(argc, argv, std::cout, std::cerr);
}
