"""``python -m trainables.driver``: see ``trainables.driver.run``."""

from search_spaces.mlflow_credentials import adopt_job_credentials
from search_spaces.settings import DicesweepSettings, isolate_local_ray

isolate_local_ray(DicesweepSettings())  # before the driver's modules import Ray
adopt_job_credentials()  # the owner's MLflow sign-in, sent as a file (sweep_service.runner)

from trainables.driver.run import main  # noqa: E402

main()
