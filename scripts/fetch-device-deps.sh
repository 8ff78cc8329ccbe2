#!/usr/bin/env bash
# Run HERE (a Debian machine with registry access) before a device check: downloads the .deb files
# the build needs into .deps/ (ignored by git), which the device tool carries to the GPU machine,
# where nothing can be installed. No oneDNN: the device build turns it off (only the CPU backend
# uses it, and it would bring libgomp and libOpenCL along).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
cd .deps
rm -f ./*.deb
apt-get download libbenchmark-dev libbenchmark1debian libgtest-dev libgmock-dev nlohmann-json3-dev \
  libcli11-dev libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0 \
  2>/dev/null
find . -maxdepth 1 -name '*.deb' | wc -l | xargs echo "fetch-device-deps: debs in .deps:"
