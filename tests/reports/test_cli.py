"""``python -m reports``: reads any store, escapes what it shows, names unknown studies."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from reports.__main__ import main
from storage import open_storage

HOSTILE = "<script>alert('study')</script>"
IMAGE = "<img src=x onerror=alert(1)>"
ATTENTION = CategoricalDistribution(("mha", "damcha", IMAGE))


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    for name in (HOSTILE, "other"):
        study = optuna.create_study(study_name=name, storage=open_storage(url), directions=["maximize", "minimize"])
        study.set_user_attr("question", "<b>bold?</b>")
        for attention, accuracy, flops in (("mha", 0.3, 100.0), ("damcha", 0.35, 90.0), (IMAGE, 0.2, 50.0)):
            study.add_trial(
                create_trial(
                    params={"attention": attention},
                    distributions={"attention": ATTENTION},
                    values=[accuracy, flops],
                    state=TrialState.COMPLETE,
                    intermediate_values={10: accuracy},
                    user_attrs={
                        "baseline": attention == "mha",
                        "flops_per_example": flops,
                        "examples_per_s": 100.0,
                        "parameters": 10,
                    },
                )
            )
    return url


def test_report_escapes_names_values_and_attributes(store: str, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main([HOSTILE, "--storage", store, "-o", str(out)]) == 0
    page = out.read_text()
    assert "&lt;script&gt;alert(&#x27;study&#x27;)&lt;/script&gt;" in page
    assert HOSTILE not in page and "<b>bold?</b>" not in page and IMAGE not in page
    assert "gains 5.0 accuracy points" in page  # 0.35 vs 0.30 at 0.90x the FLOPs


def test_cdn_option_makes_a_small_page(store: str, tmp_path: Path) -> None:
    assert main(["other", "--storage", store, "-o", str(tmp_path / "cdn.html"), "--plotlyjs", "cdn"]) == 0
    assert (tmp_path / "cdn.html").stat().st_size < 500_000
    assert 'src="https://cdn.plot.ly' in (tmp_path / "cdn.html").read_text()


def test_compare_puts_fronts_on_one_axes(store: str, tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    assert main(["compare", HOSTILE, "other", "--storage", store, "-o", str(out)]) == 0
    page = out.read_text()
    assert 'id="compare-figure"' in page and "other: DAMCHA front" in page and HOSTILE not in page


def test_unknown_study_exits_2_with_did_you_mean(store: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["othr", "--storage", store])
    assert exited.value.code == 2
    assert "did you mean 'other'" in capsys.readouterr().err


def _foreign_store(url: str, name: str, trials: list[tuple[float, dict]], directions: int = 2, **attrs: object) -> None:
    """A study another program wrote: ``(value, user attributes)`` per complete trial."""
    study = optuna.create_study(study_name=name, storage=open_storage(url), directions=["maximize"] * directions)
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    for value, user_attrs in trials:
        study.add_trial(
            create_trial(
                params={"x": 0.5},
                distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
                values=[value] * directions,
                state=TrialState.COMPLETE,
                user_attrs=user_attrs,
            )
        )


@pytest.mark.parametrize(
    ("name", "trials", "attrs", "says"),
    [
        (  # a baseline and a question, but no FLOPs count: nothing to compare at matched cost
            "no-flops",
            [(0.5, {"baseline": True, "family": "A"}), (0.6, {"baseline": False, "family": "B"})],
            {"question": "which?"},
            "B: no comparison, the baseline, A, has no result: its 1 complete search trial has no finite value or no FLOPs count",
        ),
        (  # values that are no finite numbers
            "infinite",
            [
                (0.5, {"baseline": True, "family": "A", "flops_per_example": 10.0}),
                (float("inf"), {"baseline": False, "family": "B", "flops_per_example": 10.0}),
                (float("-inf"), {"baseline": False, "family": "B", "flops_per_example": 10.0}),
            ],
            {},
            "B: no comparison, its 2 complete search trials have no finite value or no FLOPs count",
        ),
        (  # a FLOPs count that is no number
            "text-flops",
            [(0.5, {"baseline": True, "family": "A", "flops_per_example": "many"}), (0.6, {"family": "B"})],
            {"question": 42},
            "the baseline, A, has no result",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 20 else "",
)
def test_another_program_s_odd_store_gets_a_page_that_says_what_it_lacks(
    tmp_path: Path, name: str, trials: list, attrs: dict, says: str
) -> None:
    """The class of stores whose trials lack, or hold odd, values this product records (no crash, no "inf points")."""
    url = f"sqlite:///{tmp_path / 'foreign.db'}"
    _foreign_store(url, name, trials, **attrs)
    out = tmp_path / "page.html"
    assert main([name, "--storage", url, "-o", str(out)]) == 0
    page = out.read_text()
    assert says.replace("'", "&#x27;") in page or says in page
    assert "inf accuracy points" not in page and "inf%" not in page


LINK = '<a href="https://example.com/">click</a>'
STYLED = '<span style="color:red">red</span><b>bold</b><i>it</i><sup>up</sup>'


def _strings(value: object) -> list[str]:
    """Every string in a figure's JSON tree (titles, tick labels, names, texts, categories)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def test_store_strings_reach_plotly_as_text_never_as_markup(tmp_path: Path) -> None:
    """The class of plotly's live markup (links, styles, bold, italics, super- and subscripts) in knob names,
    knob values, family labels and metric names another program wrote: each shows as the text it is."""
    from reports.html import report_html

    url = f"sqlite:///{tmp_path / 'store.db'}"
    study = optuna.create_study(study_name="hostile", storage=open_storage(url), directions=["maximize", "minimize"])
    study.set_metric_names([LINK, "flops"])
    knob = CategoricalDistribution(("mha", "damcha", STYLED))
    for index, (value, accuracy) in enumerate((("mha", 0.3), ("damcha", 0.35), (STYLED, 0.2), ("damcha", 0.33))):
        study.add_trial(
            create_trial(
                params={LINK: value, "plain": value},
                distributions={LINK: knob, "plain": knob},
                values=[accuracy, 100.0 - index],
                state=TrialState.COMPLETE,
                intermediate_values={10: accuracy, 20: accuracy},
                user_attrs={
                    "baseline": value == "mha",
                    "family": STYLED if index % 2 else "mha",
                    "flops_per_example": 100.0 - index,
                },
            )
        )
    _, figures = report_html(study, url)
    markup = re.compile(r"<(?!br>)[a-z]", re.IGNORECASE)  # any tag but the line breaks this product writes
    for name, figure in figures.items():
        live = [text for text in _strings(figure.to_plotly_json()) if markup.search(text)]
        assert not live, (name, live[:3])


