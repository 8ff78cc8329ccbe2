"""Runs a GitHub Actions job's `run:` steps here, the way a Linux runner runs them.

What is reproduced (GitHub's workflow-syntax docs, `jobs.<job_id>.steps[*].shell` and
`defaults.run`):
- the shell: the step's `shell:`, else the job's `defaults.run.shell`, else the workflow's, else
  the runner's default for an unspecified shell, `bash -e {0}` (no pipefail: a pipeline's status
  is its last command's). `shell: bash` is `bash --noprofile --norc -eo pipefail {0}`,
  `sh` is `sh -e {0}`, `python` is `python {0}`; a custom `cmd ... {0}` is used as given.
  The script is written to a file under RUNNER_TEMP and that file is passed as {0};
- the environment: the runner's variables (GITHUB_WORKSPACE, GITHUB_OUTPUT, GITHUB_ENV,
  GITHUB_PATH, GITHUB_STEP_SUMMARY, CI, ...), then the workflow's, the job's, the GITHUB_ENV
  lines of earlier steps and the step's `env:`;
- `${{ }}` expressions in `run:`, `env:`, `if:`, `working-directory:`, substituted from the
  contexts given (github, inputs, env, steps, runner, job); anything unknown (another context,
  a function not listed below) is refused with an error rather than guessed;
- `if:` with success(), failure(), always(), cancelled(); `continue-on-error`; the first failing
  step fails the job and later steps run only when their `if:` says so;
- `steps.<id>.outputs` from GITHUB_OUTPUT.
`uses:` steps are not run: the caller says what each action stands for (`actions`).
"""
import json
import os
import re
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field

import yaml

# The runner's command lines for the built-in shell keywords on Linux.
SHELLS = {
    None: "bash -e {0}",
    "bash": "bash --noprofile --norc -eo pipefail {0}",
    "sh": "sh -e {0}",
    "python": "python {0}",
}
SCRIPT_SUFFIX = {"python": ".py"}


class WorkflowError(Exception):
    """The workflow uses something this runner does not reproduce: refused, never guessed."""


# ---------------------------------------------------------------------------------------------
# Expressions: the subset of GitHub's expression language the workflows use.

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>\|\||&&|==|!=|<=|>=|[!<>(),.\[\]*])"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))"
)


