"""Sweep specs for dicesweep, shared by the REST service and the sweep driver.

``spec`` (validation, presets applied, expansion, the Ray Tune ``param_space``),
``presets`` (the named specs), ``reports`` (tables over trial rows), ``losses``
(torch-free schemas of the losses' parameters), ``datasets`` and ``settings``.
Nothing here imports torch or FastAPI; Ray only inside ``spec.to_param_space`` and
in ``tune_search``, which the driver alone imports.
"""
