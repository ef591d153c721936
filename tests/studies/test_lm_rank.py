"""lm_rank's smoke preset end to end: byte-level language modelling of the standard library's
source, judged by validation bits per byte (lower is better) in the store, the verdict, the
summary and the report; a bad corpus exits 2 before anything is written."""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
from pathlib import Path

import optuna
import pytest
from optuna.study import StudyDirection
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from storage.repeats_study import trials_with_repeats
from studies.catalogue import LM_RANK
from studies.run import main
from tests.studies.test_data_dir import _exit_code, _tree


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    root = tmp_path_factory.mktemp("lm_rank")
    url = f"sqlite:///{root / 'store.db'}"
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as output:
        patch.chdir(root)
        assert main(["lm_rank", "--preset", "smoke", "--storage", url, "--data-cache", str(root / "data")]) == 0
    study = optuna.load_study(study_name=LM_RANK.store_name("smoke"), storage=url)
    trials = trials_with_repeats(study)  # the search's, then its seed repeats
    return {"root": root, "url": url, "study": study, "trials": trials, "output": output.getvalue()}


def test_the_store_minimises_bits_per_byte_derived_from_each_trials_loss(lm_run: dict) -> None:
    study = lm_run["study"]
    assert study.metric_names == ["val_bits_per_byte", "flops_per_example"]
    assert study.directions == [StudyDirection.MINIMIZE, StudyDirection.MINIMIZE]
    complete = [t for t in lm_run["trials"] if t.state == TrialState.COMPLETE]
    assert len(complete) == len(lm_run["trials"]) >= LM_RANK.preset("smoke").trials
    for trial in complete:
        bits = trial.values[0]
        assert math.isclose(bits, trial.user_attrs["val_loss"] / math.log(2))
        assert math.isclose(trial.user_attrs["val_perplexity"], 2**bits, rel_tol=1e-9)
        assert 0 < bits < 8.1  # below guessing uniformly over 258 byte ids (log2 258 = 8.01): it learned
        assert trial.intermediate_values[max(trial.intermediate_values)] == bits  # curves are of the objective
        assert trial.user_attrs["model_config"]["architecture"] == "decoder"
    task = study.user_attrs["task"]
    assert task["task"] == "bytes_lm" and task["corpus"] == "stdlib" and task["python"] and task["files_digest"]


def test_both_metric_modes_and_mha_are_searched_and_repeated(lm_run: dict) -> None:
    searched = [t for t in lm_run["trials"] if "repeat_of" not in t.user_attrs]
    repeats = [t for t in lm_run["trials"] if "repeat_of" in t.user_attrs]
    labels = [family.label for family in LM_RANK.families]
    assert [t.user_attrs["family"] for t in searched] == labels * (len(searched) // len(labels))
    assert {t.params.get("metric_mode") for t in searched} == {None, "rowsum", "cross"}
    assert {t.user_attrs["family"] for t in repeats} == set(labels)


def test_the_verdict_summary_and_report_speak_of_bits_per_byte_lower_being_better(lm_run: dict) -> None:
    study, output = lm_run["study"], lm_run["output"]
    sentence = study.user_attrs["verdict"]
    assert "bits per byte" in sentence and "accuracy" not in sentence and "% vs" not in sentence
    assert re.search(r"(leads by|trails by) \d+\.\d{3} bits per byte \(\d+\.\d{3} vs \d+\.\d{3} test bits per byte", sentence), (
        sentence
    )
    assert "  verdict:\n" in output and f"\n    {sentence}\n" in output  # after its table
    # each compared configuration's search run is its family's lowest bits per byte at that cost, and the summary shows it
    for line in re.findall(r"search run (\d+): (\d+\.\d+) validation bits per byte", output):
        (trial,) = [t for t in lm_run["study"].get_trials() if t.number == int(line[0])]
        assert trial.values[0] == pytest.approx(float(line[1]), abs=5e-4)
    page = report_path(LM_RANK.store_name("smoke"), lm_run["url"], Path(lm_run["root"]) / REPORTS_DIR).read_text()
    assert '"text":"validation bits per byte"' in page  # the axes' titles
    assert "Validation bits per byte against forward FLOPs per example" in page
    text = re.sub(r"<script.*?</script>", "", page, flags=re.DOTALL)  # plotly.js itself speaks of accuracy
    assert "search run (validation bits per byte)" in text and "accuracy" not in text.split("<h2>Provenance")[0].lower()


@pytest.mark.parametrize(
    ("corpus", "message"),
    [
        (None, r"corpus directory .*absent does not exist; give a directory of text files, hf:NAME\[:CONFIG\]"),
        ("binary", r"blob.bin holds NUL bytes: it is not a text file; remove it from the corpus"),
        ("latin-1-file-name", r"the file name .*caf\\xe9.txt is not valid UTF-8; rename it or remove it from the corpus"),
        ("latin-1-folder-name", r"the file name .*r\\xe9sum\\xe9/notes.txt is not valid UTF-8"),
    ],
    ids=["missing", "binary", "latin-1-file-name", "latin-1-folder-name"],
)
def test_a_bad_corpus_exits_2_with_one_sentence_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], corpus: str | None, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAMCHA_STORAGE_URL", raising=False)
    data = tmp_path / "absent"
    if corpus == "binary":
        data.mkdir()
        (data / "notes.txt").write_text("text " * 2000)
        (data / "blob.bin").write_bytes(b"\x00\x01" * 100)
    elif corpus is not None:  # a name in Latin-1, as an old archive may hold: not UTF-8
        data.mkdir()
        (data / "notes.txt").write_text("text " * 2000)
        name = b"caf\xe9.txt" if corpus == "latin-1-file-name" else b"r\xe9sum\xe9/notes.txt"
        target = os.fsencode(data) + b"/" + name
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(b"text " * 100)
    before = _tree(tmp_path)
    assert _exit_code(["lm_rank", "--preset", "smoke", "--data-dir", str(data), "--data-cache", "cache"]) == 2
    error = capsys.readouterr().err
    assert re.search(message, error), error
    assert "Traceback" not in error and re.search(message, error.strip().splitlines()[-1])  # the last line says it all
    assert _tree(tmp_path) == before  # no store, no report, no data cache
