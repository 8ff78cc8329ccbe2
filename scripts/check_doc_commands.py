#!/usr/bin/env python3
"""Runs the shell commands shown in README.md and docs/*.md and checks their exit codes, so the
docs keep matching what the binaries and scripts do.

What counts as a command:
- each line of a fenced code block tagged sh/bash/shell/console or untagged, and of an indented
  code block, whose first word is a program (a relative path such as build/bin/fusebench or
  scripts/bench.sh, or one of PROGRAMS); lines ending in `\\` continue; `$ ` prompts are dropped;
  other lines (formulas, output) are not commands;
- an inline code span that starts like one (`build/bin/...`, `scripts/...`, `python3 ...`,
  `fusebench ...`, `mpirun ...`, ...) and has arguments; a bare path in a span
  (`scripts/bench.sh`) is a reference: it must exist, and is not run.

Expected exit status: 0, or what the command's trailing comment says (`# exits 2 ...`), or what
RULES say. Commands that cannot run here (a GPU, a cluster, placeholders, minutes of sweep, this
test suite itself) are in RULES with the reason, and are reported as skipped; a rule that no
longer matches any command fails the check, so the table stays true.

Links: every relative Markdown link and image (`[text](docs/usage.md#names)`, `![...](docs/img/x.png)`)
outside code must name a file that exists, and an anchor must name a heading of that file (as
GitHub makes anchors of headings), so moving text between pages cannot leave a dead link.

Commands run with bash in a scratch copy of the tree (its tracked and new files; build/ linked
to the real build folder, build/bin on PATH), except the scripts that configure the CMake
presets (scripts/bench.sh, build.sh, test.sh), which run in the tree itself; each under a time
limit, with stdin closed.

  scripts/check_doc_commands.py [--build DIR] [--list] [--timeout S] [FILE.md ...]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROGRAMS = {"python3", "python", "cmake", "ctest", "mpirun", "srun", "ncu", "nsys", "fusebench",
            "fusebench-gate", "fusebench-region", "fusebench-advise", "git", "bash", "sh",
            "all_reduce_perf"}
SHELL_INFO = {"", "sh", "bash", "shell", "console", "zsh"}
INLINE_START = re.compile(r"^(build[\w-]*/bin/|scripts/|python3 |fusebench(-gate|-region|-advise)?\s|"
                          r"mpirun |srun |cmake |ctest |ncu |nsys )")

# (regex searched in the command with its comment removed, what to do, why). Actions: "skip",
# "exit N" (expected status), "tree" (run in the tree, not the scratch copy), "no-gpu exit N"
# (expected status where no GPU is present, skipped where one is). All matching rules apply; a
# skip wins. Generic rules (marked *) may match nothing; every other rule must match a command.
RULES = [
    # Generic: what needs hardware or is not a runnable line.
    (r"\s\[[^\]]*\]", "skip*", "synopsis: placeholders and [optional] arguments"),
    (r"--backend=cuda|^ncu\b|^nsys\b", "skip*", "needs a GPU"),
    (r"--comm=nccl", "skip*", "NCCL between GPUs: needs several GPUs"),
    (r"^srun\b", "skip*", "a Slurm cluster"),
    (r"^mpirun -np \S+$", "skip*",
     "a fragment (the launcher without a program); ctest's tp_bench_mpi_np2 runs the CPU MPI path"),
    (r"^all_reduce_perf\b", "skip*", "nccl-tests on GPUs"),
    (r"(^|\s)\S*\.\.\.(\s|$)", "skip*", "arguments elided (...)"),
    (r"(^|[\s=/])([A-Z][A-Z0-9_]*|[a-z])\.json\b", "skip*",
     "a placeholder file (REPORT.json, a.json): the tests run these scripts on real reports"),
    (r"^scripts/(bench|build|test)\.sh\b", "tree*",
     "configures the CMake presets, whose build folders belong to the tree"),
    # README.md, docs/usage.md, docs/measured.md, docs/building.md
    (r"^scripts/bench\.sh$", "skip",
     "the main job: builds and runs the whole default sweep (minutes on 2 cores); charts_cpu_report "
     "runs a small CPU sweep of the same binary"),
    (r"^scripts/test\.sh$", "skip", "the test suite this check is part of"),
    (r"^scripts/bench\.sh --models=llama3-8b --tokens=1,4096$", "skip",
     "llama3-8b at 4096 tokens: far too long on the CPU backend"),
    (r"--models=llama3-8b,qwen3-32b --tokens=1,16,256,4096", "skip",
     "GPU-sized sweep (llama3-8b and qwen3-32b up to 4096 tokens): hours on the CPU backend"),
    (r"path/to/config\.json", "skip", "path/to/config.json is a placeholder"),
    (r"--weights=path/to/", "skip",
     "path/to/<model> is a placeholder for a downloaded checkpoint; docs/checkpoints.md's "
     "demo-checkpoints commands and ctest's test_checkpoints_cli run --weights on generated ones"),
    (r"^cmake --preset release && cmake --build --preset release && ctest --preset release$", "skip",
     "the build and the suite this check is part of"),
    (r"^ctest -R Gpu$", "skip", "runs in a configured build folder; the suite runs these tests"),
    (r"^fusebench --verify$", "skip",
     "the default sweep after verification (minutes); `build/bin/fusebench --verify --tokens=1` runs"),
    (r"^fusebench --ops=tp_attn,tp_mlp --tp=1,2,4,8$", "skip",
     "the one-GPU recipe (tp 8 as 8 threads on 2 cores); its CPU form with --tp=1,2,4 runs"),
    # docs/device-check.md
    (r"^python3 scripts/device_plan\.py --time-references --build-dir build$", "skip",
     "times the GpuQuant and GpuMoe cases on the CPU (minutes on 2 cores), to size the device "
     "check's caps; its output is MEASURED_TEST_S in the script, which device_check_plan uses"),
    # docs/cpu-gemm.md
    (r"^python3 scripts/cpu_vs_numpy\.py --markdown=table\.md$", "skip",
     "the full fusebench-vs-numpy table (11 token counts, both ops and variants): 10-16 minutes "
     "on 2 cores; ctest's cpu_vs_numpy_smoke runs the script at one shape"),
    (r"^python3 scripts/cpu_vs_numpy\.py --threads=1 --rounds=5 ", "skip",
     "the committed table's run (5 rounds of 11 token counts): about 16 minutes on 2 cores; "
     "ctest's cpu_vs_numpy_smoke runs the script at one shape"),
    # docs/charts.md
    (r"^python3 scripts/make_html\.py a\.json b\.json", "skip",
     "a.json and b.json are placeholders; charts_html_chromium runs make_html.py on a real report"),
    # docs/gate.md
    (r"^scripts/update-baseline\.sh$", "no-gpu exit 2",
     "stops before building where there is no GPU; on a GPU it runs the CI sweep"),
    (r"^scripts/update-baseline\.sh report\.json$", "skip",
     "report.json is a placeholder; ctest's update_baseline_sh adopts crafted reports"),
    (r"^scripts/ci_sweep\.sh ci-out$", "skip",
     "the CI-sized GPU sweep (llama3-8b in bf16 up to 4096 tokens): far too long on the CPU "
     "backend; workflow_gpu_regression runs ci_sweep.sh with a stub sweep"),
    (r"^cmake --preset asan && cmake --build --preset asan --target fuzz_report$", "skip",
     "the ASan build (minutes): scripts/test.sh builds and runs it after the release suite"),
    (r"^build-asan/bin/fuzz_report -max_total_time=600", "skip",
     "a 10-minute fuzz run; ctest's fuzz_report runs the same target for 20 s"),
    # docs/moe.md
    (r"--models=qwen3-30b-a3b --ops=moe --tokens=1,16,256 --dtypes=bf16 --verify$", "skip",
     "qwen3-30b-a3b's whole MoE block verified in float64 at 256 tokens: minutes on 2 cores; ctest's "
     "MoeCli tests and the tiny-deepseek-v3 command beside it run the same op"),
    # docs/tp.md
    (r"^mpirun -np 8 --map-by ppr:8:node", "skip", "8 GPUs, one process each"),
    (r"^mpirun -np 8 build/bin/fusebench --ops=tp_attn,tp_mlp --variants=paired,sp,overlap", "skip",
     "8 GPUs, one process each"),
    (r"^mpirun -np 16 -H node1:8,node2:8", "skip", "two nodes of 8 GPUs"),
    (r"--models=qwen3-30b-a3b --ops=tp_moe --tp=2,4 --tokens=1,16,256,1024", "skip",
     "qwen3-30b-a3b's MoE block across 2 and 4 ranks up to 1024 tokens: the committed report's "
     "run, far too long for the suite; the tiny-deepseek-v3 command beside it runs the same op"),
    (r"^mpirun -np 2 --allow-run-as-root --oversubscribe build/bin/fusebench .*--ops=tp_moe", "skip",
     "qwen3-30b-a3b across two processes up to 1024 tokens: the committed report's run; ctest's "
     "test_comm_mpi_np2 runs tp_moe over MPI"),
]


@dataclass
class Command:
    file: str
    line: int
    text: str  # as shown (continuations joined)
    kind: str  # block | inline | reference
    expected: int = 0
    action: str = "run"  # run | skip | tree
    reason: str = ""


def strip_comment(cmd):
    """The command without a trailing shell comment (a # after whitespace, outside quotes)."""
    quote = None
    for i, ch in enumerate(cmd):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or cmd[i - 1].isspace()):
            return cmd[:i].rstrip(), cmd[i:]
    return cmd.rstrip(), ""


