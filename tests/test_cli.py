"""``python -m mhacore doctor`` and ``check``, and the theorem registry behind ``check``."""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mhacore import theorems
from mhacore.__main__ import check, doctor, main
from mhacore.theorems import Measurement

BOOK_ROOT = Path(__file__).resolve().parents[1]


def test_doctor_reports_the_stack_and_passes():
    out = io.StringIO()
    assert doctor(stream=out) == 0
    text = out.getvalue()
    for name in ("numpy", "torch", "sympy", "torch_threads", "deterministic_algorithms"):
        assert name in text


def test_doctor_fails_clearly_when_a_required_package_is_missing():
    out = io.StringIO()
    status = doctor(required={"numpy": "numpy", "nope": "surely-not-installed-pkg"}, stream=out)
    assert status == 1
    assert "missing required packages: surely-not-installed-pkg" in out.getvalue()


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "mhacore", "doctor"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "all required packages are present" in proc.stdout


def test_unknown_command_prints_usage():
    assert main(["frobnicate"]) == 2


@pytest.fixture
def toy_registry(monkeypatch):
    """Replace the registry with two toy checks: one that holds, one that fails."""
    calls = []
    registry = {}
    monkeypatch.setattr(theorems._registry, "REGISTRY", registry)
    monkeypatch.setattr(theorems, "REGISTRY", registry)

    @theorems.register("toy-holds", title="t", chapter="c", claim="mean is 0", kind="model",
                       claim_id="C0")
    def _holds(scale, device, seed):
        calls.append("toy-holds")
        return Measurement(estimate=0.1, prediction=0.0, standard_error=0.05)

    @theorems.register("toy-fails", title="t", chapter="c", claim="mean is 1", kind="model",
                       claim_id="C0")
    def _fails(scale, device, seed):
        calls.append("toy-fails")
        return Measurement(estimate=0.0, prediction=1.0, standard_error=0.05)

    return calls


