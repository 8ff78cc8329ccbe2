#!/usr/bin/env bash
# The gate's Markdown as one comment on the pull request, updated by every later run instead of
# repeated: the comment is found by its first line, a marker (.github/workflows/gpu-regression.yml).
#   scripts/ci_pr_comment.sh OWNER/REPO PR_NUMBER GATE.md     (GH_TOKEN in the environment)
set -euo pipefail
repo=${1:?usage: ci_pr_comment.sh OWNER/REPO PR_NUMBER GATE.md}
pr=${2:?usage: ci_pr_comment.sh OWNER/REPO PR_NUMBER GATE.md}
md=${3:?usage: ci_pr_comment.sh OWNER/REPO PR_NUMBER GATE.md}
marker='<!-- fusebench-gate -->'
if [ -s "$md" ]; then
  body="$marker"$'\n'"$(cat "$md")"
else
  body="$marker"$'\n'"## fusebench gate: no result"$'\n\n'"The gate wrote no summary: see the job's log."
fi
id=$(gh api --paginate "repos/$repo/issues/$pr/comments" \
  --jq ".[] | select(.body | startswith(\"$marker\")) | .id" | head -1)
if [ -n "$id" ]; then
  gh api -X PATCH "repos/$repo/issues/comments/$id" -f body="$body" >/dev/null
  echo "ci_pr_comment: updated comment $id on #$pr"
else
  gh api -X POST "repos/$repo/issues/$pr/comments" -f body="$body" >/dev/null
  echo "ci_pr_comment: commented on #$pr"
fi
