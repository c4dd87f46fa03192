"""``python -m trainables.driver``: see ``trainables.driver.run``."""

from search_spaces.settings import DicesweepSettings, isolate_local_ray

isolate_local_ray(DicesweepSettings())  # before the driver's modules import Ray

from trainables.driver.run import main  # noqa: E402

main()
