#!/usr/bin/env python3
"""The device check's plan: each step's cap against an estimate made from its own work.

scripts/device-check.sh --plan writes its steps (stage, name, cap, kind, arguments) one per line,
tab-separated, and runs this on them. The work is counted, not guessed: the fixtures, comparison
groups, distinct workspaces and their bytes come from the suite itself
(`fusebench --list --list-for=cuda --list-bytes` with the step's own arguments: the sweep a GPU
run forms, each fixture's buffer bytes from its plan); the GPU tests from the test binaries'
`--gtest_list_tests` under each item's filter (BINARY[:FILTER]), the heaviest at the host share
a timed CPU run of the same cases measured (MEASURED_TEST_S, `--time-references`); the build from
`ninja -t commands` of the targets the check builds. The
rates that turn work into seconds are below, each with where it comes from; the first GPU run
records each step's real time in gpu.txt, which is what to correct them with.

Exit status: 0 when every estimate fits its cap, stage 1's caps fit STAGE1_LIMIT_S, all caps fit
TOTAL_LIMIT_S and the budget, and a rerun of stage 1 fits the session's device time; else 1.
"""
import argparse
import collections
import os
import re
import resource
import shlex
import subprocess
import sys

STAGE1_LIMIT_S = 240  # issue 21: stage 1 in at most 4 minutes
TOTAL_LIMIT_S = 420   # issue 21: the whole check in at most 7 minutes
DEVICE_TIME_S = 900   # the session's device time (the device tool's README: 15 minutes)
MACHINE_START_S = 120  # a start costs 1-2 minutes of it (the device tool's README), per start

# Rates (seconds). Measured where a source is given; the others are assumptions to correct from
# the first run's step times (gpu.txt).
PREPARE_S_PER_GB = 2.2    # measured here (issue 21's dry run): a llama3-8b gate_up workspace,
                          # 235 MB of random bf16 weights, took 0.5 s to prepare
UPLOAD_S_PER_GB = 0.05    # assumed: pageable host-to-device copies at about 20 GB/s
PROCESS_START_S = 5.0     # assumed: CUDA context, cuBLASLt handle, the measured ceilings
GROUP_OVERHEAD_S = 0.05   # assumed: warm-up run, graph capture, algorithm timing per group
COUNTER_S_PER_FIXTURE = 0.25  # assumed: launch-count (2 runs under CUPTI) and DRAM passes
GRAPH_COUNT_S = 0.05      # assumed: the extra launch-count pass of each graph entry
TP_REPORT_S = 0.1         # assumed: the TP compute/communication pass per fixture
REFERENCE_S = 0.25        # the float64 reference's budget per shape (src/runner/verification.hpp:
                          # kReferenceMacBudget, "about a quarter of a second on one host core")
GTEST_BINARY_S = 2.0      # assumed: process and CUDA context per test binary
GTEST_TEST_S = 0.75       # assumed: per GPU test (small shapes: tiny models, <= 1000 tokens)
# The GPU tests whose time is mostly the host's (random weights, their quantization, float64
# references): each one's seconds measured by a timed CPU
# run of the same cases (`scripts/device_plan.py --time-references`: the test binary with
# FUSEBENCH_GPU_TESTS_ON_CPU=1, tests/gpu_test_backend.hpp), as its process's CPU time (user +
# sys, so another build loading the machine does not inflate it; the CPU backend's GEMMs stand in
# for the device's, an upper bound of the host's share), x HOST_MARGIN for a slower host core.
# Measured here on the 2-core AMD EPYC machine (load about 10: 28.6, 61.9 and 32.9 s wall for the
# 11.3, 9.6 and 5.3 s of CPU) before the GPU's first run; gpu.txt's step times correct them.
HOST_MARGIN = 1.5
MEASURED_TEST_S = {
    "GpuQuant.QuantizeKernelsMatchTheHostBitForBit": 0.2,
    "GpuQuant.Fp8VariantsMatchTheirDequantizedReference": 11.3,
    "GpuQuant.BlockFp8AndInt8VariantsMatchTheirDequantizedReference": 9.6,
    "GpuMoe.EveryVariantVerifiesOnTheDevice": 5.3,
}
TIMED_BINARIES = {"GpuQuant": "test_correctness", "GpuMoe": "test_moe"}
NCU_REGION_S = 10.0       # assumed: ncu start, kernel replay per metric pass, one region
TORCH_IMPORT_S = 8.0      # assumed: python3 -c "import torch" and CUDA init
TORCH_SAMPLE_S = 0.0003   # assumed: one cold sample (2x L2 flush read + F.linear + sync)
BUILD_CONFIGURE_S = 20.0  # assumed: CMake configure with CUDA language checks
BUILD_CXX_S = 8.0         # measured here, CCACHE_DISABLE, a quiet fresh Release build on 2 cores
                          # (2026-12-05, after the op-descriptor redesign split the larger units):
                          # 3.0 s the mean src/ unit (-O3), 4.2 s the mean tests/ unit (-O1);
                          # twice the larger, rounded up, for a device CPU we have not timed
