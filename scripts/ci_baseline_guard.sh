#!/usr/bin/env bash
# A pull request that changes reports/baselines/ would be gated against its own baseline: it
# needs the `baseline-update` label (a reviewer's decision; .github/CODEOWNERS asks the
# baseline's owners). Labels come from the event ($GITHUB_EVENT_PATH).
#   scripts/ci_baseline_guard.sh BASE_SHA
set -euo pipefail
base=${1:?usage: ci_baseline_guard.sh BASE_SHA}
changed=$(git diff --name-only "$base" HEAD -- reports/baselines/ | grep -v 'README.md$' || true)
if [ -z "$changed" ]; then
  echo "ci_baseline_guard: no baseline changed"
  exit 0
fi
labels=$(python3 -c 'import json, os, sys
e = json.load(open(os.environ["GITHUB_EVENT_PATH"])) if os.environ.get("GITHUB_EVENT_PATH") else {}
print(",".join(l.get("name", "") for l in e.get("pull_request", {}).get("labels", [])))')
if [[ ",$labels," == *",baseline-update,"* ]]; then
  echo "ci_baseline_guard: baseline changed, label baseline-update present:"
  echo "$changed"
  exit 0
fi
echo "::error::this pull request changes a baseline ($(tr '\n' ' ' <<<"$changed")) without the" \
  "baseline-update label: it would be gated against itself. A reviewer who accepts the new" \
  "baseline adds the label (docs/gate.md, \"Baselines\")."
exit 1
