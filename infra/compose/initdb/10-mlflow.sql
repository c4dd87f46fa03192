-- MLflow's tracking store beside the service's, on the same server and owner.
CREATE DATABASE mlflow;
