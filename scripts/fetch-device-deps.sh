#!/usr/bin/env bash
# Run HERE (a Debian machine with registry access) before a device check: downloads the .deb files
# the build needs into .deps/ (ignored by git), which the device tool carries to the GPU machine,
# where nothing can be installed. About 20 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
cd .deps
rm -f ./*.deb
apt-get download libbenchmark-dev libbenchmark1debian libgtest-dev libgmock-dev nlohmann-json3-dev \
  libcli11-dev libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0 \
  libdnnl-dev libdnnl2 ocl-icd-libopencl1 2>/dev/null
ls -1 ./*.deb | wc -l | xargs echo "fetch-device-deps: debs in .deps:"
