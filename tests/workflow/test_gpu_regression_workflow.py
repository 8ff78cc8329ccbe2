#!/usr/bin/env python3
"""The GPU regression workflow, run here step by step as a Linux runner runs it (actions_runner):
each `run:` script under the shell the runner would use, with the workflow's, job's and step's
env, in a copy of the checkout. What needs a GPU or would rebuild the tree is stubbed:
`nvidia-smi` (prints an H200), `cmake` and `ctest` (record their arguments: the build and the
unit tests are what runs this test), scripts/install-deps.sh, and build/bin/fusebench, which
writes a crafted report instead of measuring. Everything after the sweep is real:
scripts/ci_sweep.sh, the chart scripts, and the built fusebench-gate against a crafted baseline
in reports/baselines/.

  test_gpu_regression_workflow.py --gate build/bin/fusebench-gate [--workflow FILE]

Asserts that a one-launch regression, and a lost speedup, fail the job at the gate step; that a
run without regression passes; that the workflow_dispatch threshold reaches the gate; and each
case of issue 28: what is not judged fails with exit 3 (thread mismatch, partial run), a runner
without a baseline or fallen back to the CPU fails with exit 2, a foreign baseline is refused
naming the field, renamed entries are named, the gate's own thresholds apply, entries the
baseline lacks fail; the pull-request comment is posted once and then updated, forks are not
run, a baseline change needs its label, one queue, --verify and pinned threads in the sweep, and
the outputs under $OUT, ignored by git. The runner's shell semantics are checked on their own too.
"""
import argparse
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import actions_runner  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ARGS = argparse.Namespace(gate=None, workflow=os.path.join(ROOT, ".github/workflows/gpu-regression.yml"))
JOB = "gate"
GATE_STEP = "gate"  # the step id of "Gate against the baseline"

CONTEXT = {"backend": "cuda", "gpu_name": "NVIDIA H200", "git_revision": "abc1234"}
NAME = "{op}/{variant}/model:qwen3-0.6b/tokens:{m}/tp:1/dtype:bf16/timing:batch/iterations:1/manual_time"


def entry(op, variant, m, us, launches, speedup=None):
    name = NAME.format(op=op, variant=variant, m=m)
    e = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
         "iterations": 1, "real_time": us, "cpu_time": us, "time_unit": "us", "time_cv": 0.01,
         "launches": float(launches), "model_launches": float(launches), "kernels": float(launches),
         "dram_read_bytes": 1.0e6 * m}
    if speedup:
        e.update(speedup=speedup[0], speedup_ci_low=speedup[1], speedup_ci_high=speedup[2])
    return e


def baseline_report():
    benchmarks = []
    for m in (1, 16):
        benchmarks.append(entry("qkv", "split", m, 10.0 * m, 3))
        benchmarks.append(entry("qkv", "fused", m, 8.0 * m, 1, (1.25, 1.22, 1.28)))
    return {"context": CONTEXT, "benchmarks": benchmarks}


