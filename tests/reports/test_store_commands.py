"""A store you can query: ``python -m reports list``, short study names, CSV and Markdown tables,
and ``compare`` across stores, on real SQLite stores (the smoke study's, and made-up ones)."""

from __future__ import annotations

import html
import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest

from reports.__main__ import main
from reports.files import study_file_stem
from reports.summary import summary
from reports.tables import HEADLINE_COLUMN, fronts_frame
from storage import open_storage, record
from studies.engine.options import RunOptions
from studies.results import StudyResults
from studies.results.verdict_table import verdict_frame
from tests.conftest import SMOKE_STUDY, copy_store


def _named_store(path: Path, names: dict[str, bool | None]) -> str:
    """A store holding empty studies with these names, each recording whether a run's default preset made it."""
    url = f"sqlite:///{path}"
    storage = open_storage(url)
    for name, default in names.items():
        study = optuna.create_study(study_name=name, storage=storage)
        if default is not None:
            study.set_user_attr(record.DEFAULT_PRESET, default)
    return url


def _reported(name: str, url: str, tmp_path: Path, capsys) -> str:
    """The study ``python -m reports NAME`` writes the report of (its exit code asserted)."""
    assert main([name, "--storage", url, "-o", str(tmp_path / "r.html")]) == 0
    return (tmp_path / "r.html").read_text().split("<title>", 1)[1].split("</title>", 1)[0]


def test_a_short_name_means_the_newest_version_of_the_default_preset_or_the_named_one(tmp_path: Path, capsys) -> None:
    url = _named_store(
        tmp_path / "s.db",
        {
            "lra_sharing-smoke-v7": False,
            "lra_sharing-quick-v5": True,
            "lra_sharing-quick-v6": True,
            "lra_sharing-quick-v6-num_heads=4": True,  # a --fix study: named in full only
            "lra_sharing-quick-v6-fresh-20261201-101500": True,
            "cross_head-quick-v3": True,
        },
    )
    assert _reported("lra_sharing", url, tmp_path, capsys) == "lra_sharing-quick-v6"
    assert _reported("lra_sharing-quick", url, tmp_path, capsys) == "lra_sharing-quick-v6"
    assert _reported("lra_sharing-smoke", url, tmp_path, capsys) == "lra_sharing-smoke-v7"
    assert _reported("lra_sharing-quick-v5", url, tmp_path, capsys) == "lra_sharing-quick-v5"  # a whole name is itself
    assert _reported("lra_sharing-quick-v6-num_heads=4", url, tmp_path, capsys) == "lra_sharing-quick-v6-num_heads=4"
    assert _reported("cross_head", url, tmp_path, capsys) == "cross_head-quick-v3"


def test_a_short_name_two_studies_could_have_is_refused_naming_both(tmp_path: Path, capsys) -> None:
    """A store whose runs recorded no default preset (older runs), with two presets of a study."""
    url = _named_store(tmp_path / "s.db", {"lra_sharing-smoke-v6": None, "lra_sharing-full-v6": None})
    with pytest.raises(SystemExit) as exited:
        main(["lra_sharing", "--storage", url, "-o", str(tmp_path / "r.html")])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "ambiguous" in error and "lra_sharing-full-v6 or lra_sharing-smoke-v6" in error
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(SystemExit) as exited:
        main(["lra_shar", "--storage", url])  # a prefix is no short name
    assert exited.value.code == 2 and "unknown study 'lra_shar'" in capsys.readouterr().err


