#!/usr/bin/env python3
"""scripts/update-baseline.sh in a scratch copy of scripts/ with the built gate: --help, bad
usage, no GPU (stops before building: cmake is a stub that records calls), CPU reports refused
without --allow-cpu, GPU reports adopted, and the GPU path (stub nvidia-smi, stub sweep binary).

  test_update_baseline.py --gate build/bin/fusebench-gate
"""
import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GATE = None
NAME = "qkv/{v}/model:qwen3-0.6b/tokens:1/tp:1/dtype:bf16/timing:batch/iterations:1/manual_time"


def ci_args():
    return subprocess.run([os.path.join(ROOT, "scripts/ci_sweep.sh"), "--args"], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()


def report(gpu=True, revision="abc1234", launches=3.0, args=None):
    context = ({"backend": "cuda", "gpu_name": "NVIDIA H200"} if gpu
               else {"backend": "cpu", "cpu_model": "AMD EPYC 7B13"})
    context["git_revision"] = revision
    # As the CI sweep's run records it (the program, its arguments, --report=).
    context["command_line"] = f"build/bin/fusebench {ci_args() if args is None else args} --report=r.json"
    benchmarks = [{"name": NAME.format(v=v), "run_name": NAME.format(v=v), "run_type": "iteration",
                   "real_time": t, "time_unit": "us", "launches": launches, "time_cv": 0.01}
                  for v, t in (("split", 10.0), ("fused", 8.0))]
    return {"context": context, "benchmarks": benchmarks}


def write_exe(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class UpdateBaseline(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fusebench_update_baseline_")
        self.tree = os.path.join(self.tmp, "tree")
        shutil.copytree(os.path.join(ROOT, "scripts"), os.path.join(self.tree, "scripts"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(self.tree, "build/bin"))
        os.symlink(os.path.abspath(GATE), os.path.join(self.tree, "build/bin/fusebench-gate"))
        self.stubs = os.path.join(self.tmp, "stubs")
        self.calls = os.path.join(self.tmp, "calls.log")
        for tool in ("cmake",):
            write_exe(os.path.join(self.stubs, tool), f'#!/bin/sh\necho "{tool} $*" >> {self.calls}\n')
        self.no_gpu()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def no_gpu(self):
        write_exe(os.path.join(self.stubs, "nvidia-smi"), f"""#!/bin/sh
echo "nvidia-smi $*" >> {self.calls}
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
""")

    def gpu(self):
        write_exe(os.path.join(self.stubs, "nvidia-smi"), f"""#!/bin/sh
echo "nvidia-smi $*" >> {self.calls}
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
""")

    def write(self, name, doc):
        path = os.path.join(self.tree, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return name

    def run_script(self, *args, path=None):
        env = dict(os.environ, PATH=path or (self.stubs + os.pathsep + os.environ["PATH"]))
        p = subprocess.run([os.path.join(self.tree, "scripts/update-baseline.sh"), *args],
                           cwd=self.tree, env=env, stdin=subprocess.DEVNULL, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        self.out = p.stdout
        return p.returncode

    def called(self):
        if not os.path.exists(self.calls):
            return ""
        with open(self.calls) as f:
            return f.read()

    def baseline(self, name):
        return os.path.join(self.tree, "reports/baselines", name)

    def test_help(self):
        for flag in ("--help", "-h"):
            self.assertEqual(self.run_script(flag), 0)
            self.assertTrue(self.out.startswith("Usage: scripts/update-baseline.sh"), self.out)
            self.assertIn("--allow-cpu", self.out)
            self.assertNotIn("set -euo", self.out)
        self.assertEqual(self.called(), "")

    def test_bad_usage_exits_2(self):
        self.assertEqual(self.run_script("--frce"), 2)
        self.assertIn("unknown option '--frce'", self.out)
        self.assertEqual(self.run_script("a.json", "b.json"), 2)
        self.assertIn("one report at a time", self.out)
        self.assertEqual(self.run_script("missing.json"), 2)
        self.assertIn("missing.json not found", self.out)

    def test_no_gpu_stops_before_building(self):
        self.assertEqual(self.run_script(), 2, self.out)
        self.assertIn("no GPU on this machine: nvidia-smi -L found no GPU (NVIDIA-SMI has failed",
                      self.out)
        self.assertIn("Nothing was built or run", self.out)
        self.assertNotIn("cmake", self.called())
        self.assertFalse(os.path.exists(os.path.join(self.tree, "reports/ci-baseline-run")))
        # No nvidia-smi at all (only where this machine has none of its own).
        system_path = os.environ["PATH"]
        if shutil.which("nvidia-smi", path=system_path) is None:
            self.assertEqual(self.run_script(path=os.path.join(self.tmp, "none") + os.pathsep
                                             + system_path), 2)
            self.assertIn("nvidia-smi is not installed", self.out)

    def test_cpu_report_refused_without_allow_cpu(self):
        name = self.write("cpu.json", report(gpu=False))
        self.assertEqual(self.run_script(name), 1, self.out)
        self.assertIn("measured on the CPU backend (AMD EPYC 7B13)", self.out)
        self.assertIn("GPU runners compare against GPU baselines", self.out)
        self.assertIn("--allow-cpu", self.out)
        self.assertFalse(os.path.exists(os.path.join(self.tree, "reports/baselines")))
        self.assertEqual(self.run_script("--allow-cpu", name), 0, self.out)
        self.assertTrue(os.path.exists(self.baseline("cpu-amd-epyc-7b13.json")))
        self.assertIn("is a CPU baseline (--allow-cpu)", self.out)

    def test_gpu_report_adopted_and_differences_shown(self):
        self.assertEqual(self.run_script(self.write("a.json", report())), 0, self.out)
        target = self.baseline("nvidia-h200.json")
        self.assertIn("wrote reports/baselines/nvidia-h200.json", self.out)
        self.assertEqual(self.run_script(self.write("b.json", report(launches=4.0))), 0, self.out)
        self.assertIn("differences from the current baseline", self.out)
        self.assertIn("CHANGED", self.out)
        with open(target) as f:
            self.assertEqual(json.load(f)["benchmarks"][0]["launches"], 4.0)

    def test_report_of_other_arguments_refused_unless_any_args(self):
        # Issue 28 case 7: a baseline with fewer token counts than the CI sweep leaves entries
        # ungated; the script refuses it, naming both argument lists.
        fewer = ci_args().replace("--tokens=1,8,64,256,1024,4096", "--tokens=1,8")
        name = self.write("few.json", report(args=fewer))
        self.assertEqual(self.run_script(name), 1, self.out)
        self.assertIn("--tokens=1,8 ", self.out)
        self.assertIn("are not the CI sweep's", self.out)
        self.assertFalse(os.path.exists(self.baseline("nvidia-h200.json")))
        self.assertEqual(self.run_script("--any-args", name), 0, self.out)

    def test_dirty_or_failed_refused_unless_force(self):
        name = self.write("dirty.json", report(revision="abc1234-dirty"))
        self.assertEqual(self.run_script(name), 1, self.out)
        self.assertIn("is not a clean commit (use --force to accept)", self.out)
        self.assertEqual(self.run_script("--force", name), 0, self.out)

    def test_gpu_path_builds_sweeps_and_adopts(self):
        self.gpu()
        doc = report()
        write_exe(os.path.join(self.tree, "build/bin/fusebench"), f"""#!/bin/sh
echo "fusebench $*" >> {self.calls}
for a in "$@"; do case "$a" in --report=*) cat > "${{a#--report=}}" <<'EOF'
{json.dumps(doc)}
EOF
;; esac; done
""")
        self.assertEqual(self.run_script(), 0, self.out)
        calls = self.called()
        self.assertIn("cmake --preset release", calls)
        self.assertIn("cmake --build --preset release", calls)
        self.assertIn("fusebench --models=qwen3-0.6b,llama3-8b", calls)
        self.assertIn("--report=reports/ci-baseline-run/report.json", calls)
        self.assertTrue(os.path.exists(self.baseline("nvidia-h200.json")), self.out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate", required=True)
    args, rest = parser.parse_known_args()
    GATE = args.gate
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
