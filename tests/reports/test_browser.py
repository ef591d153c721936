"""The smoke study's report as a person sees it: rendered in headless Chromium, every figure drawn, no script errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from common.outputs import REPORTS_DIR
from reports.files import report_path
from tests.conftest import SMOKE_STUDY

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
FIGURES = ("pareto-figure", "pareto-parameters", "pareto-time", "knob-effects", "learning-curves")
# Headless Chromium as root (NOTES.md): no sandbox, no GPU, nothing fetched in the background.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--virtual-time-budget=20000",
)


@pytest.fixture(scope="module")
def browser() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if path is None:
        if os.environ.get("DAMCHA_REQUIRE_BROWSER"):
            pytest.fail("no Chromium on PATH; .ci/run installs Debian's chromium package")
        pytest.skip("no Chromium on PATH (apt-get install chromium)")
    return path


def render(browser: str, page: Path, profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [browser, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *arguments, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def test_every_figure_draws_without_script_errors(smoke_run: dict, browser: str, tmp_path: Path) -> None:
    page = report_path(SMOKE_STUDY, smoke_run["url"], smoke_run["root"] / REPORTS_DIR)
    rendered = render(browser, page, tmp_path / "profile", "--dump-dom")
    dom = rendered.stdout
    for figure in FIGURES:
        assert re.search(rf'id="{figure}"[^>]*js-plotly-plot', dom), f"figure {figure} did not draw"
    assert dom.count('class="main-svg"') >= 2 * len(FIGURES)
    console_errors = [line for line in rendered.stderr.splitlines() if "CONSOLE" in line and re.search(r"Uncaught|Error", line)]
    assert console_errors == []


def test_screenshot_is_saved_and_not_blank(smoke_run: dict, browser: str, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{SMOKE_STUDY}.png"
    page = report_path(SMOKE_STUDY, smoke_run["url"], smoke_run["root"] / REPORTS_DIR)
    render(browser, page, tmp_path / "profile", "--window-size=1280,4200", f"--screenshot={shot}")
    with Image.open(shot) as image:
        assert image.size == (1280, 4200)
        colours = image.convert("RGB").resize((64, 210)).getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 50  # drawn figures, not an empty page


def test_png_images_through_kaleido(smoke_run: dict, browser: str, tmp_path: Path) -> None:
    from reports.__main__ import main

    assert main([SMOKE_STUDY, "--storage", smoke_run["url"], "-o", str(tmp_path / "r.html"), "--png", str(tmp_path / "png")]) == 0
    written = sorted(path.name for path in (tmp_path / "png").glob("*.png"))
    assert set(f"{figure}.png" for figure in FIGURES) <= set(written)
    with Image.open(tmp_path / "png" / "pareto-figure.png") as image:
        assert image.size == (1100, 480)