@pytest.mark.parametrize("log", ["closed-cleanly", "write-ahead-log-left"])
def test_a_store_on_a_read_only_file_system_is_read_by_reports_and_refused_by_a_run(tmp_path: Path, capsys, log: str) -> None:
    """The class of stores on read-only media (a read-only mount, a snapshot), closed cleanly or with their
    write-ahead log and its index left beside them: WAL mode needs a writable folder to read as usual."""
    import subprocess
    import sys

    from studies.run import main as run

    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    url = f"sqlite:///{source / 'store.db'}"
    make = f"""
import optuna
from storage import open_storage
study = optuna.create_study(study_name="plain", storage=open_storage({url!r}))
study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
"""
    if log == "write-ahead-log-left":
        make += "import os; os._exit(0)  # as a killed writer: its log and index stay\n"
    subprocess.run([sys.executable, "-c", make], check=True, cwd=Path(__file__).resolve().parents[2])
    assert (source / "store.db-wal").exists() == (log == "write-ahead-log-left")
    if subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True).returncode != 0:
        pytest.skip("this machine lets this user mount nothing (a read-only bind mount needs root)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        url = f"sqlite:///{mounted / 'store.db'}"
        out = tmp_path / "page.html"
        assert main(["plain", "--storage", url, "-o", str(out)]) == 0
        assert out.read_text().count("<td>3</td>") >= 1  # the report's count of complete trials
        stored = optuna.load_study(study_name="plain", storage=open_storage(url, read_only=True)).get_trials()
        assert len(stored) == 3  # the write-ahead log's trials too, where one was left
        with pytest.raises(SystemExit) as stopped:  # a bad option's exit
            run(["lra_sharing", "--preset", "smoke", "--storage", url])
        assert stopped.value.code == 2
        error = capsys.readouterr().err
        assert "is on a read-only file system" in error and "damaged" not in error
        # outputs onto the read-only medium: named as such (root, whom no permission stops, is told so too)
        with pytest.raises(SystemExit) as stopped:
            main(["plain", "--storage", url, "-o", str(mounted / "page.html")])
        assert stopped.value.code == 2
        with pytest.raises(SystemExit) as stopped:
            new_store = f"sqlite:///{tmp_path / 'new.db'}"
            run(["lra_sharing", "--preset", "smoke", "--storage", new_store, "--data-cache", str(mounted)])
        assert stopped.value.code == 2
        errors = capsys.readouterr().err
        assert errors.count(f"{mounted} is on a read-only file system; choose another path") == 2, errors
    finally:
        subprocess.run(["umount", "--lazy", str(mounted)], check=True)  # lazy: this process may still hold the file
