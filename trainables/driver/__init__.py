"""The sweep driver's process: it builds a sweep's one ``Tuner``, follows its trials,
logs them to MLflow and writes the sweep's reports. None of this runs inside a Ray
worker: the trials' own code is the rest of ``trainables`` (``train.train``).

``run`` (the entry point, ``python -m trainables.driver``, and the sweep's outcome),
``spec_loading`` (the spec the command line names), ``stages`` (the ``Tuner``s: one,
or a spec with ``tune``'s two stages), ``cluster`` (joining Ray, waiting for a node,
counting unfinished trials), ``recovery`` (a resumed trial's missing checkpoint),
``parent`` (the MLflow experiment and parent run), ``tracking`` (the trial runs in
MLflow), ``trial_runs`` (a trial run's tags, name and params), ``outage`` (the trial
logger's writes through an outage of the tracking store), ``progress`` (the live
display), ``reports`` (tables and plots attached to the parent run).
"""
