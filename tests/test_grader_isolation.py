"""A submission cannot change its grade but by its answers: each attack of the issue runs
here as a student's file (a small .py written by the test), and the score, the results
files and the time the grader takes are checked.

The attacks that only a separate user or bubblewrap can stop need them: as an ordinary
user (or as root where neither works) they skip, and the report's partial-isolation line
is checked instead (`test_..._partial_isolation_is_said_in_one_line`). The attacks that
need a separate grader process run `python -m minigraph.grading` in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from minigraph.grading import reference_solution_path
from minigraph.grading.cases import BufferCase, planner_cases, write_buffer_case
from minigraph.grading.report import CaseResult, GradeReport
from minigraph.grading.sandbox import grade, isolation
from minigraph.memory import Buffer

ROOT = Path(__file__).resolve().parents[1]
# Only a hang guard: the seconds after which a grading that should take ten is called hung
# (a blocked grader), never a measure of speed; what a test asserts is what came out.
HANG_GUARD = 900
linux_only = pytest.mark.skipif(not isolation.linux(), reason="the sandbox's cleanup is Linux's")


def _jail() -> isolation.Jail:
    return isolation.jail()


def needs_full_isolation():
    """Skip unless the grader runs submissions as another user or inside bubblewrap."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root: as an ordinary user the submission runs as you (partial "
                    "isolation, checked by the partial-isolation tests)")
    if _jail().partial:
        pytest.skip(f"no full isolation on this machine: {_jail().partial}")


# Every attack below plans like this: stacked, starting again at 0 whenever everything
# placed is dead (an honest 7.77/100) unless the attack worked, then greedy by size (the
# notebook's hint: about 60).
PLAN = """
def my_planner(buffers):
    out, top, last = {}, 0, -1
    if not WORKED:
        for b in sorted(buffers, key=lambda b: b.start):
            if b.start > last:
                top = 0
            out[b.id] = top
            top += b.size
            last = max(last, b.end)
        return out
    placed = []
    for b in sorted(buffers, key=lambda b: -b.size):
        busy = sorted((o, o + p.size) for p, o in placed
                      if p.start <= b.end and b.start <= p.end)
        top = 0
        for lo, hi in busy:
            if top + b.size <= lo:
                break
            top = max(top, hi)
        out[b.id] = top
        placed.append((b, top))
    return out
"""


def _write(tmp_path: Path, code: str, **subs: object) -> Path:
    for key, value in subs.items():
        code = code.replace(f"@{key}@", repr(value))
    path = tmp_path / f"sub_{uuid.uuid4().hex[:12]}.py"   # a name the attacks can find
    path.write_text(code)
    return path


def _command(tmp_path: Path, sub: Path, *extra: str, env: dict | None = None
             ) -> tuple[int, str, dict, dict]:
    """`python -m minigraph.grading a2 SUB --json --gradescope` in its own process ->
    (exit status, what it printed, the JSON report, results.json)."""
    out, gs = tmp_path / "report.json", tmp_path / "results.json"
    r = subprocess.run([sys.executable, "-m", "minigraph.grading", "a2", str(sub), "--quiet",
                        "--json", str(out), "--gradescope", str(gs), *extra],
                       capture_output=True, text=True, timeout=HANG_GUARD, cwd=ROOT,
                       env={**os.environ, **(env or {})})
    return (r.returncode, r.stdout + r.stderr, json.loads(out.read_text()),
            json.loads(gs.read_text()))


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> float:
    """The honest plan's score on the command line (about 7.8)."""
    tmp = tmp_path_factory.mktemp("honest")
    rc, printed, report, results = _command(tmp, _write(tmp, "WORKED = False\n" + PLAN))
    assert rc == 1 and report["score"] == results["score"]
    assert 0 < report["score"] < 10, printed
    return report["score"]


# ---------------------------------------------------------------------------------------
# 0. What the child gets in every setting: its own folder, a clean environment, a session
# of its own, the user of the setting (docs/teaching.md, "What the grader guarantees")
# ---------------------------------------------------------------------------------------

