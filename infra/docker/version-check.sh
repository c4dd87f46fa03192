#!/bin/sh
# Prints the versions that must agree across the deployment (API, Ray head, workers):
# `docker run IMAGE dicesweep-version-check`. The services refuse a skew themselves.
exec python -c 'import json; from search_spaces.versions import stack_versions; print(json.dumps(stack_versions()))'
