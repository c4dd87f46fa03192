"""``python -m trainables.driver``: see ``trainables.driver.run``; its exit codes are
``trainables.driver.exits``'s."""

from trainables.driver.exits import run_declared


def start() -> None:
    from search_spaces.mlflow_credentials import adopt_job_credentials
    from search_spaces.settings import DicesweepSettings, isolate_local_ray

    isolate_local_ray(DicesweepSettings())  # before the driver's modules import Ray
    adopt_job_credentials()  # the owner's MLflow sign-in, sent as a file (sweep_service.runner)

    from trainables.driver.run import main

    main()


run_declared(start)