def write_exe(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class Checkout:
    """A workspace as actions/checkout leaves it (the tracked and new files of this tree), with
    the GPU-only and build steps' commands stubbed."""

    def __init__(self, tmp, current, baseline):
        self.tmp = tmp
        self.ws = os.path.join(tmp, "workspace")
        self.stubs = os.path.join(tmp, "stubs")
        self.log = os.path.join(tmp, "stub_calls.log")
        files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "-co", "--exclude-standard"],
                               check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
        for rel in filter(None, files):
            src = os.path.join(ROOT, rel)
            if os.path.isfile(src) and not rel.startswith(".github/"):
                dst = os.path.join(self.ws, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
        wf = os.path.join(self.ws, ".github/workflows", os.path.basename(ARGS.workflow))
        os.makedirs(os.path.dirname(wf), exist_ok=True)
        shutil.copy2(ARGS.workflow, wf)
        self.workflow = wf
        # Baselines of the real tree are not this test's: only the crafted one (or none).
        shutil.rmtree(os.path.join(self.ws, "reports/baselines"), ignore_errors=True)
        if baseline:
            os.makedirs(os.path.join(self.ws, "reports/baselines"))
            with open(os.path.join(self.ws, "reports/baselines/nvidia-h200.json"), "w") as f:
                json.dump(baseline, f)
        self.current = os.path.join(tmp, "current.json")
        with open(self.current, "w") as f:
            json.dump(current, f)
        log = self.log
        write_exe(os.path.join(self.stubs, "nvidia-smi"), f"""#!/bin/sh
echo "nvidia-smi $*" >> {log}
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *--query-gpu=name\ --format=csv,noheader*) echo "NVIDIA H200" ;;
  *--query-gpu*) echo "name, driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz]"
                 echo "NVIDIA H200, 580.65.06, 1980 MHz, 1980 MHz" ;;
esac
""")
        for tool in ("cmake", "ctest"):
            write_exe(os.path.join(self.stubs, tool), f'#!/bin/sh\necho "{tool} $*" >> {log}\n')
        # gh: records its calls; lists the comment of a previous run when comment_id exists.
        self.comment_id = os.path.join(tmp, "comment_id")
        write_exe(os.path.join(self.stubs, "gh"), f"""#!/bin/sh
echo "gh $*" >> {log}
case "$*" in
  *--jq*) [ -f {self.comment_id} ] && cat {self.comment_id} ;;
esac
exit 0
""")
        write_exe(os.path.join(self.ws, "scripts/install-deps.sh"),
                  f'#!/bin/sh\necho "install-deps.sh $*" >> {log}\n')
        # The sweep: writes the crafted report where --report= says, as fusebench would.
        write_exe(os.path.join(self.ws, "build/bin/fusebench"), f"""#!/bin/sh
echo "fusebench $*" >> {log}
for a in "$@"; do case "$a" in --report=*) cp {self.current} "${{a#--report=}}" ;; esac; done
echo "fusebench (stub): crafted report written"
""")
        os.symlink(os.path.abspath(ARGS.gate), os.path.join(self.ws, "build/bin/fusebench-gate"))

    def run(self, **kw):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "RUNNER_", "CTEST_", "FUSEBENCH_"))}
        env["PATH"] = self.stubs + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        uploaded = {}

        def checkout(step, env):
            return True, "workspace laid out by the test"

        def upload(step, env):
            paths = step.get("with", {}).get("path", "").replace("${{ env.OUT }}", env["OUT"]).split()
            uploaded.update({p: os.path.exists(os.path.join(self.ws, p)) for p in paths if "*" not in p})
            return True, f"would upload {paths}"

        result = actions_runner.run_job(
            self.workflow, JOB, self.ws, os.path.join(self.tmp, "runner_temp"),
            actions={"actions/checkout": checkout, "actions/upload-artifact": upload},
            base_env=env, **kw)
        result.uploaded = uploaded
        return result

    def calls(self):
        return actions_runner._read(self.log) if os.path.exists(self.log) else ""


