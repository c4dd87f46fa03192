"""Sweep specs for dicesweep, shared by the REST service and the sweep driver.

``spec`` (validation, presets applied, expansion), ``presets`` (the named specs),
``reports`` (tables over trial rows), ``losses`` (torch-free schemas of the losses'
parameters), ``datasets``, ``settings`` and ``contract`` (what the driver and the
service both read). Nothing here imports torch, FastAPI or Ray: a spec in Ray Tune's
terms is the driver's (``trainables.driver.tune_search``).
"""
