"""The sweep driver's process: it builds a sweep's one ``Tuner``, follows its trials,
logs them to MLflow and writes the sweep's reports. None of this runs inside a Ray
worker: the trials' own code is the rest of ``trainables`` (``train.train``).

``run`` (the entry point, ``python -m trainables.driver``), ``tracking`` (the trial
runs in MLflow), ``progress`` (the live display), ``reports`` (tables and plots
attached to the parent run).
"""
