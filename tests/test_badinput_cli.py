"""Bad-input battery, class 5: the command line (issue 12).

Bad values end in an argparse usage error (exit 2) before any work starts; ``--resume``
never loses results; kept results keep their provenance; Ctrl-C ends with one line.
Every case runs ``check`` on a toy registry (no real theorem runs), so the file is fast.
"""

import json

import pytest
import torch

from mhacore import theorems
from mhacore.__main__ import check, main
from mhacore.theorems import Measurement


@pytest.fixture
def calls(monkeypatch):
    """A registry of three toy checks; the list records which ran."""
    ran = []
    registry = {}
    monkeypatch.setattr(theorems._registry, "REGISTRY", registry)
    monkeypatch.setattr(theorems, "REGISTRY", registry)
    for name, estimate in (("toy-a", 0.0), ("toy-b", 0.05), ("toy-c", 0.01)):
        def run(scale, device, seed, name=name, estimate=estimate):
            ran.append(name)
            return Measurement(estimate=estimate, prediction=0.0, standard_error=0.05)
        theorems.register(name, title=name, chapter="c", claim="mean is 0", kind="model",
                          claim_id="C0")(run)
    return ran


def _exit_code(argv):
    with pytest.raises(SystemExit) as info:
        check(argv)
    return info.value.code


ARGPARSE_ERRORS = [
    (["--seed", "-1"], r"--seed: must be an integer >= 0; got -1"),
    (["--seed", "abc"], r"--seed: must be an integer >= 0; got 'abc'"),
    (["--seed", "1.5"], r"--seed: must be an integer >= 0; got '1.5'"),
    (["--scale", "huge"], r"--scale: invalid choice"),
    (["--device", "nonsense"], r"--device: .*not a torch device"),
    (["--device", "meta"], r"--device: .*holds no data"),
    (["--device", "cuda:99"], r"--device: .*not available"),
    (["--device", "xla"], r"--device: .*'xla', which is not available"),
    (["--theorem", "nope"], r"unknown theorem id"),
    (["--resume"], r"--resume needs --out"),
]


@pytest.mark.parametrize("argv, pattern", ARGPARSE_ERRORS)
def test_bad_values_are_usage_errors(calls, capsys, argv, pattern):
    assert _exit_code(argv) == 2
    assert calls == []
    import re
    assert re.search(pattern, capsys.readouterr().err), capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_unavailable_cuda_is_a_usage_error(calls, capsys):
    assert _exit_code(["--device", "cuda"]) == 2
    assert "not available" in capsys.readouterr().err and calls == []


