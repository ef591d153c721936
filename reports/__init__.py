"""Reports: a study's results (``studies.results``) and the views of them.

    results/   store -> trial frame -> fronts, bests, configurations over seeds, the verdict
    summary    the end-of-run summary (text)
    figures    thin plotly builders over the frames
    html       the study's self-contained HTML report; a comparison page
    suite      a suite's report (LRA's table)
    images     static images of the figures
    files      where reports are written
    __main__   ``python -m reports``

Reports read the store (through ``storage``), never the models.
"""