def is_command(text):
    words = text.split()
    if not words:
        return False
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=\S*$", words[0]):  # VAR=value prefixes
        words = words[1:]
    return bool(words) and (words[0] in PROGRAMS or
                            (re.match(r"^[\w.-]+(/[\w.-]+)+$", words[0]) is not None
                             and not words[0].startswith("/")))


def extract(path):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, paragraph, para_start = [], [], 0
    fence, info = None, ""
    block_lines = []  # (line number, text) of the current code block

    def flush_block():
        pending, start = "", 0
        for n, text in block_lines:
            text = re.sub(r"^\s*\$ ", "", text).strip()
            if not pending:
                start = n
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            cmd = (pending + text).strip()
            pending = ""
            if cmd and not cmd.startswith("#") and is_command(strip_comment(cmd)[0]):
                out.append(Command(rel, start, re.sub(r"\s+", " ", cmd), "block"))
        block_lines.clear()

    def flush_paragraph():
        text = " ".join(paragraph)
        for m in re.finditer(r"(`+)(.+?)\1", text):
            span = m.group(2).strip()
            if " " not in span:
                if re.match(r"^(build[\w-]*/bin/|scripts/)\S+$", span):
                    out.append(Command(rel, para_start, span, "reference"))
            elif INLINE_START.match(span) and is_command(span):
                out.append(Command(rel, para_start, re.sub(r"\s+", " ", span), "inline"))
        paragraph.clear()

    prev_blank, in_indented = True, False
    for n, line in enumerate(lines, 1):
        if fence:
            if line.strip().startswith(fence):
                fence = None
                if info in SHELL_INFO:
                    flush_block()
                block_lines.clear()
            else:
                block_lines.append((n, line))
            continue
        m = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if m:
            flush_paragraph()
            fence, info = m.group(1), m.group(2).lower()
            continue
        indented = line.startswith("    ") and line.strip()
        if indented and (in_indented or (prev_blank and not paragraph)):
            in_indented = True
            block_lines.append((n, line))
            continue
        if in_indented and not line.strip():
            block_lines.append((n, line))
            continue
        if in_indented:
            flush_block()
            in_indented = False
        if line.strip():
            if not paragraph:
                para_start = n
            paragraph.append(line)
            prev_blank = False
        else:
            flush_paragraph()
            prev_blank = True
    flush_paragraph()
    if in_indented:
        flush_block()
    return out