def test_out_that_is_a_directory_fails_before_work(calls, capsys, tmp_path):
    assert _exit_code(["--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err and calls == []


@pytest.mark.parametrize("below", ["report.json", "sub/report.json"])
def test_out_under_a_file_fails_before_work(calls, capsys, tmp_path, below):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert _exit_code(["--out", str(blocker / below)]) == 2
    err = capsys.readouterr().err
    assert f"--out: cannot write {blocker / below}: {blocker} is not a directory" in err
    assert "File exists" not in err and calls == []


@pytest.mark.parametrize("command", ["check", "sweep"])
def test_out_in_a_missing_folder_is_refused(calls, capsys, tmp_path, command):
    out = tmp_path / "new" / "deeper" / "report.json"
    argv = [command, *(["heads-width", "--size", "tiny"] if command == "sweep" else []),
            "--out", str(out)]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and calls == []
    assert f"folder {out.parent} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_check_report_gets_the_usual_permissions(calls, tmp_path):
    import os

    out = tmp_path / "report.json"
    mask = os.umask(0o002)
    try:
        assert check(["--theorem", "toy-a", "--out", str(out)]) == 0
    finally:
        os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o664


def _refused_before_work(command, tmp_path, calls):
    """Run ``check`` or ``sweep`` (tiny) with an ``--out``: it must exit 2 before any work."""
    out = tmp_path / "r.json"
    argv = [command, *(["heads-width", "--size", "tiny"] if command == "sweep" else []),
            "--out", str(out)]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and calls == [] and not out.exists()


@pytest.mark.parametrize("command", ["check", "sweep"])
def test_several_slurm_tasks_without_torchrun_refuse(calls, capsys, monkeypatch, tmp_path,
                                                      command):
    """srun -n 2 python -m mhacore ...: each copy would run the whole job and write the
    same --out; they refuse before any work."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    _refused_before_work(command, tmp_path, calls)
    assert "SLURM started 2 tasks of this command without torchrun" in capsys.readouterr().err
    from mhacore import distributed
    with pytest.raises(RuntimeError, match="without torchrun"):
        distributed.setup("cpu")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert distributed.setup("cpu").world_size == 1


@pytest.mark.parametrize("command", ["check", "sweep"])
@pytest.mark.parametrize("env, message", [
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "RANK must be an integer >= 0 (torchrun sets it); got 'abc'"),
    ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK must be below WORLD_SIZE = 2"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE must be an integer >= 1"),
    ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "-1"}, "LOCAL_RANK must be an integer >= 0"),
    ({"MHACORE_DIST_TIMEOUT_S": "abc"}, "MHACORE_DIST_TIMEOUT_S must be a finite number"),
    ({"MHACORE_DIST_TIMEOUT_S": "0"}, "MHACORE_DIST_TIMEOUT_S must be a finite number"),
    ({"MHACORE_DIST_TIMEOUT_S": "inf"}, "MHACORE_DIST_TIMEOUT_S must be a finite number"),
    # set by hand, not by torchrun: used to end in torch's traceback from its rendezvous
    ({"RANK": "1", "WORLD_SIZE": "2"}, ("WORLD_SIZE = 2 asks for 2 ranks, but MASTER_ADDR and "
                                        "MASTER_PORT are not set: start the ranks with torchrun")),
    ({"WORLD_SIZE": "2"}, "but RANK, MASTER_ADDR and MASTER_PORT are not set"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc"},
     "MASTER_PORT must be a TCP port from 1 to 65535 (torchrun sets it); got 'abc'"),
])
def test_bad_launch_variables_are_usage_errors_before_any_work(calls, capsys, monkeypatch, tmp_path,
                                                               command, env, message):
    """A mistyped launch variable is one clear message (exit 2), not a traceback or a
    30-minute wait for a rendezvous that cannot happen."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MHACORE_DIST_TIMEOUT_S", "SLURM_NTASKS",
                 "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _refused_before_work(command, tmp_path, calls)
    assert message in capsys.readouterr().err


def test_sigterm_ends_a_plain_check_like_ctrl_c(calls, capsys, tmp_path):
    import os
    import signal

    def terminated(scale, device, seed):
        os.kill(os.getpid(), signal.SIGTERM)
    theorems.register("toy-term", title="", chapter="c", claim="", kind="model", claim_id="C0")(terminated)
    out = tmp_path / "r.json"
    previous = signal.getsignal(signal.SIGTERM)
    assert check(["--theorem", "toy-a", "--theorem", "toy-term", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(f"interrupted: 1 finished check(s) are saved in {out}; rerun with "
                    "--resume to continue")]
    assert signal.getsignal(signal.SIGTERM) is previous


def _report(tmp_path, argv=("--theorem", "toy-a")):
    out = tmp_path / "report.json"
    assert check([*argv, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("change, pattern", [
    (["--seed", "7"], r"seed"),
    (["--scale", "large"], r"scale"),
])
def test_resume_refuses_a_different_run(calls, capsys, tmp_path, change, pattern):
    out = _report(tmp_path)
    before = out.read_text()
    calls.clear()
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume", *change]) == 1
    assert out.read_text() == before and calls == []
    err = capsys.readouterr().err
    assert "--resume" in err and pattern in err and "refusing" in err


def test_resume_refuses_a_different_device(calls, capsys, tmp_path):
    out = _report(tmp_path)
    report = json.loads(out.read_text())
    report["device"] = "cuda"
    out.write_text(json.dumps(report))
    before = out.read_text()
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert out.read_text() == before and "device" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["not json {", "[1, 2]", '{"results": 3}', '{"a": 1}', ""])
def test_resume_refuses_a_file_that_is_not_a_report(calls, capsys, tmp_path, content):
    out = tmp_path / "report.json"
    out.write_text(content)
    assert check(["--theorem", "toy-a", "--out", str(out), "--resume"]) == 1
    assert out.read_text() == content and calls == []
    assert "is not a check report" in capsys.readouterr().err


def test_resume_with_a_subset_keeps_the_other_results(calls, tmp_path):
    out = _report(tmp_path, ("--theorem", "toy-a", "--theorem", "toy-b"))
    calls.clear()
    assert check(["--theorem", "toy-c", "--out", str(out), "--resume"]) == 0
    ids = [r["theorem_id"] for r in json.loads(out.read_text())["results"]]
    assert ids == ["toy-a", "toy-b", "toy-c"] and calls == ["toy-c"]


def test_kept_results_keep_their_provenance(calls, tmp_path):
    out = _report(tmp_path)
    first = json.loads(out.read_text())["provenance"]
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 0
    report = json.loads(out.read_text())
    kept = {r["theorem_id"]: r for r in report["results"]}
    assert kept["toy-a"]["provenance"]["command"] == first["command"]
    assert kept["toy-a"]["provenance"]["date"] == first["date"]
    assert "--resume" in report["provenance"]["command"]
    # a third run keeps both kept provenances as they were
    assert check(["--theorem", "toy-c", "--out", str(out), "--resume"]) == 0
    again = {r["theorem_id"]: r for r in json.loads(out.read_text())["results"]}
    assert again["toy-a"]["provenance"] == kept["toy-a"]["provenance"]
    assert again["toy-b"]["provenance"]["command"] == report["provenance"]["command"]


def test_without_resume_an_existing_report_is_replaced(calls, tmp_path):
    out = _report(tmp_path)
    assert check(["--theorem", "toy-b", "--out", str(out)]) == 0
    assert [r["theorem_id"] for r in json.loads(out.read_text())["results"]] == ["toy-b"]


def test_a_theorem_named_twice_runs_once(calls, tmp_path):
    out = tmp_path / "r.json"
    assert check(["--theorem", "toy-a", "--theorem", "toy-a", "--theorem", "toy-b", "--theorem", "toy-a",
                  "--out", str(out)]) == 0
    assert calls == ["toy-a", "toy-b"]
    assert [r["theorem_id"] for r in json.loads(out.read_text())["results"]] == ["toy-a", "toy-b"]


def test_ctrl_c_prints_one_line_of_what_was_saved(calls, monkeypatch, capsys, tmp_path):
    def interrupted(scale, device, seed):
        raise KeyboardInterrupt
    theorems.register("toy-stop", title="", chapter="c", claim="", kind="model", claim_id="C0")(interrupted)
    out = tmp_path / "r.json"
    assert check(["--theorem", "toy-a", "--theorem", "toy-stop", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0] and "1 finished check" in err[0] and str(out) in err[0]
    assert [r["theorem_id"] for r in json.loads(out.read_text())["results"]] == ["toy-a"]


def test_ctrl_c_without_out_says_nothing_was_saved(calls, capsys):
    def interrupted(scale, device, seed):
        raise KeyboardInterrupt
    theorems.register("toy-stop", title="", chapter="c", claim="", kind="model", claim_id="C0")(interrupted)
    assert check(["--theorem", "toy-stop"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing saved" in err[0]


def test_help_shows_the_default_seed(calls, capsys):
    assert _exit_code(["--help"]) == 0
    assert f"default: {theorems.DEFAULT_SEED}" in capsys.readouterr().out


def test_report_names_the_device_used(calls, tmp_path):
    out = tmp_path / "r.json"
    assert check(["--theorem", "toy-a", "--device", "CPU", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["results"][0]["device"] == "cpu"


def test_main_passes_usage_errors_through(calls):
    with pytest.raises(SystemExit) as info:
        main(["check", "--seed", "-3"])
    assert info.value.code == 2


def test_main_without_a_command_is_a_usage_error():
    assert main([]) == 2


def test_help_of_main_exits_0(capsys):
    for flag in ("--help", "-h"):
        assert main([flag]) == 0
        out = capsys.readouterr().out
        assert "usage: python -m mhacore" in out and "check" in out


def test_doctor_refuses_unknown_options(capsys):
    with pytest.raises(SystemExit) as info:
        main(["doctor", "--bogus"])
    assert info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_doctor_help_exits_0(capsys):
    with pytest.raises(SystemExit) as info:
        main(["doctor", "--help"])
    assert info.value.code == 0 and "doctor" in capsys.readouterr().out


def test_the_write_check_leaves_the_users_files_alone(calls, tmp_path):
    out = tmp_path / "r.json"
    neighbours = {out.with_name("r.json.probe"): "mine", out.with_name("r.json.tmp"): "also mine"}
    for path, text in neighbours.items():
        path.write_text(text)
    assert check(["--theorem", "toy-a", "--out", str(out)]) == 0
    assert {p: p.read_text() for p in neighbours} == neighbours
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.probe", "r.json.tmp"]


@pytest.mark.parametrize("edit", [
    lambda r: r["results"][0].pop("passed"),
    lambda r: r["results"][0].update(passed="yes"),
    lambda r: r["results"][0].update(theorem_id=["x"]),
    lambda r: r["results"][0].update(theorem_id=3),
    lambda r: r.update(seed="0"),
], ids=["no-passed", "passed-str", "id-list", "id-int", "seed-str"])
def test_resume_refuses_a_report_of_the_wrong_structure(calls, capsys, tmp_path, edit):
    out = _report(tmp_path)
    report = json.loads(out.read_text())
    edit(report)
    out.write_text(json.dumps(report))
    before = out.read_text()
    calls.clear()
    assert check(["--theorem", "toy-a", "--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert out.read_text() == before and calls == []
    assert "is not a check report" in capsys.readouterr().err


def test_under_torchrun_only_rank_0_prints_a_usage_error(calls, capsys, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun sets these in every rank
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert _exit_code(["--seed", "-1"]) == 2
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert _exit_code(["--seed", "-1"]) == 2
    assert "--seed: must be an integer >= 0; got -1" in capsys.readouterr().err


def test_a_peer_that_never_joins_is_one_line(calls, capsys, monkeypatch, tmp_path):
    """Rank 0 of 2 with no second rank used to end in torch's DistStoreError traceback."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    for name, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)), ("WORLD_SIZE", "2"),
                        ("RANK", "0"), ("MHACORE_DIST_TIMEOUT_S", "1")):
        monkeypatch.setenv(name, value)
    assert check(["--out", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err
    assert f"rank 0 of 2 could not join the process group at 127.0.0.1:{port}" in err
    assert "Traceback" not in err and calls == []


def test_a_rank_set_by_hand_does_not_silence_a_usage_error(calls, capsys, monkeypatch):
    """RANK=1 without torchrun used to end with exit 2 and no word."""
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert _exit_code(["--seed", "-1"]) == 2
    assert "--seed: must be an integer >= 0; got -1" in capsys.readouterr().err


# --- --out names only a report: never a device, FIFO or another file; one run at a time ---

def test_out_that_is_not_a_report_is_left_alone(calls, capsys, tmp_path):
    """A typo such as ``--out README.md`` used to overwrite the file with JSON."""
    readme = tmp_path / "README.md"
    readme.write_text("# my notes\n")
    assert _exit_code(["--theorem", "toy-a", "--out", str(readme)]) == 2
    assert readme.read_text() == "# my notes\n" and calls == []
    assert "exists and is not a check report" in capsys.readouterr().err


@pytest.mark.parametrize("resume", [[], ["--resume"]], ids=["plain", "resume"])
def test_out_that_is_a_fifo_is_refused_at_once(calls, capsys, tmp_path, resume):
    """``--resume`` on a FIFO used to block for ever reading it."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert _exit_code(["--theorem", "toy-a", "--out", str(fifo), *resume]) == 2
    assert fifo.is_fifo() and calls == []
    assert "is a FIFO" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid") or __import__("os").getuid() != 0,
                    reason="making a device node needs root")
def test_out_that_is_a_device_is_refused(calls, capsys, tmp_path):
    """As root, ``--out /dev/null`` used to replace the device by a JSON file; here a
    copy of that device in a temporary folder stands in for it."""
    import os
    import stat

    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    assert _exit_code(["--theorem", "toy-a", "--out", str(node)]) == 2
    assert stat.S_ISCHR(node.stat().st_mode) and calls == []
    assert "is a device" in capsys.readouterr().err


def test_a_symlinked_report_is_updated_through_the_link(calls, tmp_path):
    target = _report(tmp_path)
    link = tmp_path / "latest.json"
    link.symlink_to(target.name)
    assert check(["--theorem", "toy-b", "--out", str(link), "--resume"]) == 0
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert [r["theorem_id"] for r in json.loads(target.read_text())["results"]] == [
        "toy-a", "toy-b"]


def test_a_second_run_on_the_same_report_is_refused_naming_the_first(calls, capsys, tmp_path):
    """Two --resume runs on one --out used to drop each other's results."""
    import os

    from mhacore._report import report_lock

    out = _report(tmp_path)
    before = out.read_text()
    with report_lock(out):
        assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert out.read_text() == before and calls == ["toy-a"]
    assert f"being written by another run (process {os.getpid()})" in capsys.readouterr().err
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 0  # released
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_sweep_refuses_a_report_another_run_holds(calls, tmp_path):
    from mhacore import sweeps
    from mhacore._report import ReportBusy, report_lock

    out = tmp_path / "sweep.json"
    with report_lock(out), pytest.raises(ReportBusy, match="being written by another run"):
        sweeps.run_sweep("tiny", out=out)
    assert not out.exists()
    with pytest.raises(ValueError, match="is not a sweep report"):
        sweeps.run_sweep("tiny", out=_report(tmp_path))


def test_out_that_loops_or_names_a_folder_is_refused(calls, capsys, tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop.name)
    assert _exit_code(["--theorem", "toy-a", "--out", str(loop)]) == 2
    assert loop.is_symlink() and "loops" in capsys.readouterr().err
    assert _exit_code(["--theorem", "toy-a", "--out", f"{tmp_path}/newdir/"]) == 2
    assert not (tmp_path / "newdir").exists() and "names a folder" in capsys.readouterr().err


def test_resume_on_deeply_nested_json_is_refused_with_a_message(calls, capsys, tmp_path):
    out = tmp_path / "report.json"
    out.write_text("[" * 100_000 + "]" * 100_000)
    assert check(["--theorem", "toy-a", "--out", str(out), "--resume"]) == 1
    assert "nested too deeply" in capsys.readouterr().err and calls == []


def test_a_report_keeps_its_permissions_when_rewritten(calls, tmp_path):
    out = _report(tmp_path)
    out.chmod(0o600)
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 0
    assert out.stat().st_mode & 0o777 == 0o600


def test_a_lock_file_that_is_a_link_or_fifo_is_not_used(calls, capsys, tmp_path):
    import os

    out = _report(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    lock = tmp_path / f".{out.name}.lock"
    lock.symlink_to(victim)
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert victim.read_text() == "precious" and "cannot use the lock file" in capsys.readouterr().err
    lock.unlink()
    os.mkfifo(lock)
    assert check(["--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert "not a regular file" in capsys.readouterr().err


# --- after the work: a report that cannot be written, kept results that cannot be read ---

def _no_space_after(monkeypatch, calls_allowed):
    """``os.replace`` of the report writer succeeds ``calls_allowed`` times, then the disk
    is full."""
    import errno
    import os

    from mhacore import _report

    real, seen = os.replace, []

    def replace(src, dst):
        seen.append(dst)
        if len(seen) > calls_allowed:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst)
    monkeypatch.setattr(_report.os, "replace", replace)
    return real


def test_a_full_disk_during_a_check_is_one_line(calls, capsys, monkeypatch, tmp_path):
    """A full disk while rewriting the report used to end in a traceback."""
    import os

    out = tmp_path / "report.json"
    real = _no_space_after(monkeypatch, 1)
    assert check(["--theorem", "toy-a", "--theorem", "toy-b", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(f"--out: cannot write {out} (No space left on device); it keeps what it "
                    "held before; rerun with --resume once it can be written")]
    assert [r["theorem_id"] for r in json.loads(out.read_text())["results"]] == ["toy-a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary file
    monkeypatch.setattr(os, "replace", real)  # room again: the rerun keeps toy-a
    assert check(["--theorem", "toy-a", "--theorem", "toy-b", "--out", str(out), "--resume"]) == 0
    assert calls == ["toy-a", "toy-b", "toy-b"]


def test_a_full_disk_during_a_sweep_is_one_line(calls, capsys, monkeypatch, tmp_path):
    from mhacore import sweeps

    monkeypatch.setattr(sweeps, "_unit", lambda unit, s, ctx: {"bias_sq": [], "spread": []})
    out = tmp_path / "sweep.json"
    _no_space_after(monkeypatch, 0)
    assert main(["sweep", "heads-width-fixed", "--size", "tiny", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"--out: cannot write {out} (No space left on device)" in err
    assert "Traceback" not in err and not out.exists() and list(tmp_path.iterdir()) == []


def test_no_space_for_the_lock_file_is_one_line(calls, capsys, monkeypatch, tmp_path):
    import errno
    import os

    from mhacore import _report

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(_report.os, "ftruncate", full)
    out = tmp_path / "report.json"
    assert check(["--theorem", "toy-a", "--out", str(out)]) == 1
    assert "--out: cannot write the lock file" in capsys.readouterr().err
    assert calls == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("edit", [
    lambda text: text.replace('"estimate": 0.0', '"estimate": ' + "9" * 5000, 1),
    lambda text: text.replace('"estimate": 0.0', '"estimate": ' + "9" * 400, 1),
], ids=["5000-digit-integer", "integer-beyond-a-float"])
def test_resume_refuses_huge_numbers_with_a_message(calls, capsys, tmp_path, edit):
    """An integer of 5000 digits (beyond Python's int-from-text limit) or one too large for
    a float used to end in a traceback."""
    out = _report(tmp_path)
    out.write_text(edit(out.read_text()))
    before = out.read_text()
    calls.clear()
    assert check(["--theorem", "toy-a", "--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert out.read_text() == before and calls == []
    assert "is not a check report" in capsys.readouterr().err


@pytest.mark.parametrize("edit", [
    lambda r: r.pop("tolerance_rule"),
    lambda r: r.update(tolerance="x"),
    lambda r: r.update(details=[]),
    lambda r: r.update(details={"conditions": [1]}),
    lambda r: r.update(kind=3),
], ids=["no-tolerance-rule", "tolerance", "details", "conditions", "kind"])
def test_resume_of_a_calibration_refuses_results_it_cannot_summarise(calls, capsys, tmp_path, edit):
    """A kept result the calibration cannot read used to crash the run after the missing
    checks had run (their results lost)."""
    out = tmp_path / "report.json"
    assert check(["--theorem", "toy-a", "--seeds", "1-2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    report["results"] = report["results"][:1]
    edit(report["results"][0])
    out.write_text(json.dumps(report))
    calls.clear()
    assert check(["--theorem", "toy-a", "--seeds", "1-2", "--out", str(out), "--resume"]) == 1
    assert json.loads(out.read_text()) == report and calls == []
    assert "is not a check report (wrong entries: results[0]." in capsys.readouterr().err


def test_sweep_resume_refuses_huge_numbers(tmp_path):
    from mhacore import sweeps

    out = tmp_path / "sweep.json"
    out.write_text('{"settings": {"seed": ' + "9" * 5000 + '}, "units": {}}')
    with pytest.raises(sweeps.ResumeRefused, match="not a sweep report"):
        sweeps.run_sweep("tiny", out=out, resume=True)
    s = sweeps.settings("tiny")
    block = [[10**400] * s["block_size"]] * len(sweeps.splits(4))
    assert sweeps.unit_problem((4, 20, 0), {"bias_sq": block, "spread": block}, s) == \
        "bias_sq is not an array of finite numbers"


@pytest.mark.parametrize("edit", [lambda r: r.update(estimate=1.0), lambda r: r.update(passed=False)],
                         ids=["passes-with-a-gap-beyond-its-tolerance", "fails-within-its-tolerance"])
def test_resume_refuses_a_verdict_its_own_numbers_contradict(calls, capsys, tmp_path, edit):
    """A kept result whose "passed" disagrees with its gap and tolerance used to be kept and
    counted (the second adversarial review edited a report's estimate)."""
    out = _report(tmp_path)
    report = json.loads(out.read_text())
    edit(report["results"][0])
    out.write_text(json.dumps(report))
    calls.clear()
    assert check(["--theorem", "toy-a", "--theorem", "toy-b", "--out", str(out), "--resume"]) == 1
    assert calls == [] and "but its gap, tolerance and conditions say" in capsys.readouterr().err
