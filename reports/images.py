"""Optional static images of the report's figures, through kaleido and a local Chrome/Chromium."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from trainers.outputs import write_atomically


def write_images(figures: dict[str, go.Figure], directory: Path) -> str:
    """Write ``<figure id>.png`` files; never raises for a missing browser or kaleido.

    Returns:
        A line saying what was written, or why nothing was and how to fix it.

    Raises:
        OSError: an image could not be written (a full disk); the images before it are whole, none is partial.
    """
    try:
        import kaleido  # noqa: F401  (plotly's image engine)
    except ImportError:
        return "no PNGs: the kaleido package is not installed (pip install kaleido==1.5.0)"
    written = []
    for name, figure in figures.items():
        try:
            image = figure.to_image(format="png", width=1100, height=480)
        except Exception as error:  # kaleido reports a missing browser with its own exception types
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            return (
                f"no PNGs: kaleido could not render ({first_line}); install Chrome or Chromium "
                "(Debian: apt-get install chromium) or run `plotly_get_chrome`"
            )
        written.append(write_atomically(directory / f"{name}.png", image).name)  # a full disk raises: no partial image
    return f"PNGs in {directory}: {', '.join(written)}"