def _tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise WorkflowError(f"cannot parse expression {text!r} at {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def truthy(v):
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0 and v == v
    if isinstance(v, str):
        return v != ""
    return True


def to_text(v):
    if v is None:
        return ""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


class _Parser:
    FUNCTIONS = {"success", "failure", "always", "cancelled", "contains", "startsWith", "endsWith",
                 "format"}

    def __init__(self, text, contexts, status):
        self.text, self.toks, self.i = text, _tokens(text), 0
        self.contexts, self.status = contexts, status

    def peek(self, value=None):
        if self.i >= len(self.toks):
            return None
        tok = self.toks[self.i]
        return tok if value is None or tok[1] == value else None

    def take(self, value=None):
        tok = self.peek(value)
        if tok is None:
            raise WorkflowError(f"expression {self.text!r}: expected {value or 'more'}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.toks):
            raise WorkflowError(f"expression {self.text!r}: unexpected {self.toks[self.i][1]!r}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek("||"):
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self):
        v = self.cmp()
        while self.peek("&&"):
            self.take()
            rhs = self.cmp()
            v = rhs if truthy(v) else v
        return v

    def cmp(self):
        v = self.unary()
        while self.peek() and self.peek()[1] in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take()[1]
            rhs = self.unary()
            a, b = v, rhs
            if isinstance(a, str) and isinstance(b, str):  # GitHub compares strings ignoring case
                a, b = a.lower(), b.lower()
            v = {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,
                 "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[op]()
        return v

    def unary(self):
        if self.peek("!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if value == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind != "id":
            raise WorkflowError(f"expression {self.text!r}: unexpected {value!r}")
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if self.peek("("):
            return self.call(value)
        if value not in self.contexts:
            raise WorkflowError(
                f"expression {self.text!r}: context {value!r} is not provided to this run "
                f"(known: {', '.join(sorted(self.contexts))})")
        v = self.contexts[value]
        while self.peek(".") or self.peek("["):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = to_text(self.or_())
                self.take("]")
            v = v.get(key) if isinstance(v, dict) else None  # a missing property is null
        return v

    def call(self, name):
        if name not in self.FUNCTIONS:
            raise WorkflowError(f"expression {self.text!r}: function {name}() is not supported")
        self.take("(")
        args = []
        while not self.peek(")"):
            args.append(self.or_())
            if self.peek(","):
                self.take()
        self.take(")")
        if name == "success":
            return self.status == "success"
        if name == "failure":
            return self.status == "failure"
        if name == "always":
            return True
        if name == "cancelled":
            return False
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(to_text(x).lower() == to_text(needle).lower() for x in hay)
            return to_text(needle).lower() in to_text(hay).lower()
        if name == "startsWith":
            return to_text(args[0]).lower().startswith(to_text(args[1]).lower())
        if name == "endsWith":
            return to_text(args[0]).lower().endswith(to_text(args[1]).lower())
        fmt = to_text(args[0])
        return re.sub(r"\{(\d+)\}", lambda m: to_text(args[1 + int(m.group(1))]), fmt)


def evaluate(expr, contexts, status="success"):
    return _Parser(expr, contexts, status).parse()


def substitute(text, contexts, status="success"):
    """Replaces every ${{ expr }} in text, as the runner does before a script is written."""
    if not isinstance(text, str):
        return text
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: to_text(evaluate(m.group(1), contexts, status)),
                  text, flags=re.S)


# ---------------------------------------------------------------------------------------------


@dataclass
class StepResult:
    name: str
    id: str
    ran: bool
    outcome: str  # success | failure | skipped
    command: str = ""  # the shell command line the runner used
    returncode: int = 0
    output: str = ""


@dataclass
class JobResult:
    conclusion: str
    steps: list = field(default_factory=list)
    summary: str = ""  # the concatenated GITHUB_STEP_SUMMARY files

    def first_failure(self):
        return next((s for s in self.steps if s.outcome == "failure"), None)

    def step(self, id_or_name):
        return next(s for s in self.steps if id_or_name in (s.id, s.name))

    def log(self):
        lines = [f"job: {self.conclusion}"]
        for s in self.steps:
            lines.append(f"--- step {s.name!r}: {s.outcome}"
                         + (f" (exit {s.returncode}; {s.command})" if s.ran and s.command else ""))
            if s.output:
                lines.append(s.output.rstrip())
        return "\n".join(lines)


def load(path):
    with open(path) as f:
        # YAML 1.1 reads the key `on` as True; GitHub reads it as "on".
        doc = yaml.safe_load(f)
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def _shell_template(step, job, workflow):
    shell = step.get("shell")
    for scope in (job, workflow):
        if shell is None:
            shell = ((scope.get("defaults") or {}).get("run") or {}).get("shell")
    if shell in SHELLS:
        return shell, SHELLS[shell]
    if "{0}" in str(shell):
        return shell, shell
    raise WorkflowError(f"step {step.get('name')!r}: shell {shell!r} is not a Linux built-in "
                        "shell or a template with {0}")


def _working_directory(step, job, workflow):
    wd = step.get("working-directory")
    for scope in (job, workflow):
        if wd is None:
            wd = ((scope.get("defaults") or {}).get("run") or {}).get("working-directory")
    return wd


def _read(path):
    with open(path) as f:
        return f.read()


def _condition(value, contexts, status, implicit_success=True):
    """An `if:` (or `continue-on-error:`) value. Without a status function GitHub evaluates an
    `if:` as `success() && (...)`, so a step after a failure is skipped."""
    if value is None:
        value = "success()" if implicit_success else False
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    if implicit_success and not re.search(r"\b(success|failure|always|cancelled)\s*\(", text):
        text = f"success() && ({text})"
    return evaluate(text, contexts, status)


def _read_kv_file(path):
    """GITHUB_OUTPUT / GITHUB_ENV syntax: NAME=value lines and NAME<<DELIM ... DELIM blocks."""
    values = {}
    if not os.path.exists(path):
        return values
    lines = _read(path).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        i += 1
    return values


def run_job(workflow, job_id, workspace, temp, *, event_name="push", event=None, inputs=None,
            actions=None, base_env=None, ref="refs/heads/main", sha="0" * 40,
            step_timeout_s=120):
    """Runs the job's steps in order; returns a JobResult. `actions` maps a `uses:` value (without
    @version) to a callable(step, env) -> (ok, output) standing in for that action."""
    if isinstance(workflow, str):
        workflow = load(workflow)
    job = workflow["jobs"][job_id]
    actions = actions or {}
    os.makedirs(temp, exist_ok=True)
    github = {"event_name": event_name, "event": event or {}, "ref": ref, "sha": sha,
              "workspace": workspace, "repository": "fusebench/fusebench", "job": job_id,
              "run_id": "1", "run_number": "1", "actor": "test"}
    runner_ctx = {"os": "Linux", "arch": "X64", "temp": temp, "name": "simulated",
                  "tool_cache": os.path.join(temp, "tool_cache")}
    # The event payload, as GitHub writes it for the steps ($GITHUB_EVENT_PATH).
    event_path = os.path.join(temp, "event.json")
    with open(event_path, "w") as f:
        json.dump(event or {}, f)
    steps_ctx = {}
    added_env, added_path = {}, []
    result = JobResult(conclusion="success")

    def contexts(env):
        return {"github": github, "inputs": dict(inputs or {}), "env": env, "steps": steps_ctx,
                "runner": runner_ctx, "job": {"status": result.conclusion}}

    def eval_env(mapping, env):
        return {k: substitute(to_text(v) if not isinstance(v, str) else v, contexts(env),
                              result.conclusion) for k, v in (mapping or {}).items()}

    # The job's own `if:` (e.g. a fork guard): false skips every step.
    if "if" in job and not truthy(_condition(job["if"], contexts(dict(base_env or os.environ)),
                                             "success")):
        result.conclusion = "skipped"
        return result

    for index, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {index + 1}"
        sid = step.get("id", f"__{index}")
        env = dict(base_env if base_env is not None else os.environ)
        env.update({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": workspace,
                    "GITHUB_EVENT_NAME": event_name, "GITHUB_REF": ref, "GITHUB_SHA": sha,
                    "GITHUB_JOB": job_id, "GITHUB_REPOSITORY": github["repository"],
                    "GITHUB_EVENT_PATH": event_path, "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64",
                    "RUNNER_TEMP": temp, "HOME": env.get("HOME", temp)})
        env.update(eval_env(workflow.get("env"), env))
        env.update(eval_env(job.get("env"), env))
        env.update(added_env)
        env.update(eval_env(step.get("env"), env))
        if added_path:
            env["PATH"] = os.pathsep.join(reversed(added_path)) + os.pathsep + env["PATH"]

        if not truthy(_condition(step.get("if"), contexts(env), result.conclusion)):
            result.steps.append(StepResult(name, sid, False, "skipped"))
            steps_ctx[sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            continue

        files = {k: os.path.join(temp, f"{k.lower()}_{index}") for k in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for k, p in files.items():
            open(p, "w").close()
            env[k] = p

        if "uses" in step:
            action = step["uses"].split("@")[0]
            if action not in actions:
                raise WorkflowError(f"step {name!r} uses {step['uses']}: no stand-in given")
            ok, output = actions[action](step, env)
            res = StepResult(name, sid, True, "success" if ok else "failure", output=output)
        else:
            shell, template = _shell_template(step, job, workflow)
            script = substitute(step["run"], contexts(env), result.conclusion)
            path = os.path.join(temp, f"{uuid.uuid4()}{SCRIPT_SUFFIX.get(shell, '.sh')}")
            with open(path, "w") as f:
                f.write(script)
            command = template.replace("{0}", path)
            wd = substitute(_working_directory(step, job, workflow), contexts(env))
            cwd = os.path.join(workspace, wd) if wd else workspace
            timeout = min(step_timeout_s, 60 * float(step.get("timeout-minutes", 1e9)))
            try:
                proc = subprocess.run(shlex.split(command), cwd=cwd, env=env, timeout=timeout,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
                rc, output = proc.returncode, proc.stdout
            except subprocess.TimeoutExpired as e:
                rc, output = 124, (e.stdout or b"").decode(errors="replace") + "\n(timed out)"
            res = StepResult(name, sid, True, "success" if rc == 0 else "failure",
                             command=template, returncode=rc, output=output)
        outputs = _read_kv_file(files["GITHUB_OUTPUT"])
        added_env.update(_read_kv_file(files["GITHUB_ENV"]))
        if os.path.exists(files["GITHUB_PATH"]):
            added_path += [p for p in _read(files["GITHUB_PATH"]).splitlines() if p]
        result.summary += _read(files["GITHUB_STEP_SUMMARY"])
        conclusion = res.outcome
        if res.outcome == "failure" and truthy(_condition(step.get("continue-on-error", False),
                                                          contexts(env), result.conclusion,
                                                          implicit_success=False)):
            conclusion = "success"
        steps_ctx[sid] = {"outputs": outputs, "outcome": res.outcome, "conclusion": conclusion}
        result.steps.append(res)
        if conclusion == "failure":
            result.conclusion = "failure"
    return result