def heading_anchors(path):
    """The anchors GitHub gives the headings of a Markdown file (lower case, punctuation dropped,
    spaces as '-', a repeated heading's anchor suffixed -1, -2, ...)."""
    anchors, seen, fence = set(), {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\s*(```+|~~~+)", line)
            if m:
                fence = None if fence and m.group(1).startswith(fence) else (fence or m.group(1))
                continue
            h = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                slug = re.sub(r"[^\w\- ]", "", h.group(1).strip().lower()).replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def broken_links(path):
    """(line, target, why) for each relative link or image of a Markdown file, outside code, whose
    file or heading does not exist."""
    out, fence, indented, prev_blank = [], None, False, True
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            fence = None if fence and m.group(1).startswith(fence) else (fence or m.group(1))
            continue
        # An indented code block starts after a blank line (a list item's continuation does not).
        indented = line.startswith("    ") and (indented or prev_blank) or (indented and not line.strip())
        prev_blank = not line.strip()
        if fence or indented:
            continue
        prose = re.sub(r"(`+).+?\1", "", line)  # code spans are not links
        for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose):
            if re.match(r"^[a-z][\w+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                out.append((n, target, "no such file"))
            elif anchor and dest.endswith(".md") and anchor not in heading_anchors(dest):
                out.append((n, target, f"no heading with the anchor #{anchor} in {os.path.relpath(dest, ROOT)}"))
    return out


def gpu_present():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=30)
        return p.returncode == 0 and "GPU " in p.stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def classify(commands, has_gpu):
    used = set()
    for c in commands:
        if c.kind == "reference":
            continue
        bare, comment = strip_comment(c.text)
        m = re.search(r"\bexits? (\d+)\b", comment)
        if m:
            c.expected = int(m.group(1))
        # Every matching rule counts as used; a skip wins over the rest.
        for i in sorted(range(len(RULES)), key=lambda i: RULES[i][1].endswith("*")):
            pattern, action, why = RULES[i]  # specific rules first: their reason is shown
            if not re.search(pattern, bare):
                continue
            used.add(i)
            action = action.rstrip("*")
            if action == "skip":
                if c.action != "skip":
                    c.action, c.reason = "skip", why
            elif action == "tree":
                if c.action == "run":
                    c.action, c.reason = "tree", why
            elif action.startswith("no-gpu exit"):
                c.expected = int(action.split()[-1])
                if has_gpu and c.action != "skip":
                    c.action, c.reason = "skip", "a GPU is present: " + why
            elif action.startswith("exit"):
                c.expected = int(action.split()[-1])
    return [RULES[i] for i in range(len(RULES)) if i not in used and not RULES[i][1].endswith("*")]


