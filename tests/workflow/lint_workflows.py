#!/usr/bin/env python3
"""Lints the GitHub workflows: each file against the GitHub-workflow JSON schema (check-jsonschema's
vendored copy, no network), and each `run:` script with shellcheck under the shell the runner
will use (expressions replaced by placeholders, as actionlint does). actionlint itself is not
installable here (its PyPI package downloads the binary from GitHub at build time).

  lint_workflows.py [WORKFLOW.yml ...]     # default: .github/workflows/*.yml
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import actions_runner  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main(paths):
    paths = paths or sorted(glob.glob(os.path.join(ROOT, ".github/workflows/*.y*ml")))
    if not paths:
        print("lint_workflows: no workflow files found")
        return 1
    failures = 0
    schema = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                             "vendor.github-workflows", *paths],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(schema.stdout.rstrip())
    if schema.returncode != 0:
        if "No module named check_jsonschema" in schema.stdout:
            print("lint_workflows: check-jsonschema is missing: scripts/install-deps.sh installs it")
        failures += 1
    for path in paths:
        workflow = actions_runner.load(path)
        for job_id, job in workflow.get("jobs", {}).items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" not in step:
                    continue
                where = f"{os.path.relpath(path, ROOT)}: jobs.{job_id}.steps[{i}] ({step.get('name', '')})"
                shell, _ = actions_runner._shell_template(step, job, workflow)
                if shell not in (None, "bash", "sh"):
                    print(f"{where}: shell {shell!r} not linted")
                    continue
                # Same length keeps shellcheck's columns meaningful.
                script = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), step["run"],
                                flags=re.S)
                with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
                    f.write(script)
                try:
                    check = subprocess.run(["shellcheck", "-x", "--source-path", ROOT,
                                            f"--shell={'sh' if shell == 'sh' else 'bash'}",
                                            "--severity=style", f.name],
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                except FileNotFoundError:
                    print("lint_workflows: shellcheck is missing: scripts/install-deps.sh installs it")
                    return 1
                finally:
                    os.unlink(f.name)
                if check.returncode != 0:
                    failures += 1
                    print(f"{where}: shellcheck:\n" + check.stdout.replace(f.name, "run"))
                else:
                    print(f"{where}: shellcheck ok")
    print("lint_workflows: " + ("ok" if failures == 0 else f"{failures} problem(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