def test_check_writes_report_with_provenance_and_resumes(toy_registry, tmp_path):
    out = tmp_path / "report.json"
    assert check(["--theorem", "toy-holds", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["results"][0]["theorem_id"] == "toy-holds"
    assert report["results"][0]["passed"] is True
    prov = report["provenance"]
    for key in ("date", "command", "packages", "device", "python"):
        assert key in prov
    assert prov["packages"]["torch"].startswith("2.13")
    # resume keeps the finished check and runs only the new one
    assert check(["--theorem", "toy-holds", "--theorem", "toy-fails",
                  "--out", str(out), "--resume"]) == 1
    assert toy_registry == ["toy-holds", "toy-fails"]
    ids = [r["theorem_id"] for r in json.loads(out.read_text())["results"]]
    assert ids == ["toy-holds", "toy-fails"]


@pytest.mark.parametrize("spoil, pattern", [
    (lambda rs: rs.append(dict(rs[0])), r"results\[1\] a second result of toy-holds at seed"),
    (lambda rs: rs[0].update(estimate=float("nan")), r"results\[0\].estimate nan, not a finite"),
    (lambda rs: rs[0].update(standard_error=-1e308 * 10), r"standard_error -inf, not a finite"),
    (lambda rs: rs[0].pop("prediction"), r"prediction 'missing', not a finite number"),
    (lambda rs: rs[0].update(seed=1.5), r"results\[0\].seed 1.5, not an integer"),
])
def test_check_resume_refuses_a_result_it_cannot_keep(toy_registry, tmp_path, capsys, spoil,
                                                      pattern):
    """A duplicated or malformed result would be counted (or crash the summary): refuse it,
    exit 1, and leave the file as it was."""
    out = tmp_path / "report.json"
    assert check(["--theorem", "toy-holds", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    spoil(report["results"])
    out.write_text(json.dumps(report))
    before = out.read_bytes()
    assert check(["--theorem", "toy-holds", "--out", str(out), "--resume"]) == 1
    assert re.search(pattern, capsys.readouterr().err)
    assert out.read_bytes() == before


def test_check_rejects_unknown_theorem(toy_registry):
    with pytest.raises(SystemExit):
        check(["--theorem", "no-such-theorem"])


def test_four_se_rule_and_atol_rule(toy_registry):
    assert theorems.run("toy-holds").passed
    failed = theorems.run("toy-fails")
    assert not failed.passed and failed.tolerance == pytest.approx(0.2)
    assert "FAILS" in failed.summary()


def test_summary_fits_80_columns():
    # the widest numbers .6g and .3g print, and the longest registered id
    wide = dict(theorem_id=max(theorems.REGISTRY, key=len), title="t", chapter="c",
                claim="c", estimate=-1.23457e-05, prediction=-9.87654e-05,
                standard_error=1.23e-05, tolerance=1e-12, passed=False, scale="book",
                device="cpu", seed=0, wall_time_s=0.0, details={})
    for rule, n_lines in (("4 SE", 2), ("atol", 3)):
        lines = theorems.CheckResult(**wide, tolerance_rule=rule).summary().splitlines()
        assert lines[0] == f"{wide['theorem_id']}:" and len(lines) == n_lines
        assert max(map(len, lines)) <= 80 and lines[-1].endswith("-> FAILS"), lines


def test_summary_shows_the_gap_of_a_tolerance_rule_and_a_failed_condition():
    """Rounded to six figures the estimate and prediction look equal; the gap does not."""
    base = dict(theorem_id="t", title="t", chapter="c", claim="c", estimate=0.9000002,
                prediction=0.9, standard_error=0.0, tolerance=1e-10,
                tolerance_rule="|estimate - prediction| <= atol", passed=False,
                scale="book", device="cpu", seed=0, wall_time_s=0.0, details={})
    lines = theorems.CheckResult(**base).summary().splitlines()
    assert lines[1] == "    estimate 0.9, prediction 0.9"
    assert lines[2] == "    gap 2e-07 > tolerance 1.0e-10 -> FAILS"
    fit = dict(base, standard_error=0.1, tolerance=0.4, tolerance_rule="4 SE and fit",
               details={"conditions": {"lack-of-fit chi2 <= critical": False}})
    lines = theorems.CheckResult(**fit).summary().splitlines()
    assert lines[-1] == "    condition failed: lack-of-fit chi2 <= critical"


@pytest.mark.parametrize("kwargs, match", [
    (dict(rule="5se"), "rule must be one of"),
    (dict(rule="atol"), "atol must be a number >= 0"),
    (dict(standard_error=0.0), "standard_error must be a finite number > 0"),
    (dict(standard_error=float("nan")), "standard_error must be a finite number > 0"),
])
def test_measurement_validates(kwargs, match):
    args = dict(estimate=1.0, prediction=1.0, standard_error=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        Measurement(**args)


def test_run_validates_its_arguments(toy_registry):
    with pytest.raises(ValueError, match="theorem_id must be one of"):
        theorems.run("missing")
    with pytest.raises(ValueError, match="scale must be one of"):
        theorems.run("toy-holds", scale="huge")
    with pytest.raises(TypeError, match="seed must be an int >= 0"):
        theorems.run("toy-holds", seed=-1)
    with pytest.raises(ValueError, match="registered twice"):
        theorems.register("toy-holds", title="", chapter="", claim="", kind="model",
                          claim_id="C0")(lambda *a: None)
    with pytest.raises(ValueError, match="kind must be one of"):
        theorems.register("toy-new", title="", chapter="", claim="", kind="simulation",
                          claim_id="C0")
    with pytest.raises(ValueError, match="claim_id must be one of"):
        theorems.register("toy-new", title="", chapter="", claim="", kind="model",
                          claim_id="C9")


def test_every_check_declares_its_kind_and_claim():
    assert all(t.kind in theorems.KINDS and t.claim_id in theorems.CLAIMS
               for t in theorems.REGISTRY.values())
    assert {t.claim_id for t in theorems.REGISTRY.values()} == set(theorems.CLAIMS)


def test_the_report_records_each_checks_kind_and_claim(toy_registry):
    result = theorems.run("toy-holds").to_dict()
    assert (result["kind"], result["claim_id"]) == ("model", "C0")


def test_doctor_reports_an_unimportable_torch_instead_of_crashing():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import mhacore, mhacore.__main__ as m\n"
            "sys.exit(m.doctor())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "torch is installed but cannot be imported" in proc.stdout
    assert "missing required packages: torch (importable)" in proc.stdout


def test_check_seeds_writes_a_calibration_report_and_resumes(toy_registry, tmp_path, capsys):
    out = tmp_path / "calibration.json"
    assert check(["--theorem", "toy-holds", "--seeds", "1-3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["seeds"] == [1, 2, 3] and [r["seed"] for r in report["results"]] == [1, 2, 3]
    cal = report["calibration"]["toy-holds"]
    assert (cal["seeds"], cal["passed"], cal["z_mean"], cal["z_sd"]) == (3, 3, 2.0, 0.0)
    printed = capsys.readouterr().out
    assert "seeds 1-3: 3 passed, 0 failed" in printed and "toy-holds" in printed
    # --resume runs only what is missing; another range is refused, file untouched
    assert check(["--theorem", "toy-holds", "--seeds", "1-3", "--out", str(out), "--resume"]) == 0
    assert toy_registry == ["toy-holds"] * 3
    before = out.read_text()
    assert check(["--theorem", "toy-holds", "--seeds", "1-4", "--out", str(out), "--resume"]) == 1
    assert "seeds=[1, 2, 3]" in capsys.readouterr().err and out.read_text() == before


def test_check_seeds_counts_failures_per_seed(toy_registry, capsys):
    assert check(["--theorem", "toy-fails", "--seeds", "5-6"]) == 1
    printed = capsys.readouterr().out
    assert "seeds 5-6: 0 passed, 2 failed" in printed


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "3-1"], "A-B needs A <= B"),
    (["--seeds", "x"], "give A-B"),
    (["--seeds", "1-x"], "integer >= 0"),
    (["--seeds", "random:0"], "integer >= 1"),
    (["--seeds", "random:1001"], "at most 1000"),
    (["--seeds", "0-5000"], "at most 1000"),
    (["--seed", "1", "--seeds", "1-2"], "not both"),
])
def test_check_seeds_refuses_bad_ranges(toy_registry, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        check(["--theorem", "toy-holds", *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_fast_checks_hold_at_seeds_the_command_draws(tmp_path, capsys):
    """A small calibration in every test run, at seeds nobody picked: the checks that took
    under a second a seed in the committed calibration, at two seeds drawn by the command
    (printed and kept in the report, so a failure can be rerun)."""
    committed = json.loads((BOOK_ROOT / "reports" / "calibration-book.json").read_text())
    times: dict[str, list[float]] = {}
    for r in committed["results"]:
        times.setdefault(r["theorem_id"], []).append(r["wall_time_s"])
    fast = [i for i, t in times.items() if sum(t) / len(t) < 1.0]
    assert len(fast) >= 10
    out = tmp_path / "calibration.json"
    argv = [a for i in fast for a in ("--theorem", i)]
    code = check([*argv, "--seeds", "random:2", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0, f"seeds {report['seeds']}: {capsys.readouterr().out[-2000:]}"
    assert len(report["seeds"]) == 2 and set(report["calibration"]) == set(fast)


def test_calibration_reads_the_rule_not_the_condition_names(toy_registry):
    """A tolerance check with a condition named "... SE ..." stays a tolerance check."""
    @theorems.register("toy-exact", title="t", chapter="c", claim="", kind="identity", claim_id="C0")
    def _exact(scale, device, seed):
        return Measurement(estimate=1e-15, prediction=0.0, rule="atol", atol=1e-12,
                           conditions={"SE below its ceiling": True})

    rows = [theorems.run("toy-exact", seed=s).to_dict() for s in (1, 2)]
    assert rows[0]["rule"] == "atol" and "SE" in rows[0]["tolerance_rule"]
    cal = theorems.calibration(rows)["toy-exact"]
    assert cal["rule"] == "atol" and cal["gap_over_tolerance_max"] == pytest.approx(1e-3)
    assert "gap/tolerance" in theorems.calibration_table({"toy-exact": cal})


def test_seed_span_of_far_apart_seeds_is_cheap():
    # drawn seeds reach 2^32: naming them must not build the range between them
    from mhacore.__main__ import _seed_span

    assert _seed_span([3, 4_000_000_000]) == "3, 4000000000"
    assert _seed_span([1, 2, 3]) == "1-3" and _seed_span([7]) == "7"


def test_a_directional_claim_the_data_do_not_show_fails_as_its_chapter_reports(toy_registry, tmp_path,
                                                                                capsys):
    """A check registered with finding="fails" (the data do not support the paper's claim)
    exits 0 when it fails and 1 when it suddenly holds; its verdict reads "not supported",
    and --resume recomputes a one-sided verdict from the recorded rule."""
    effect = {"estimate": 0.1}

    @theorems.register("toy-rise", title="t", chapter="c", claim="training raises it", kind="empirical",
                       claim_id="C4", finding="fails")
    def _rise(scale, device, seed):
        return Measurement(estimate=effect["estimate"], prediction=0.0, standard_error=0.05, side="greater")

    result = theorems.run("toy-rise")
    assert not result.passed and result.as_reported and result.verdict == "not supported"
    assert result.tolerance_rule == "estimate - prediction > 4 SE" and "z = +2.00" in result.summary()
    out = tmp_path / "report.json"
    assert check(["--theorem", "toy-rise", "--out", str(out)]) == 0
    assert "1 as their chapters report" in capsys.readouterr().out
    assert check(["--theorem", "toy-rise", "--out", str(out), "--resume"]) == 0  # kept, verdict recomputed
    effect["estimate"] = 0.3  # z = 6: the claim is now shown, against the chapter
    assert check(["--theorem", "toy-rise", "--seed", "3"]) == 1
    assert theorems.run("toy-rise").verdict == "holds"
    with pytest.raises(ValueError, match="side must be one of"):
        Measurement(estimate=0.0, prediction=0.0, atol=1e-9, rule="atol", side="less")
    with pytest.raises(ValueError, match="finding must be one of"):
        theorems.register("toy-x", title="t", chapter="c", claim="c", kind="model", claim_id="C0",
                          finding="refuted")