def make_scratch(build):
    scratch = tempfile.mkdtemp(prefix="fusebench_doc_commands_")
    tree = os.path.join(scratch, "tree")
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "-co", "--exclude-standard"],
                           check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            dst = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    os.symlink(build, os.path.join(tree, "build"))
    return scratch, tree


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md docs/*.md)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the built tree (build/)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per command")
    ap.add_argument("--list", action="store_true", help="print the commands and what would happen")
    args = ap.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs/*.md")))
    commands = []
    for f in files:
        commands += extract(os.path.abspath(f))
    # One run per distinct command (the README and docs repeat some).
    seen, unique = {}, []
    for c in commands:
        key = (c.kind == "reference", c.text)
        if key in seen:
            continue
        seen[key] = c
        unique.append(c)
    has_gpu = gpu_present()
    stale = classify(unique, has_gpu)
    if args.files:
        stale = []  # rules are kept for the whole docs set, which was not read
    build = os.path.abspath(args.build)

    dead = [(os.path.relpath(os.path.abspath(f), ROOT), *b) for f in files for b in broken_links(os.path.abspath(f))]

    if args.list:
        for f, n, target, why in dead:
            print(f"{f}:{n}: [link] {target}: {why}")
        for c in unique:
            what = "exists?" if c.kind == "reference" else (
                c.action + ("" if c.action == "skip" else f" (expect exit {c.expected})"))
            print(f"{c.file}:{c.line}: [{c.kind}] {what}: {c.text}" + (f"  -- {c.reason}" if c.reason else ""))
        for r in stale:
            print(f"stale rule: {r[0]!r} ({r[2]})")
        return 0

    failures, passed, skipped = [], 0, 0
    for f, n, target, why in dead:
        failures.append(f"{f}:{n}: link ({target}): {why}")
        print(f"FAIL  {f}:{n}: link ({target}): {why}")
    for r in stale:
        failures.append(f"rule {r[0]!r} matches no command in the docs any more: remove it")
        print(f"FAIL  stale rule {r[0]!r} ({r[2]})")
    if not os.path.isdir(os.path.join(build, "bin")):
        print(f"check_doc_commands: {build}/bin missing: build first (cmake --build --preset release)")
        return 1
    scratch, tree = make_scratch(build)
    env = dict(os.environ)
    env["PATH"] = os.path.join(build, "bin") + os.pathsep + env.get("PATH", "")
    started = time.time()
    try:
        for c in unique:
            where = f"{c.file}:{c.line}"
            if c.kind == "reference":
                target = os.path.join(ROOT if not c.text.startswith("build") else tree, c.text)
                if os.path.exists(target):
                    passed += 1
                else:
                    failures.append(f"{where}: `{c.text}` does not exist")
                    print(f"FAIL  {where}: `{c.text}` does not exist")
                continue
            if c.action == "skip":
                skipped += 1
                print(f"skip  {where}: {c.text}\n        ({c.reason})")
                continue
            cwd = ROOT if c.action == "tree" else tree
            t0 = time.time()
            try:
                p = subprocess.run(["bash", "-c", c.text], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", timeout=args.timeout)
                rc, output = p.returncode, p.stdout
            except subprocess.TimeoutExpired as e:
                rc, output = None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            took = time.time() - t0
            if rc == c.expected:
                passed += 1
                print(f"ok    {where}: {c.text}  (exit {rc}, {took:.0f} s)")
            else:
                got = f"timed out after {args.timeout:.0f} s" if rc is None else f"exit {rc}"
                failures.append(f"{where}: {c.text}: {got}, expected exit {c.expected}")
                print(f"FAIL  {where}: {c.text}  ({got}, expected exit {c.expected})")
                tail = output.strip().splitlines()[-15:]
                print("\n".join("        | " + t for t in tail))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\ncheck_doc_commands: {len(unique)} commands and references in {len(files)} files "
          f"({len(dead)} dead links), "
          f"{time.time() - started:.0f} s")
    for f in failures:
        print("  FAILED: " + f)
    print(f"doc commands: {passed} passed, {len(failures)} failed, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