def test_list_shows_each_study_s_trials_by_family_and_state_and_its_verdict(smoke_run: dict, tmp_path: Path, capsys) -> None:
    url = copy_store(smoke_run["url"], tmp_path / "s.db")
    optuna.create_study(study_name="lra_sharing-quick-v6", storage=open_storage(url))  # a run not finished yet
    assert main(["list", "--storage", url]) == 0
    listed = capsys.readouterr().out
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=url)
    repeats = optuna.load_study(study_name=f"{SMOKE_STUDY}:repeats", storage=url).get_trials(deepcopy=False)
    trials = study.get_trials(deepcopy=False) + repeats  # its seed repeats' study is listed within it
    assert repeats and all("repeat_of" in t.user_attrs for t in repeats)
    families = {t.user_attrs["family"] for t in trials}
    assert f"{url}: 2 studies" in listed and ":repeats" not in listed
    assert f"{SMOKE_STUDY}: {len(trials)} trials" in listed
    for family in families:
        count = sum(t.user_attrs["family"] == family for t in trials)
        assert f"  {family}: {count} (" in listed
    verdict = listed[listed.index(f"{SMOKE_STUDY}:") :]
    verdict = verdict[verdict.index("  verdict:\n") :].splitlines()
    assert verdict[1].split()[0] == "compared"  # the table first, a row per comparison, then the sentence
    rows = study.user_attrs["verdict_table"]
    for line, row in zip(verdict[2 : 2 + len(rows)], rows, strict=True):
        assert line.strip().startswith(row["compared"]) and row["answer"] in line
    assert verdict[2 + len(rows)] == f"    {study.user_attrs['verdict']}"
    assert verdict[3 + len(rows)] == f"    {study.user_attrs['reliability']}"  # how sure, as the run printed it
    assert "lra_sharing-quick-v6: 0 trials\n  verdict: none recorded" in listed
    with pytest.raises(SystemExit) as exited:
        main(["list", "--storage", url, "--csv", str(tmp_path)])  # list writes nothing
    assert exited.value.code == 2 and "list writes no --csv" in capsys.readouterr().err

    # The same as data: a row per study and family, counts as numbers, in each format.
    assert main(["list", "--storage", url, "--format", "json"]) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out))
    smoke = rows[rows["study"] == SMOKE_STUDY]
    assert set(smoke["family"]) == families and smoke["trials"].sum() == len(trials)
    assert (smoke["complete"] + smoke["pruned"] + smoke["fail"] + smoke["infeasible"] + smoke["running"]).sum() == len(trials)
    assert set(smoke["verdict"]) == {study.user_attrs["verdict"]}
    assert set(smoke["how_sure"]) == {study.user_attrs["reliability"]}
    unfinished = rows[rows["study"] == "lra_sharing-quick-v6"][["family", "trials", "verdict", "how_sure"]]
    assert unfinished.values.tolist() == [["", 0, "", ""]]
    assert main(["list", "--storage", url, "--format", "csv"]) == 0
    assert pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False).equals(rows)
    assert main(["list", "--storage", url, "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| study ")
    with pytest.raises(SystemExit) as exited:
        main([SMOKE_STUDY, "--storage", url, "--format", "json"])  # a report has its own --csv and --markdown
    assert exited.value.code == 2 and "writes no --format" in capsys.readouterr().err


def test_csv_and_markdown_hold_the_report_s_tables_and_verdict(smoke_run: dict, tmp_path: Path, capsys) -> None:
    url = smoke_run["url"]
    markdown = tmp_path / "md" / "tables.md"
    assert main(["lra_sharing-smoke", "--storage", url, "-o", str(tmp_path / "r.html"), "--csv", str(tmp_path / "csv")]) == 0
    assert main(["lra_sharing-smoke", "--storage", url, "-o", str(tmp_path / "r.html"), "--markdown", str(markdown)]) == 0
    results = StudyResults.read(optuna.load_study(study_name=SMOKE_STUDY, storage=url))
    stem = study_file_stem(SMOKE_STUDY, url)  # the smoke run's store is not this folder's runs/optuna.db: tagged
    assert stem.startswith(f"{SMOKE_STUDY}.store-")
    fronts = pd.read_csv(tmp_path / "csv" / f"{stem}-fronts.csv")
    verdict = pd.read_csv(tmp_path / "csv" / f"{stem}-verdict.csv")
    assert len(verdict) > 0 and verdict["compared"].tolist() == verdict_frame(results)["compared"].tolist()
    shown = {label for row in verdict["compared"] for label in row.split(" = ")}  # a point that is its pick joins its row
    assert shown == {c.family for c in results.verdict.comparisons}
    # for analysis: each quantity its own column, read back as numbers, equal to the results' own
    for column in ("mean", "ci_low", "ci_high", "search_value", "flops_per_example", "parameters", "fresh_seeds"):
        assert pd.api.types.is_numeric_dtype(fronts[column]), column
    for column in ("flops_ratio", "candidate_mean", "baseline_mean", "difference", "difference_low", "p_holm", "margin"):
        assert pd.api.types.is_numeric_dtype(verdict[column]), column
    first = results.verdict.comparisons[0]
    assert verdict["difference"].iloc[0] == pytest.approx(first.difference)
    assert verdict["answer"].iloc[0] == first.answer and bool(verdict["significant"].iloc[0]) == first.significant
    assert ((fronts["ci_low"].dropna() >= 0) & (fronts["ci_high"].dropna() <= 1)).all()  # accuracies: a fraction
    page = (tmp_path / "r.html").read_text()
    for headline in fronts_frame(results)[HEADLINE_COLUMN]:  # one figure per configuration, the page's too
        assert headline in page
    assert len(fronts) == len(fronts_frame(results))  # the same rows as the report's table
    text = markdown.read_text()
    # the verdict table first, then its sentence, then the fronts
    assert text.index("## Verdict") < text.index(results.verdict.sentence) < text.index("## Each family's front")
    assert "| " + verdict["compared"].iloc[0] in text

    # --markdown -: stdout is the Markdown alone, and Optuna's "A new study created in memory" is gone.
    shown = subprocess.run(
        [sys.executable, "-m", "reports", "lra_sharing", "--storage", url, "-o", str(tmp_path / "r.html"), "--markdown", "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.startswith(f"# {SMOKE_STUDY}\n") and "report:" not in shown.stdout
    assert "report: " in shown.stderr and "A new study created" not in shown.stderr


def test_two_stores_studies_of_one_name_never_write_the_same_default_files(
    smoke_run: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The default store's report keeps its plain name; another store's carries the store's tag, so
    reporting it replaces nothing of the first (it did: same name, exit 0)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAMCHA_STORAGE_URL", raising=False)
    (tmp_path / "runs").mkdir()
    (tmp_path / "elsewhere").mkdir()
    copy_store(smoke_run["url"], tmp_path / "runs" / "optuna.db")
    copy_store(smoke_run["url"], tmp_path / "elsewhere" / "optuna.db")
    assert main([SMOKE_STUDY, "--csv", "tables"]) == 0
    plain = Path("runs", "reports", f"{SMOKE_STUDY}.html")
    first = plain.read_bytes()
    other = "sqlite:///elsewhere/optuna.db"
    assert main([SMOKE_STUDY, "--storage", other, "--csv", "tables"]) == 0
    tagged = Path("runs", "reports", f"{study_file_stem(SMOKE_STUDY, other)}.html")
    assert plain.read_bytes() == first and tagged.exists() and tagged != plain
    assert f"report: {tagged}" in capsys.readouterr().out
    assert sorted(path.name for path in Path("tables").iterdir()) == sorted(
        f"{stem}-{table}.csv" for stem in (SMOKE_STUDY, study_file_stem(SMOKE_STUDY, other)) for table in ("fronts", "verdict")
    )
    (tmp_path / "with space").mkdir()  # the run's summary prints a browse command that pastes into a shell as one URL
    copy_store(smoke_run["url"], tmp_path / "with space" / "optuna.db")
    spaced = "sqlite:///with space/optuna.db"
    printed = summary(optuna.load_study(study_name=SMOKE_STUDY, storage=spaced), spaced, plain)
    browse = next(line for line in printed.splitlines() if "browse:" in line)
    assert shlex.split(browse.partition("browse: ")[2].removesuffix(")")) == ["optuna-dashboard", spaced]
    # However a URL names a store, its tag is the same; the default store has none.
    assert study_file_stem(SMOKE_STUDY, f"sqlite:///{tmp_path}/elsewhere/../elsewhere/optuna.db") == tagged.stem
    assert study_file_stem(SMOKE_STUDY, f"sqlite:///{tmp_path}/runs/optuna.db") == SMOKE_STUDY


def test_compare_across_two_stores_shows_each_study_s_verdict_and_tables(smoke_run: dict, tmp_path: Path, capsys) -> None:
    laptop = copy_store(smoke_run["url"], tmp_path / "laptop.db")
    cluster = copy_store(smoke_run["url"], tmp_path / "cluster.db")
    out, png = tmp_path / "compare.html", tmp_path / "png"
    argv = ["compare", "lra_sharing", "--storage", laptop, "--storage", cluster, "-o", str(out)]
    if shutil.which("chromium"):
        argv += ["--png", str(png)]
    else:  # --png without a renderer: refused before anything is written, naming the fix
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--png", str(png)])
        assert exited.value.code == 2 and "--png needs" in capsys.readouterr().err and not out.exists()
    assert main(argv) == 0
    page = out.read_text()
    sentence = optuna.load_study(study_name=SMOKE_STUDY, storage=laptop).user_attrs["verdict"]
    for url in (laptop, cluster):
        assert f"<h2>{SMOKE_STUDY} ({url})</h2>" in page
    assert page.count("<h3>Verdict</h3>") == 2 and page.count("<h3>Each family's front</h3>") == 2
    assert sentence.split(" (")[0] in page
    said = capsys.readouterr().out
    if shutil.which("chromium"):
        assert (png / "compare-figure.png").stat().st_size > 10_000, said
    # Its tables as data: a study column first, each study's rows as its own report's.
    tables, markdown = tmp_path / "csv", tmp_path / "compare.md"
    assert main([*argv[:6], "-o", str(out), "--csv", str(tables), "--markdown", str(markdown)]) == 0
    fronts = pd.read_csv(tables / "compare-fronts.csv")
    one = pd.read_csv(tables / "compare-verdict.csv")
    assert fronts.columns[0] == one.columns[0] == "study"
    assert set(fronts["study"]) == {f"{SMOKE_STUDY} ({url})" for url in (laptop, cluster)}
    results = StudyResults.read(optuna.load_study(study_name=SMOKE_STUDY, storage=laptop))
    assert len(one) == 2 * len(verdict_frame(results)) and len(fronts) == 2 * len(fronts_frame(results))
    assert markdown.read_text().count(f"# {SMOKE_STUDY} (") == 2
    with pytest.raises(SystemExit) as exited:
        main(["compare", "lra_sharing", "--storage", laptop])  # one study is no comparison
    assert exited.value.code == 2 and "compare found only" in capsys.readouterr().err


def test_the_report_shows_the_command_that_made_it_with_any_password_masked(smoke_run: dict, tmp_path: Path) -> None:
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=smoke_run["url"])
    command = study.user_attrs["command"]
    assert command.startswith("python -m studies.run lra_sharing --preset smoke --trials ")  # the latest run's
    assert "--preset quick" not in study.user_attrs["question"]
    assert main([SMOKE_STUDY, "--storage", smoke_run["url"], "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert html.escape(command) in page  # in the settings table
    assert "--preset quick" not in page
    url = "postgresql+psycopg://optuna:s3cret@db.example:5432/optuna"
    assert "s3cret" not in RunOptions(storage=url).command_line("lra_sharing")
    assert RunOptions(storage="env:DAMCHA_STORAGE_URL", fix={"num_heads": 4}, compile=False).command_line("x") == (
        "python -m studies.run x --storage env:DAMCHA_STORAGE_URL --fix num_heads=4 --no-compile"
    )
