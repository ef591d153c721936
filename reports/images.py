"""Optional static images of the report's figures, through kaleido and a local Chrome/Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from common.outputs import write_atomically

if TYPE_CHECKING:  # plotly takes seconds to import: the command line imports this module for its error alone
    import plotly.graph_objects as go


class RendererError(RuntimeError):
    """No PNG can be made here: kaleido or a browser is missing; the message says how to get them."""


def check_renderer() -> None:
    """Render a tiny figure, before any work: ``--png`` without a renderer is refused up front, not
    answered by a report without its images.

    Raises:
        RendererError: kaleido is not installed, or it finds no Chrome or Chromium to render with.
    """
    try:
        import kaleido  # noqa: F401  (plotly's image engine)
    except ImportError:
        raise RendererError("--png needs the kaleido package (pip install kaleido==1.5.0), or drop --png") from None
    import plotly.graph_objects as go

    try:
        go.Figure().to_image(format="png", width=16, height=16)
    except Exception as error:  # kaleido reports a missing browser with its own exception types
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RendererError(
            f"--png needs Chrome or Chromium, which kaleido could not start ({first_line}): install one "
            "(Debian: apt-get install chromium) or run `plotly_get_chrome`, or drop --png"
        ) from None


def write_images(figures: dict[str, go.Figure], directory: Path) -> str:
    """Write ``<figure id>.png`` files (``check_renderer`` first).

    Returns:
        A line saying what was written.

    Raises:
        RendererError: an image could not be rendered (the images before it are written).
        OSError: an image could not be written (a full disk); the images before it are whole, none is partial.
    """
    written = []
    for name, figure in figures.items():
        try:
            image = figure.to_image(format="png", width=1100, height=480)
        except Exception as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise RendererError(f"kaleido could not render {name} ({first_line}); the images before it are written") from None
        written.append(write_atomically(directory / f"{name}.png", image).name)  # a full disk raises: no partial image
    return f"PNGs in {directory}: {', '.join(written)}"
