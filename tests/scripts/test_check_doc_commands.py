#!/usr/bin/env python3
"""scripts/check_doc_commands.py on a crafted Markdown file: what it extracts (fenced, indented
and inline commands, references, continuations; formulas left alone), that an expected non-zero
exit passes, and that a failing command, a wrong exit code and a missing reference fail it; that
relative links and images must name an existing file and heading.

  test_check_doc_commands.py --build build
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import check_doc_commands as cdc  # noqa: E402

BUILD = os.path.join(ROOT, "build")

GOOD = """# Doc

```sh
build/bin/fusebench --list --ops=qkv \\
    --tokens=1        # the fixtures
build/bin/fusebench --tp=3 --list   # exits 2: heads not divisible
```

```
y = a * b   (a formula, not a command)
```

Prose with `build/bin/fusebench --list --dtypes=fp32` inline, a reference to `scripts/bench.sh`
and an option alone, `--tp=3`.

    build/bin/fusebench-gate --help
"""

BAD = """```sh
build/bin/fusebench --no-such-flag
build/bin/fusebench --list   # exits 3
```

See `scripts/no-such-script.sh`.
"""


LINKS = """# Links

## Names and `--flags`, again

[a heading here](#names-and---flags-again), [the README](../README.md), [one of its
headings](../README.md#the-two-commands), ![an image](img/crossover.png), [a site](https://example.com),
`[in code](nowhere.md)`.

[gone](no-such-page.md), [no such heading](#nowhere), ![no image](img/missing.png)

```
[in a code block](nowhere.md)
```

    [in an indented code block](nowhere.md)

- a list item whose continuation
    [links nowhere](continued.md)
"""


class CheckDocCommands(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".md", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def run_checker(self, path):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/check_doc_commands.py"),
                            "--build", BUILD, path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        return p.returncode, p.stdout

    def test_extraction(self):
        commands = cdc.extract(self.write(GOOD))
        got = [(c.kind, c.text) for c in commands]
        self.assertEqual(got, [
            ("block", "build/bin/fusebench --list --ops=qkv --tokens=1 # the fixtures"),
            ("block", "build/bin/fusebench --tp=3 --list # exits 2: heads not divisible"),
            ("inline", "build/bin/fusebench --list --dtypes=fp32"),
            ("reference", "scripts/bench.sh"),
            ("block", "build/bin/fusebench-gate --help"),
        ])
        self.assertEqual(commands[0].line, 4)
        cdc.classify(commands, has_gpu=False)
        self.assertEqual([c.expected for c in commands], [0, 2, 0, 0, 0])
        # A rule that matches nothing any more is reported (generic ones excepted).
        stale = cdc.classify(commands, has_gpu=False)
        self.assertIn(r"^scripts/test\.sh$", [r[0] for r in stale])
        self.assertNotIn(r"--backend=cuda|^ncu\b|^nsys\b", [r[0] for r in stale])

    def test_good_doc_passes(self):
        rc, out = self.run_checker(self.write(GOOD))
        self.assertEqual(rc, 0, out)
        self.assertIn("doc commands: 5 passed, 0 failed, 0 skipped", out)

    def test_failures_are_reported(self):
        rc, out = self.run_checker(self.write(BAD))
        self.assertEqual(rc, 1, out)
        # An unknown flag is bad input: exit 2 (CLI11's own code was 109 before issue 14).
        self.assertIn("build/bin/fusebench --no-such-flag: exit 2, expected exit 0", out)
        self.assertIn("build/bin/fusebench --list # exits 3: exit 0, expected exit 3", out)
        self.assertIn("`scripts/no-such-script.sh` does not exist", out)
        self.assertIn("doc commands: 0 passed, 3 failed", out)

    def test_links_must_resolve(self):
        # A page of a docs/ folder beside a README, in a scratch tree (the real docs/ is what
        # docs_commands reads, maybe at the same time).
        tree = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tree)
        os.makedirs(os.path.join(tree, "docs", "img"))
        with open(os.path.join(tree, "README.md"), "w", encoding="utf-8") as f:
            f.write("# fusebench\n\n## The two commands\n")
        open(os.path.join(tree, "docs", "img", "crossover.png"), "wb").close()
        path = os.path.join(tree, "docs", "links.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(LINKS)
        where = os.path.relpath(path, ROOT)
        self.assertEqual(cdc.broken_links(path), [
            (9, "no-such-page.md", "no such file"),
            (9, "#nowhere", f"no heading with the anchor #nowhere in {where}"),
            (9, "img/missing.png", "no such file"),
            (18, "continued.md", "no such file"),
        ])
        rc, out = self.run_checker(path)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"{where}:9: link (no-such-page.md): no such file", out)
        self.assertIn("doc commands: 0 passed, 4 failed", out)

if __name__ == "__main__":
    if "--build" in sys.argv:
        i = sys.argv.index("--build")
        BUILD = os.path.abspath(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[1:])