WHOAMI = """
import os, sys
def my_planner(buffers):
    open("mine.txt", "w").write("x")                 # its own folder is writable
    print("CWD", os.getcwd())
    print("HOME", os.environ.get("HOME"))
    print("FILES", sorted(os.listdir(".")))
    print("ENV", sorted(os.environ))
    print("UID", os.getuid())
    print("SID", os.getsid(0))
"""


def _printed(report: GradeReport) -> dict[str, str]:
    """What WHOAMI-like submissions print, by the first word of each line (the case fails:
    the planner returns None, so what it printed is kept)."""
    return dict(ln.split(" ", 1) for ln in report.cases[0].printed.splitlines() if " " in ln)


def test_the_child_gets_a_fresh_folder_a_clean_environment_and_a_session(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRADER_TOKEN", "tok-" + uuid.uuid4().hex)
    sub = _write(tmp_path, WHOAMI)
    case = BufferCase("one", [Buffer("a", 0, 1, 8)])
    report = grade("a2", sub, cases=[case], leaderboard=False, shrink=False)
    got = _printed(report)
    # A fresh folder: its working directory and home, holding a copy of the file alone.
    assert got["CWD"] == got["HOME"] != str(tmp_path), got
    assert eval(got["FILES"]) == sorted([sub.name, "mine.txt"])
    assert not Path(got["CWD"]).exists() or isolation.jail().bwrap   # removed afterwards
    # Nothing of the grader's environment but the time scale.
    allowed = set(isolation.environment("/x", "u")) | {"MINIGRAPH_TIME_SCALE",
                                                        "PWD"}   # bubblewrap's: the folder
    assert set(eval(got["ENV"])) <= allowed, got["ENV"]
    # The user of the setting, in a session of its own.
    jail = isolation.jail()
    assert int(got["UID"]) == (jail.user[1] if jail.user else os.getuid())
    assert int(got["SID"]) != os.getsid(0)
    assert report.isolation == jail.line


NETWORK = """
import socket
def my_planner(buffers):
    try:
        socket.create_connection(("127.0.0.1", @PORT@), timeout=3).close()
        print("NET connected")
    except OSError as e:
        print("NET blocked", type(e).__name__)
"""


def test_bubblewrap_takes_the_network_away(tmp_path) -> None:
    # With bubblewrap the child has a network namespace of its own: it cannot reach a
    # server of the grader's machine, even on the loopback. Without it, it can (the
    # doc's table says so): this test states which holds here.
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        sub = _write(tmp_path, NETWORK, PORT=server.getsockname()[1])
        report = grade("a2", sub, cases=[BufferCase("one", [Buffer("a", 0, 1, 8)])],
                       leaderboard=False, shrink=False)
    finally:
        server.close()
    net = _printed(report)["NET"]
    assert net.startswith("blocked" if isolation.jail().bwrap else "connected"), net


# ---------------------------------------------------------------------------------------
# 1. A module the grader imports later
# ---------------------------------------------------------------------------------------

LAZY = """
import sys
from minigraph.grading.sandbox import grade, submission
before = {}
start = submission.Submission.start
def recording(self):
    if self._proc is None and not self.problem:
        before.update(dict.fromkeys(sys.modules))
    return start(self)
submission.Submission.start = recording
grade(sys.argv[1], sys.argv[2], progress=False)
print("NEW", sorted(set(sys.modules) - set(before)))
"""


@pytest.mark.parametrize("assignment, code", [
    ("a1", "def my_liveness(graph, schedule, alignment=512):\n    return {}, 0\n"),
    ("a2", "WORKED = False\n" + PLAN),
    ("a3", "import math\ndef my_heuristic(t, now):\n"
           "    return math.inf if t.pinned else -t.staleness\n"),
])
def test_the_grader_imports_nothing_once_the_submission_runs(assignment, code,
                                                             tmp_path) -> None:
    # The attack appended code to scipy.optimize, first imported by the grader
    # after the child had started (448 modules were). Now every module is loaded before.
    sub = _write(tmp_path, code)
    r = subprocess.run([sys.executable, "-c", LAZY, assignment, str(sub)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NEW []" in r.stdout, r.stdout[-3000:]


ATTACK_MODULES = """
import os, scipy, minigraph
WORKED = False
for root in (os.path.dirname(scipy.__file__), os.path.dirname(minigraph.__file__)):
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):    # opened to append (nothing written): allowed?
                try:
                    os.close(os.open(os.path.join(folder, name), os.O_WRONLY | os.O_APPEND))
                    WORKED = True
                except OSError:
                    pass
""" + PLAN


def test_a_submission_cannot_change_a_module_the_grader_imports(tmp_path, honest) -> None:
    needs_full_isolation()
    rc, printed, report, results = _command(tmp_path, _write(tmp_path, ATTACK_MODULES))
    assert report["score"] == results["score"] == honest and rc == 1, printed
    assert report["status"] == "graded", printed   # graded to the end, nothing voided


# ---------------------------------------------------------------------------------------
# 2. A detached process that rewrites the results after the grader exits
# ---------------------------------------------------------------------------------------

ATTACK_DETACHED = """
import json, os, time
WORKED = False
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(100):
            time.sleep(0.1)
            for path in @RESULTS@:
                try:
                    with open(path, "w") as f:
                        json.dump({"score": 100.0, "status": "graded", "tests": []}, f)
                except OSError:
                    pass
    os._exit(0)
""" + PLAN


@linux_only
def test_no_process_of_the_submission_outlives_the_grader(tmp_path, honest) -> None:
    files = [str(tmp_path / "report.json"), str(tmp_path / "results.json")]
    sub = _write(tmp_path, ATTACK_DETACHED, RESULTS=files)
    rc, printed, report, results = _command(tmp_path, sub)
    time.sleep(3)    # the forgery came three seconds later
    assert json.loads(Path(files[0]).read_text())["score"] == honest, printed
    assert json.loads(Path(files[1]).read_text())["score"] == honest
    assert rc == 1 and report["status"] == "graded", printed


# ---------------------------------------------------------------------------------------
# 3. The grader's own source, rewritten for the next student
# ---------------------------------------------------------------------------------------

def _digest(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.py"))}


def test_a_submission_cannot_rewrite_the_grader_for_the_next_student(tmp_path,
                                                                     honest) -> None:
    needs_full_isolation()
    grading = ROOT / "minigraph" / "grading"
    before = _digest(grading)
    rc, printed, report, _ = _command(tmp_path, _write(tmp_path, ATTACK_MODULES))
    assert report["score"] == honest, printed
    assert _digest(grading) == before
    rc, printed, report, _ = _command(tmp_path, _write(tmp_path, "WORKED = False\n" + PLAN))
    assert report["score"] == honest and rc == 1, printed   # the next student's


# ---------------------------------------------------------------------------------------
# 4. The reference solution, read from disk
# ---------------------------------------------------------------------------------------

ATTACK_READ = """
import os, minigraph
WORKED = None
repo = os.path.dirname(os.path.dirname(minigraph.__file__))
for path in (@REFERENCE@, os.path.join(repo, "lessons/assignments/solutions/a2.py")):
    try:
        scope = {}
        exec(open(path).read(), scope)
        WORKED = scope["my_planner"]
        break
    except Exception:
        pass

def my_planner(buffers):
    if WORKED:
        return WORKED(buffers)
    out, top, last = {}, 0, -1          # PLAN's honest plan
    for b in sorted(buffers, key=lambda b: b.start):
        if b.start > last:
            top = 0
        out[b.id] = top
        top += b.size
        last = max(last, b.end)
    return out
"""


def test_a_submission_cannot_read_the_reference_solution(tmp_path, honest) -> None:
    needs_full_isolation()
    sub = _write(tmp_path, ATTACK_READ, REFERENCE=str(reference_solution_path("a2")))
    rc, printed, report, results = _command(tmp_path, sub)
    assert report["score"] == results["score"] == honest and rc == 1, printed


ATTACK_SECRETS = """
import os
WORKED = False
for path in @PATHS@:             # private cases, course/ (nbgrader's sources), the git history
    try:
        open(path, "rb").read(1)
        WORKED = True
    except OSError:
        pass
""" + PLAN


def test_a_submission_cannot_read_the_private_cases_the_course_or_git(tmp_path,
                                                                      honest) -> None:
    needs_full_isolation()
    private = tmp_path / "private"
    (private / "a2").mkdir(parents=True)
    write_buffer_case(private / "a2" / "hidden.csv", [Buffer("p", 0, 1, 64)])
    paths = [str(private / "a2" / "hidden.csv"), str(ROOT / "course" / "make_source.py")]
    paths += [str(ROOT / ".git" / "HEAD")] if (ROOT / ".git").exists() else []
    _, _, plain, _ = _command(tmp_path, _write(tmp_path, "WORKED = False\n" + PLAN),
                                 "--private", str(private))
    sub = _write(tmp_path, ATTACK_SECRETS, PATHS=paths)
    rc, printed, report, _ = _command(tmp_path, sub, "--private", str(private))
    # The plain plan earns little (23.1 here: the one-buffer private case, where no reuse is
    # possible, pays in full); reading the secrets earns nothing more.
    assert report["score"] == plain["score"] < 50 and rc == 1, printed


# ---------------------------------------------------------------------------------------
# 5. A private case's content, printed by a failing submission
# ---------------------------------------------------------------------------------------

ATTACK_LEAK = """
import os
def my_planner(buffers):
    if any(str(b.id).startswith("SECRET") for b in buffers):
        text = "LEAK " + repr(buffers)
        print(text)
        if @GARBAGE@:       # and onto every pipe it has, its answers' included
            for fd in range(3, 40):
                try:
                    os.write(fd, (text + "\\n").encode())
                except OSError:
                    pass
        raise ValueError(text)
    return {b.id: 0 for b in buffers}
"""


@pytest.mark.parametrize("garbage", [False, True], ids=["raises", "writes-garbage"])
def test_a_private_case_content_is_never_shown(garbage, tmp_path) -> None:
    private = tmp_path / "private"
    (private / "a2").mkdir(parents=True)
    write_buffer_case(private / "a2" / "hidden.csv",
                      [Buffer(f"SECRET_{k}", k, k + 3, 64 * (k + 1)) for k in range(6)])
    sub = _write(tmp_path, ATTACK_LEAK, GARBAGE=garbage)
    rc, printed, report, results = _command(tmp_path, sub, "--private", str(private))
    everything = printed + json.dumps(report) + json.dumps(results)
    assert "SECRET" not in everything and "LEAK" not in everything
    assert rc == 1 and report["score"] == results["score"]
    if not garbage:
        case = next(c for c in report["cases"] if c["source"] == "private")
        assert case["message"] == "private case failed: the function raised an exception"
        test = next(t for t in results["tests"] if t["name"] == "A2 planner: " + case["name"])
        assert test["output"] == case["message"]


def test_private_messages_name_the_rule_only() -> None:
    from minigraph.grading.report import conceal
    from minigraph.grading.runner import Outcome
    r = CaseResult("private/x", "private", False, 0.0,
                   "the validator rejects the plan: SECRET_1 [0,3] at bytes [0,64) ...",
                   printed="SECRET_1")
    conceal(r, Outcome("ok"))
    assert (r.message, r.printed) == ("private case failed: the validator rejects the plan",
                                      "")
    r = CaseResult("private/x", "private", True, 0.85, "valid, but the arena 640 B is "
                   "larger than refcount's 512 B")
    conceal(r, Outcome("ok"))
    assert r.message == "private case passed: valid, but a larger arena than the baseline's"


# ---------------------------------------------------------------------------------------
# 6. The grader's environment, stdout and process; the limits; the answer pipe
# ---------------------------------------------------------------------------------------

ATTACK_ENVIRON = """
import os
WORKED = any(k in os.environ for k in ("MINIGRAPH_PRIVATE_SEED", "GRADER_TOKEN"))
for pid in os.listdir("/proc"):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    WORKED = WORKED or b"GRADER_TOKEN=" in env or b"MINIGRAPH_PRIVATE_SEED=" in env
""" + PLAN
ATTACK_GRADER = """
import os, signal
WORKED = False
me = os.path.basename(__file__)
for pid in os.listdir("/proc"):        # the grader: the process whose command names this file
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if pid.isdigit() and int(pid) != os.getpid() and me.encode() in cmdline \\
            and b"minigraph.grading" in cmdline:
        try:
            if @HOW@ == "stdout":
                with open(f"/proc/{pid}/fd/1", "w") as f:
                    f.write("FORGED: A2 planner: 47/47 cases passed, score 100.0/100\\n")
            else:
                os.kill(int(pid), getattr(signal, @HOW@))
        except OSError:
            pass
""" + PLAN


def test_a_submission_cannot_read_the_graders_environment(tmp_path) -> None:
    needs_full_isolation()
    env = {"GRADER_TOKEN": "tok-" + uuid.uuid4().hex, "MINIGRAPH_PRIVATE_SEED": "917"}
    _, _, plain, _ = _command(tmp_path, _write(tmp_path, "WORKED = False\n" + PLAN),
                                 env=env)
    rc, printed, report, _ = _command(tmp_path, _write(tmp_path, ATTACK_ENVIRON), env=env)
    assert sum(c["source"] == "private" for c in report["cases"]) == 8   # seen by the grader
    assert report["score"] == plain["score"] < 10 and rc == 1, printed


@pytest.mark.parametrize("how", ["stdout", "SIGSTOP", "SIGKILL"])
def test_a_submission_cannot_reach_the_grader_process(how, tmp_path, honest) -> None:
    needs_full_isolation()
    rc, printed, report, results = _command(tmp_path, _write(tmp_path, ATTACK_GRADER,
                                                             HOW=how))
    assert "FORGED" not in printed
    assert rc == 1 and report["score"] == results["score"] == honest, printed
    assert report["status"] == "graded", printed   # the grader was not stopped or killed


LIMITS = """
import os, resource, signal, time
def my_planner(buffers):
    lines = []
    for name in ("AS", "NPROC", "FSIZE", "CPU", "NOFILE", "CORE"):
        soft, hard = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        lines.append(f"{name} {soft} {hard}")
    try:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)
        lines.append("AS raised")
    except (ValueError, OSError):
        lines.append("AS stays")
    pids = []
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(20)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    lines.append(f"forked {len(pids)}")
    print("\\n".join(lines))
"""


@pytest.mark.skipif(os.name != "posix", reason="resource limits are POSIX")
def test_the_submission_cannot_lift_its_limits_or_fork_without_end(tmp_path) -> None:
    if os.geteuid() == 0 and _jail().user is None:
        pytest.skip("running as root: the kernel does not apply a process limit to root")
    case = BufferCase("one", [Buffer("a", 0, 1, 8)])
    report = grade("a2", _write(tmp_path, LIMITS), cases=[case], leaderboard=False,
                   shrink=False)
    printed = report.cases[0].printed.split("\n")
    limits = {ln.split()[0]: ln.split()[1:] for ln in printed if len(ln.split()) == 3}
    assert set(limits) == {"AS", "NPROC", "FSIZE", "CPU", "NOFILE", "CORE"}, printed
    assert all(soft == hard for soft, hard in limits.values()), limits
    from minigraph.grading.runner import scaled
    from minigraph.grading.sandbox.submission import MEMORY_LIMIT, SESSION_TIME_LIMIT
    assert {k: int(v[0]) for k, v in limits.items() if k != "NPROC"} == {
        "AS": MEMORY_LIMIT, "FSIZE": isolation.FILE_SIZE, "NOFILE": isolation.OPEN_FILES,
        "CORE": 0, "CPU": int(scaled(SESSION_TIME_LIMIT)) + 1}, limits   # the doc's values
    assert "AS stays" in printed
    forked = int(next(ln for ln in printed if ln.startswith("forked")).split()[1])
    assert forked < int(limits["NPROC"][0])
    if _jail().user:
        assert int(limits["NPROC"][0]) == isolation.PROCESSES


HOLDER = """
import ctypes, os, time
if os.fork() == 0:              # a detached grandchild that keeps every pipe open
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"mg-holder-@TAG@", 0, 0, 0)
        time.sleep(100_000)     # longer than any test waits: only a kill ends it
    os._exit(0)

def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""


def _holders(tag: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == f"mg-holder-{tag}"[:15]:
                out.append(int(pid))
        except OSError:
            continue
    return out


HELD = """
import json, sys
from minigraph.grading.cases import planner_cases
from minigraph.grading.sandbox import grade
cases = [c for c in planner_cases() if c.graph is None][:3]
r = grade("a2", sys.argv[1], cases=cases, leaderboard=False, shrink=False)
print(json.dumps({"status": r.status, "total": r.total, "answered": sum(
    "did not finish" not in c.message for c in r.cases)}))
"""


@linux_only
def test_a_held_answer_pipe_does_not_block_the_grader(tmp_path) -> None:
    # The holder outlives any wait of this test, so a grader that waited for the pipe to
    # close would never return (the hang guard fails it); one that does not has killed
    # the holder, and every case was answered, none ended by a time limit.
    tag = uuid.uuid4().hex[:4]
    sub = _write(tmp_path, HOLDER.replace("@TAG@", tag))
    try:
        r = subprocess.run([sys.executable, "-c", HELD, str(sub)], cwd=ROOT,
                           capture_output=True, text=True, timeout=HANG_GUARD)
    finally:
        left = _holders(tag)
        for pid in left:   # what the grader left (a failure): not left running after it
            os.kill(pid, 9)
    assert not left, left
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got == {"status": "graded", "total": 3, "answered": 3}, got


# ---------------------------------------------------------------------------------------
# 7. A score printed as full marks is full marks
# ---------------------------------------------------------------------------------------

def test_a_line_reading_full_marks_means_full_marks() -> None:
    def report(points):
        return GradeReport("A2 planner", [CaseResult(f"c{k}", "public", True, p)
                                          for k, p in enumerate(points)])
    almost = report([1.0] * 49 + [0.99])           # 99.98
    assert almost.score == 99.98 and not almost.full_marks
    assert "score 99.98/100" in almost.summary()
    nearly = report([1.0] * 99 + [0.9999])          # 99.9999: rounds down, never to 100
    assert nearly.score == 99.99 and "score 99.99/100" in nearly.summary()
    assert "score 100.0/100" in report([1.0] * 3).summary()
    assert "score 87.6/100" in report([1.0, 0.752]).summary()


# ---------------------------------------------------------------------------------------
# 8. The results files are written in one step; one grading at a time per sandbox user;
# each setting is found and said as the doc's table says
# ---------------------------------------------------------------------------------------

def test_results_are_renamed_into_place_not_written_through(tmp_path) -> None:
    from minigraph.grading.sandbox.command import main
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM")
    out = tmp_path / "results.json"
    out.symlink_to(victim)            # made at the results' path beforehand
    few = tmp_path / "sub.py"
    few.write_text("def my_liveness(graph, schedule, alignment=512):\n"
                   "    raise NotImplementedError\n")
    assert main(["a1", str(few), "--quiet", "--gradescope", str(out)]) == 1
    assert victim.read_text() == "VICTIM"
    assert not out.is_symlink() and json.loads(out.read_text())["score"] == 0


@linux_only
def test_one_grading_at_a_time_holds_the_sandbox_users_lock(tmp_path, monkeypatch) -> None:
    jail = isolation.jail()
    if jail.user is None:
        pytest.skip("no sandbox user: the grader runs as your own user")
    # A lock file of its own: a grading on the other xdist worker may hold the real one.
    monkeypatch.setattr(isolation, "lock_path", lambda: str(tmp_path / "sandbox.lock"))
    probe = ("import fcntl, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
             "except BlockingIOError:\n    print('held')\n")
    held = isolation.lock(jail)
    try:
        busy = subprocess.run([sys.executable, "-c", probe, isolation.lock_path()],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    finally:
        isolation.unlock(held)
    free = subprocess.run([sys.executable, "-c", probe, isolation.lock_path()],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    assert (busy, free) == ("held", "free")


@pytest.mark.parametrize("setting, expected", [
    ("not linux", "not Linux: the submission runs as your own user"),
    ("root, nothing works", "the submission runs as root, with its limits only"),
    ("root, no bubblewrap", ""),
    ("root, bubblewrap", ""),
    ("user, bubblewrap", "not root, so the submission runs as your own user, inside "
                         "bubblewrap"),
    ("user, no bubblewrap", "not root, and bubblewrap is not installed"),
])
def test_each_setting_is_said_in_the_reports_line(setting, expected, monkeypatch) -> None:
    # jail() tries the strongest setting first; probes are replaced here by the outcome
    # each setting has, and the line the report would print is checked.
    root = setting.startswith("root")
    user = ("minigraph-sandbox", 999, 995)
    monkeypatch.setattr(isolation, "linux", lambda: setting != "not linux")
    monkeypatch.setattr(os, "geteuid", lambda: 0 if root else 1000)
    monkeypatch.setattr(isolation, "sandbox_user", lambda: user)
    monkeypatch.setattr(shutil, "which", lambda name: None if "no bubblewrap" in setting
                        else "/usr/bin/bwrap")
    works = {"root, bubblewrap": {(user, "/usr/bin/bwrap")},
             "root, no bubblewrap": {(user, None)},
             "user, bubblewrap": {(None, "/usr/bin/bwrap")}}.get(setting, set())
    monkeypatch.setattr(isolation, "probe", lambda j: "" if (j.user, j.bwrap) in works
                        else "it failed")
    jail = isolation.jail.__wrapped__()
    assert expected in jail.partial if expected else not jail.partial, jail
    assert (jail.user is not None) == (setting in ("root, bubblewrap", "root, no bubblewrap"))
    assert (jail.bwrap is not None) == setting.endswith(", bubblewrap")


# ---------------------------------------------------------------------------------------
# As an ordinary user: partial isolation, said in one line; what holds there
# ---------------------------------------------------------------------------------------

ORDINARY = isolation.Jail(None, None, "not root, and bubblewrap is not installed: the "
                                      "submission runs as your own user (simulated)")


@pytest.fixture
def as_ordinary_user(monkeypatch):
    monkeypatch.setattr(isolation, "jail", lambda: ORDINARY)


@linux_only
def test_as_an_ordinary_user_partial_isolation_is_said_in_one_line(as_ordinary_user,
                                                                    tmp_path) -> None:
    cases = [c for c in planner_cases() if c.graph is None][:2]
    report = grade("a2", _write(tmp_path, HOLDER.replace("@TAG@", "ou")), cases=cases,
                   leaderboard=False, shrink=False)
    lines = [ln for ln in report.summary().splitlines() if ln.startswith("Isolation:")]
    assert lines == [f"Isolation: partial isolation: {ORDINARY.partial}"]
    assert report.to_dict()["isolation"] == report.isolation
    assert not _holders("ou")       # the cleanup holds as your own user too


@linux_only
def test_as_an_ordinary_user_a_changed_grader_file_voids_the_grade(as_ordinary_user,
                                                                    tmp_path,
                                                                    monkeypatch) -> None:
    # As your own user the submission can write the grader's files: what it changed for
    # the next grading is found (ctime, which it cannot set back) and it scores 0.
    module = tmp_path / f"mg_probe_{uuid.uuid4().hex[:8]}.py"
    module.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__(module.stem)
    code = f"open({str(module)!r}, 'a').write('X = 2\\n')\n" + "WORKED = False\n" + PLAN
    cases = [c for c in planner_cases() if c.graph is None][:2]
    report = grade("a2", _write(tmp_path, code), cases=cases, leaderboard=False)
    sys.modules.pop(module.stem, None)
    assert report.score == 0, report.summary()
    assert report.status.startswith("not graded: a file of the grader changed while your "
                                    f"file ran ({module})")


@pytest.mark.skipif(os.name != "posix", reason="POSIX users")
def test_as_an_ordinary_user_the_command_says_isolation_is_partial(tmp_path) -> None:
    if os.geteuid() != 0:
        sub = _write(tmp_path, "WORKED = False\n" + PLAN)
        cmd = [sys.executable, "-m", "minigraph.grading", "a2", str(sub), "--quiet"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD, cwd="/")
    else:                       # run the grader as nobody, if nobody can run this Python
        if not shutil.which("runuser"):
            pytest.skip("no runuser to run the grader as an ordinary user")
        probe = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                                "import minigraph"], capture_output=True, text=True)
        if probe.returncode != 0:
            pytest.skip(f"nobody cannot run {sys.executable} with minigraph: "
                        f"{probe.stderr.strip()[-200:]}")
        folder = Path(tempfile.mkdtemp(prefix="minigraph-test-"))   # where nobody reads
        try:
            os.chmod(folder, 0o755)
            sub = _write(folder, "WORKED = False\n" + PLAN)
            os.chmod(sub, 0o644)
            cmd = ["runuser", "-u", "nobody", "--", sys.executable, "-m",
                   "minigraph.grading", "a2", str(sub), "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD, cwd="/")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("Isolation:")]
    assert len(lines) == 1 and lines[0].startswith("Isolation: partial isolation: not root"), \
        r.stdout[-2000:] + r.stderr[-2000:]
    assert "cases passed, score" in r.stdout


# ---------------------------------------------------------------------------------------
# 9. Issue 51: what a fork bomb and a queued grading are told
# ---------------------------------------------------------------------------------------

BOMB = """
import os, time
for _ in range(400):             # at load time: every process the limit allows
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)

def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""


@linux_only
def test_a_fork_bomb_is_told_the_process_limit_not_that_it_exited(tmp_path) -> None:
    if os.geteuid() == 0 and _jail().user is None:
        pytest.skip("running as root: the kernel does not apply a process limit to root")
    case = BufferCase("one", [Buffer("a", 0, 1, 8)])
    report = grade("a2", _write(tmp_path, BOMB), cases=[case], leaderboard=False,
                   shrink=False)
    assert report.score == 0, report.summary()
    assert report.status == ("not graded: your file's processes reached the sandbox's limit "
                             f"of {isolation.PROCESSES} processes and threads (a fork "
                             "bomb?), so the grading process could not start another: "
                             "killed"), report.status
    assert "exit" not in report.status


@pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")
def test_a_grading_waiting_for_the_lock_says_so(tmp_path) -> None:
    import select
    path = str(tmp_path / "sandbox.lock")
    hold = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n")
    wait = ("import sys\nfrom minigraph.grading.sandbox import isolation\n"
            "isolation.lock_path = lambda: sys.argv[1]\n"
            "held = isolation.lock(isolation.Jail(('minigraph-sandbox', 999, 995), None))\n"
            "print('got', held, flush=True)\nisolation.unlock(held)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    free = subprocess.run([sys.executable, "-c", wait, path], capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env)
    assert (free.stdout, free.stderr) == ("got True\n", ""), free   # free: no message
    holder = subprocess.Popen([sys.executable, "-c", hold, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        waiter = subprocess.Popen([sys.executable, "-c", wait, path], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        ready, _, _ = select.select([waiter.stderr], [], [], HANG_GUARD)   # a hang guard
        said = waiter.stderr.readline() if ready else ""
        assert said.startswith("waiting for another grading to finish: one grading at a "
                               "time runs as the sandbox user minigraph-sandbox "
                               f"(lock {path}) ..."), said
        assert waiter.poll() is None          # still waiting: the lock is held
    finally:
        holder.stdin.close()                  # the other grading ends
        holder.wait(timeout=HANG_GUARD)
    out, err = waiter.communicate(timeout=HANG_GUARD)
    assert out == "got True\n" and err == "", (out, err)
