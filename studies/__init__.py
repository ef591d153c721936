"""Studies: what each study asks, and the engine that runs it.

    catalogue/  every study as data, one module per study, the schema beside them (no run machinery)
    engine/     a run: options, Ray, the Optuna study, the ledger, the queue, Ray Tune, one trial's life
    run.py      the command: ``python -m studies.run NAME [options]``

The engine reads a study through the catalogue's schema and never names a particular study;
the command looks studies up in the catalogue and hands them to the engine.
"""