BUILD_LONGEST_S = 22.0    # the longest unit, twice bench/options.cpp's 10.6 s measured with it
BUILD_CUDA_S = 15.0       # measured here: 5 s for src/backends/cuda_kernels.cu (sm_90), x3
BUILD_LINK_S = 2.0        # assumed: one link
BUILD_LINK_TAIL_S = 5.0   # assumed: the links after the last compile
BUILD_JOBS = 16           # the device machine's cores
SUMMARY_S = 5.0           # assumed: the summaries (python3 over the reports) and the bundle
SETUP_S = 3.0             # assumed: dpkg -x of .deps and nvidia-smi, plus 1 s per 50 MB of .debs

TIMING_SEGMENT = re.compile(r"/timing:[^/]+")


def run_list(binary, args):
    """[(name, bytes, group_key, group_data_key)] of the sweep these arguments form on a GPU."""
    # --verify runs nothing in a listing, and fusebench refuses the pair (issue 27): dropped here.
    listed = [a for a in args if a != "--verify"]
    cmd = [binary, "--list", "--list-for=cuda", "--list-bytes", "--backend=cpu"] + listed
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    rows = []
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            rows.append((parts[0], int(parts[1]), parts[2], parts[3]))
    if not rows:
        raise RuntimeError(f"{' '.join(cmd)} listed no fixture")
    return rows


def flag(args, name, default=None):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def sweep_estimate(binary, args, kind):
    """(seconds, work text) of one fusebench run: prepares, verification, timing, counters."""
    rows = run_list(binary, args)
    fixtures = len(rows)
    groups = collections.Counter(r[2] for r in rows)
    data = {}  # one workspace per member and shape: the regimes of a fixture share it
    for name, nbytes, _, _ in rows:
        data[TIMING_SEGMENT.sub("", name)] = nbytes
    shapes = {r[3] for r in rows}
    graph_entries = sum(1 for r in rows if "/timing:graph" in r[0])
    blocks = int(flag(args, "--timing-blocks", "1"))
    max_time = float(flag(args, "--timing-max-time", "1"))  # the GPU default (README)
    gb = sum(data.values()) / 1e9
    prepare_gb = gb * blocks  # every block makes its members' workspaces afresh
    verify = "--verify" in args
    counters = flag(args, "--launch-counts", "on") == "on" or flag(args, "--dram-counters", "on") == "on"
    seconds = PROCESS_START_S
    seconds += prepare_gb * (PREPARE_S_PER_GB + UPLOAD_S_PER_GB)
    if verify:  # its own workspaces of every variant, and one reference per shape
        seconds += gb * (PREPARE_S_PER_GB + UPLOAD_S_PER_GB) + len(shapes) * REFERENCE_S
    # The stopping rule's timeout is the upper bound: a group of k members gets k x max time.
    timing = sum(members * max_time for members in groups.values())
    seconds += timing + len(groups) * blocks * GROUP_OVERHEAD_S
    if counters:
        seconds += len(data) * COUNTER_S_PER_FIXTURE + graph_entries * GRAPH_COUNT_S
    if kind == "tp":
        seconds += len(data) * TP_REPORT_S
    work = (f"{fixtures} entries, {len(groups)} groups, {len(data)} workspaces x {blocks} "
            f"block(s) = {prepare_gb:.2f} GB to prepare{', verify ' + str(len(shapes)) + ' shapes' if verify else ''}"
            f", timing <= {timing:.0f} s")
    return seconds, work