class Workflow(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fusebench_workflow_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def job(self, current, baseline=None, **kw):
        co = Checkout(self.tmp, current, baseline_report() if baseline is None else baseline)
        result = co.run(**kw)
        return co, result

    def assertFailsAtGate(self, result, code=1):
        failed = result.first_failure()
        self.assertEqual(result.conclusion, "failure", result.log())
        self.assertIsNotNone(failed, result.log())
        self.assertEqual(failed.id, GATE_STEP, "the job must fail at the gate step\n" + result.log())
        self.assertEqual(failed.returncode, code, result.log())
        return failed.output

    def test_one_launch_regression_fails_the_job_at_the_gate(self):
        current = baseline_report()
        current["benchmarks"][1]["launches"] += 1  # qkv/fused at 1 token: one launch more
        co, result = self.job(current)
        self.assertFailsAtGate(result)
        gate = result.step(GATE_STEP)
        self.assertIn("CHANGED", gate.output)
        self.assertIn("launches", gate.output)
        self.assertIn("## fusebench gate: FAIL", result.summary)
        # The steps before it ran, with the stubs; the upload (if: always()) still runs.
        # (The baseline guard runs on pull requests only.)
        self.assertEqual([s.outcome for s in result.steps[:6]],
                         ["success", "success", "skipped", "success", "success", "success"],
                         result.log())
        self.assertIn("nvidia-smi -L", co.calls())
        self.assertIn("fusebench --models=qwen3-0.6b,llama3-8b", co.calls())
        self.assertEqual(result.steps[-1].outcome, "success", result.log())
        out = os.path.join(self.tmp, "runner_temp/fusebench-ci-out")
        self.assertTrue(result.uploaded.get(out + "/gate.txt"), result.uploaded)
        with open(os.path.join(out, "gate.txt")) as f:
            self.assertIn("FAIL", f.read())
        self.assertFalse(os.path.exists(os.path.join(co.ws, "ci-out")))  # $OUT, not the checkout

    def test_lost_speedup_fails_the_job_at_the_gate(self):
        current = baseline_report()
        current["benchmarks"][3].update(speedup=1.05, speedup_ci_low=1.02, speedup_ci_high=1.08)
        _, result = self.job(current)
        self.assertFailsAtGate(result)
        self.assertIn("LOST", result.step(GATE_STEP).output)

    def test_no_regression_passes(self):
        current = baseline_report()
        for b in current["benchmarks"]:
            b["real_time"] *= 1.02  # within the 5% threshold
        _, result = self.job(current)
        self.assertEqual(result.conclusion, "success", result.log())
        self.assertIn("PASS", result.step(GATE_STEP).output)
        self.assertIn("## fusebench gate: PASS", result.summary)
        self.assertEqual(result.steps[-1].outcome, "success")

    def test_no_baseline_for_this_gpu_fails(self):
        # --require-baseline: a runner without a baseline is an error, never a silent pass.
        _, result = self.job(baseline_report(), baseline=False)
        out = self.assertFailsAtGate(result, 2)
        self.assertIn("reports/baselines/nvidia-h200.json: no baseline (--require-baseline)", out)
        self.assertIn("## fusebench gate: unusable input", result.summary)

    def test_a_runner_fallen_back_to_the_cpu_fails(self):
        # Issue 28 case 3: a CPU-only build ran the CPU; the GPU's baseline refuses it.
        current = baseline_report()
        current["context"] = {"backend": "cpu", "cpu_model": "AMD EPYC", "git_revision": "abc1234"}
        out = self.assertFailsAtGate(self.job(current)[1], 2)
        self.assertIn("backend mismatch: ", out)

    def test_thread_mismatch_and_partial_runs_are_not_judged(self):
        # Issue 28 cases 1 and 2: exit 3, never PASS.
        base, current = baseline_report(), baseline_report()
        base["context"] = dict(CONTEXT, cpu_threads={"threads": 2})
        current["context"] = dict(CONTEXT, cpu_threads={"threads": 1})
        for b in current["benchmarks"]:
            b["real_time"] *= 1.9
        out = self.assertFailsAtGate(self.job(current, base)[1], 3)
        self.assertIn("NOT JUDGED (time, speedup and advice rules off: the reports ran with "
                      "different CPU thread counts", out)
        shutil.rmtree(self.tmp)
        os.makedirs(self.tmp)
        partial = baseline_report()
        partial["context"] = dict(CONTEXT, interrupted=True)
        _, result = self.job(partial)
        out = self.assertFailsAtGate(result, 3)
        self.assertIn("NOT JUDGED (the current report is partial", out)
        self.assertIn("## fusebench gate: NOT JUDGED", result.summary)

    def test_a_foreign_baseline_is_refused_naming_the_field(self):
        # Issue 28 case 4: a baseline of another driver changes timing: exit 2, the field named.
        base = baseline_report()
        base["context"] = dict(CONTEXT, cuda_driver_version=12080)
        current = baseline_report()
        current["context"] = dict(CONTEXT, cuda_driver_version=13000)
        out = self.assertFailsAtGate(self.job(current, base)[1], 2)
        self.assertIn("driver mismatch: ", out)

    def test_renamed_entries_and_new_entries_fail_naming_why(self):
        # Issue 28 cases 5 and 7: renamed entries are named; entries the baseline lacks fail.
        current = baseline_report()
        for b in current["benchmarks"]:
            b["name"] = b["run_name"] = b["name"].replace("/tp:1", "/layer:attention/tp:1")
        current["context"] = dict(CONTEXT, entry_naming_version=1)
        out = self.assertFailsAtGate(self.job(current)[1])
        self.assertIn("(renamed? the current report has qkv/split/model:qwen3-0.6b/tokens:1/layer:attention", out)
        self.assertIn("the reports' entry naming versions differ", out)
        self.assertIn("NEW ", out)

    def test_the_gate_uses_its_device_aware_threshold(self):
        # Issue 28 case 6: no --time-threshold unless a manual run gives one.
        _, result = self.job(baseline_report())
        self.assertEqual(result.conclusion, "success", result.log())
        self.assertIn("threshold 5.0% per entry, 5.0% for the geometric mean of all (the GPU default", result.step(GATE_STEP).output)

    def test_pull_request_comment_is_posted_once_then_updated(self):
        event = {"pull_request": {"number": 7, "labels": [], "base": {"sha": "HEAD"},
                                  "head": {"repo": {"full_name": "fusebench/fusebench"}}}}
        co = Checkout(self.tmp, baseline_report(), baseline_report())
        subprocess.run(["git", "init", "-q", co.ws], check=True)
        result = co.run(event_name="pull_request", event=event)
        self.assertEqual(result.conclusion, "success", result.log())
        self.assertIn("gh api -X POST repos/fusebench/fusebench/issues/7/comments", co.calls())
        self.assertIn("<!-- fusebench-gate -->", co.calls())
        with open(co.comment_id, "w") as f:
            f.write("4242\n")
        result = co.run(event_name="pull_request", event=event)
        self.assertIn("gh api -X PATCH repos/fusebench/fusebench/issues/comments/4242", co.calls())
        self.assertEqual(co.calls().count("-X POST"), 1, co.calls())
        # A push has no pull request: no comment.
        self.assertEqual(result.step("Comment on the pull request").outcome, "success")

    def test_pull_requests_from_forks_do_not_run(self):
        event = {"pull_request": {"number": 8, "labels": [], "base": {"sha": "HEAD"},
                                  "head": {"repo": {"full_name": "someone/fork"}}}}
        co = Checkout(self.tmp, baseline_report(), baseline_report())
        result = co.run(event_name="pull_request", event=event)
        self.assertEqual(result.conclusion, "skipped", result.log())
        self.assertEqual(result.steps, [])
        self.assertEqual(co.calls(), "")

    def test_a_baseline_change_needs_the_label(self):
        co = Checkout(self.tmp, baseline_report(), baseline_report())
        git = ["git", "-C", co.ws, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git[:3] + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-qm", "base"], check=True)
        base_sha = subprocess.run(git + ["rev-parse", "HEAD"], check=True, stdout=subprocess.PIPE,
                                  text=True).stdout.strip()
        with open(os.path.join(co.ws, "reports/baselines/nvidia-h200.json"), "a") as f:
            f.write("\n")
        subprocess.run(git + ["commit", "-qam", "new baseline"], check=True)
        event = {"pull_request": {"number": 9, "labels": [], "base": {"sha": base_sha},
                                  "head": {"repo": {"full_name": "fusebench/fusebench"}}}}
        result = co.run(event_name="pull_request", event=event)
        self.assertEqual(result.first_failure().name, "Baseline changes need review", result.log())
        self.assertIn("without the baseline-update label", result.first_failure().output)
        event["pull_request"]["labels"] = [{"name": "baseline-update"}]
        result = co.run(event_name="pull_request", event=event)
        self.assertEqual(result.conclusion, "success", result.log())

    def test_one_queue_verify_pinned_threads_and_ignored_outputs(self):
        wf = actions_runner.load(ARGS.workflow)
        self.assertEqual(wf["concurrency"], {"group": "gpu-regression", "cancel-in-progress": False})
        with open(ARGS.workflow) as f:
            self.assertIn("CUDA toolkit", f.read())  # the prerequisites, listed
        co, result = self.job(baseline_report())
        sweep = [c for c in co.calls().splitlines() if c.startswith("fusebench ")]
        self.assertEqual(len(sweep), 1, co.calls())
        self.assertIn("--cpu-threads=1", sweep[0])
        self.assertIn("--verify", sweep[0])
        for path in ("ci-out/report.json", "reports/ci-baseline-run/report.json"):
            ignored = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", path])
            self.assertEqual(ignored.returncode, 0, path + " is not ignored by git")

    def test_dispatch_threshold_reaches_the_gate(self):
        current = baseline_report()
        for b in current["benchmarks"]:
            b["real_time"] *= 1.2
        _, pushed = self.job(current)
        self.assertFailsAtGate(pushed)  # 20% slower > the default 5%
        shutil.rmtree(self.tmp)
        os.makedirs(self.tmp)
        _, dispatched = self.job(current, event_name="workflow_dispatch",
                                 event={"inputs": {"time_threshold": "50"}},
                                 inputs={"time_threshold": "50"})
        self.assertEqual(dispatched.conclusion, "success", dispatched.log())
        self.assertIn("threshold 50.0% per entry", dispatched.step(GATE_STEP).output)


class RunnerSemantics(unittest.TestCase):
    """actions_runner itself: the defect this test exists for must be reproducible by it."""

    def run_steps(self, workflow):
        with tempfile.TemporaryDirectory() as tmp:
            return actions_runner.run_job(copy.deepcopy(workflow), "j", tmp, os.path.join(tmp, "t"))

    def test_unspecified_shell_has_no_pipefail(self):
        step = {"run": "false | tee /dev/null"}
        self.assertEqual(self.run_steps({"jobs": {"j": {"steps": [step]}}}).conclusion, "success")
        self.assertEqual(self.run_steps({"jobs": {"j": {"steps": [dict(step, shell="bash")]}}})
                         .conclusion, "failure")
        for scope in ("workflow", "job"):
            wf = {"jobs": {"j": {"steps": [step]}}}
            (wf if scope == "workflow" else wf["jobs"]["j"])["defaults"] = {"run": {"shell": "bash"}}
            self.assertEqual(self.run_steps(wf).conclusion, "failure", scope)
        # -e either way: a failing command in the middle fails the step.
        self.assertEqual(self.run_steps({"jobs": {"j": {"steps": [{"run": "false\ntrue"}]}}})
                         .conclusion, "failure")

    def test_later_steps_skip_after_a_failure_unless_always(self):
        wf = {"jobs": {"j": {"steps": [{"run": "exit 3"}, {"run": "true"},
                                       {"if": "always()", "run": "true"},
                                       {"if": "${{ failure() }}", "run": "true"}]}}}
        r = self.run_steps(wf)
        self.assertEqual([s.outcome for s in r.steps], ["failure", "skipped", "success", "success"])
        self.assertEqual(r.steps[0].returncode, 3)

    def test_env_outputs_and_expressions(self):
        wf = {"env": {"A": "wf"}, "jobs": {"j": {"env": {"B": "job"}, "steps": [
            {"id": "s", "run": 'echo "x=$A-$B-$C" >> "$GITHUB_OUTPUT"', "env": {"C": "${{ 'st' }}"}},
            {"run": 'test "${{ steps.s.outputs.x }}" = wf-job-st'}]}}}
        r = self.run_steps(wf)
        self.assertEqual(r.conclusion, "success", r.log())
        with self.assertRaises(actions_runner.WorkflowError):
            self.run_steps({"jobs": {"j": {"steps": [{"run": "echo ${{ secrets.TOKEN }}"}]}}})
        with self.assertRaises(actions_runner.WorkflowError):
            self.run_steps({"jobs": {"j": {"steps": [{"run": "echo ${{ hashFiles('x') }}"}]}}})


class Lint(unittest.TestCase):
    """lint_workflows.py (run on the real workflows by its own ctest entry) can fail."""

    def test_bad_workflow_is_reported(self):
        import contextlib
        import io

        import lint_workflows
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.yml")
            with open(bad, "w") as f:
                f.write("on: push\njobs:\n  j:\n    runs_on: linux\n    steps:\n"
                        "      - run: rm -rf $DIR/*\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = lint_workflows.main([bad])
        self.assertEqual(rc, 1, out.getvalue())
        self.assertIn("runs_on", out.getvalue())  # the schema: an unknown key, runs-on missing
        self.assertIn("SC2115", out.getvalue())  # shellcheck: rm -rf "$DIR/*" may be /*


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gate", required=True, help="the built fusebench-gate")
    parser.add_argument("--workflow", default=ARGS.workflow, help="workflow file to run")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