def gtest_item(item):
    """(binary, gtest filter) of a GPU-test step's item: binary[:filter], by default *Gpu*."""
    binary, _, filt = item.partition(":")
    return binary, filt or "*Gpu*"


def list_tests(build_dir, binary, filt):
    path = os.path.join(build_dir, "bin", binary)
    p = subprocess.run([path, "--gtest_list_tests", f"--gtest_filter={filt}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{path} --gtest_list_tests failed ({p.returncode})")
    tests, suite = [], ""
    for line in p.stdout.splitlines():
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            tests.append(suite + line.split("#")[0].strip())
    return tests


def gtest_estimate(build_dir, items):
    """One process per item; each test GTEST_TEST_S, or its measured host share (MEASURED_TEST_S)."""
    seconds, tests, counted = 0.0, 0, []
    for item in items:
        binary, filt = gtest_item(item)
        names = list_tests(build_dir, binary, filt)
        tests += len(names)
        seconds += GTEST_BINARY_S
        for name in names:
            measured = MEASURED_TEST_S.get(name)
            seconds += GTEST_TEST_S if measured is None else measured * HOST_MARGIN
        counted.append(f"{binary} {len(names)}")
    return seconds, f"{tests} GPU tests ({', '.join(counted)})"


def time_references(build_dir):
    """The timed CPU run of the heaviest GPU tests' cases (MEASURED_TEST_S): each test alone, its
    process's CPU time (user + sys: the work, whatever else loads the machine; its wall time is
    printed beside it), as the dictionary to paste above."""
    env = dict(os.environ, FUSEBENCH_GPU_TESTS_ON_CPU="1")
    measured = {}
    for name in MEASURED_TEST_S:
        binary = os.path.join(build_dir, "bin", TIMED_BINARIES[name.split(".")[0]])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([binary, f"--gtest_filter={name}", "--gtest_color=no"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        m = re.search(r"\[ +(?:OK|FAILED) +\] " + re.escape(name) + r" \((\d+) ms\)", p.stdout)
        if m is None:
            raise RuntimeError(f"{binary} --gtest_filter={name}: no time in its output:\n{p.stdout[-2000:]}")
        measured[name] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"{name}: {measured[name]:.1f} s CPU, {int(m.group(1)) / 1000:.1f} s wall "
              f"(exit {p.returncode})", file=sys.stderr)
    print("MEASURED_TEST_S = {")
    for name, s in measured.items():
        print(f'    "{name}": {s:.1f},')
    print("}")
    return 0


def build_estimate(build_dir, targets):
    p = subprocess.run(["ninja", "-C", build_dir, "-t", "commands"] + targets,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"ninja -t commands failed in {build_dir}: {p.stderr.strip()}")
    cuda = cxx = link = 0
    for line in p.stdout.splitlines():
        if " -c " not in line and " -o " in line:
            link += 1
        elif "nvcc" in line:
            cuda += 1
        elif " -c " in line:
            cxx += 1
    cpu_s = cxx * BUILD_CXX_S + cuda * BUILD_CUDA_S + link * BUILD_LINK_S
    # The units run BUILD_JOBS at a time, never faster than the longest; the last links wait.
    seconds = BUILD_CONFIGURE_S + max(cpu_s / BUILD_JOBS, BUILD_LONGEST_S) + BUILD_LINK_TAIL_S
    return seconds, f"{cxx} C++ + {cuda} CUDA units, {link} links on {BUILD_JOBS} jobs"


def setup_estimate(deps_dir):
    size = 0
    n = 0
    if os.path.isdir(deps_dir):
        for f in os.listdir(deps_dir):
            if f.endswith(".deb"):
                n += 1
                size += os.path.getsize(os.path.join(deps_dir, f))
    return SETUP_S + size / 50e6, f"{n} .debs, {size / 1e6:.1f} MB to unpack"


def estimate(kind, args, opts):
    if kind in ("sweep", "tp", "blocks"):
        return sweep_estimate(opts.bin, args, kind)
    if kind == "gtest":
        return gtest_estimate(opts.build_dir, args)
    if kind == "build":
        return build_estimate(opts.build_dir, args)
    if kind == "setup":
        return setup_estimate(opts.deps)
    if kind == "ncu":
        regions = len(args)
        return regions * NCU_REGION_S, f"{regions} regions"
    if kind == "torch":  # scripts/torch_linear_baseline.py: one shape per model and token count
        shapes = len(flag(args, "--models").split(",")) * len(flag(args, "--tokens").split(","))
        samples = int(flag(args, "--samples"))
        return (TORCH_IMPORT_S + shapes * (samples + 10) * TORCH_SAMPLE_S,
                f"{shapes} shapes x {samples} samples")
    if kind == "summary":
        return SUMMARY_S, "summaries and the bundle"
    raise ValueError(f"unknown step kind {kind!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("steps", nargs="?", help="file: stage<TAB>name<TAB>cap_s<TAB>kind<TAB>arguments")
    ap.add_argument("--bin", help="fusebench, for --list --list-for=cuda")
    ap.add_argument("--build-dir", required=True, help="a configured build (ninja, test binaries)")
    ap.add_argument("--deps", default=".deps")
    ap.add_argument("--budget", type=int, help="BUDGET_S of the check")
    ap.add_argument("--time-references", action="store_true",
                    help="time the heaviest GPU tests' cases on the CPU (MEASURED_TEST_S) and exit")
    opts = ap.parse_args()
    if opts.time_references:
        return time_references(opts.build_dir)
    if opts.steps is None or opts.bin is None or opts.budget is None:
        ap.error("a plan needs STEPS, --bin and --budget")
    rows, problems = [], []
    with open(opts.steps) as f:
        for line in f:
            if not line.strip():
                continue
            stage, name, cap, kind, args = line.rstrip("\n").split("\t")
            cap = int(cap)
            try:
                seconds, work = estimate(kind, shlex.split(args), opts)
            except (RuntimeError, OSError, ValueError, TypeError) as e:
                seconds, work = float("nan"), f"cannot estimate: {e}"
                problems.append(f"{name}: {work}")
            if seconds > cap:
                problems.append(f"{name}: estimate {seconds:.0f} s over its cap {cap} s")
            rows.append((int(stage), name, cap, seconds, work))
    width = max(len(r[1]) for r in rows)
    print(f"{'stage':<5}  {'step':<{width}}  {'cap_s':>5}  {'est_s':>5}  work")
    for stage, name, cap, seconds, work in rows:
        print(f"{stage:<5}  {name:<{width}}  {cap:>5}  {seconds:>5.0f}  {work}")
    caps = {s: sum(r[2] for r in rows if r[0] == s) for s in (1, 2)}
    ests = {s: sum(r[3] for r in rows if r[0] == s) for s in (1, 2)}
    total = caps[1] + caps[2]
    print(f"stage 1: caps {caps[1]} s (limit {STAGE1_LIMIT_S}), estimates {ests[1]:.0f} s")
    print(f"stage 2: caps {caps[2]} s, estimates {ests[2]:.0f} s")
    print(f"total:   caps {total} s (limit {TOTAL_LIMIT_S}, BUDGET_S {opts.budget}), "
          f"estimates {ests[1] + ests[2]:.0f} s")
    rerun = 2 * MACHINE_START_S + total + caps[1]
    print(f"device time with one rerun of stage 1: 2 starts x {MACHINE_START_S} s + {total} s + "
          f"{caps[1]} s = {rerun} s of {DEVICE_TIME_S} s")
    if caps[1] > STAGE1_LIMIT_S:
        problems.append(f"stage 1 caps {caps[1]} s over {STAGE1_LIMIT_S} s")
    if total > TOTAL_LIMIT_S:
        problems.append(f"caps {total} s over {TOTAL_LIMIT_S} s")
    if total > opts.budget:
        problems.append(f"caps {total} s over BUDGET_S {opts.budget} s")
    if rerun > DEVICE_TIME_S:
        problems.append(f"no room for a rerun of stage 1: {rerun} s over {DEVICE_TIME_S} s")
    for p in problems:
        print(f"plan: {p}")
    print("plan: OK" if not problems else f"plan: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
