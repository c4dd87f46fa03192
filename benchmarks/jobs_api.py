"""A Ray Jobs API that accepts and records jobs without running them: the part of the
Jobs REST API that ``ray.job_submission.JobSubmissionClient`` speaks (version, package
upload, submit, status, stop), so the real service submits to it as to a cluster's
head. A job is RUNNING once submitted and SUCCEEDED ``--finish-after`` seconds later;
``GET /records`` says how often each submission id was submitted and stopped, and
how many requests were answered.

For the load and scale benchmarks (``bench_load.py``): what they measure is the
service, so the cluster must cost nothing and count everything.

    python benchmarks/jobs_api.py --port 8265 [--finish-after 10]
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from typing import Any

import ray
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response


def missing(job_id: str) -> JSONResponse:
    """Ray's answer for an unknown job (the client reads "does not exist" as MISSING)."""
    return JSONResponse({"message": f"Job {job_id} does not exist"}, status_code=404)


def create_jobs_api(finish_after_s: float) -> FastAPI:
    app = FastAPI()
    lock = threading.Lock()
    jobs: dict[str, dict[str, Any]] = {}
    submitted: Counter[str] = Counter()
    stopped: Counter[str] = Counter()
    packages: dict[str, int] = {}
    answered = Counter[str]()

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Response:
        if request.url.path != "/records":
            answered["requests"] += 1
        response: Response = await call_next(request)
        return response

    def status(job: dict[str, Any]) -> str:
        if job["status"] == "RUNNING" and time.monotonic() - job["at"] >= finish_after_s:
            job["status"] = "SUCCEEDED"
        return str(job["status"])

    @app.get("/api/version")
    def version() -> dict[str, str]:
        return {"version": "4", "ray_version": ray.__version__, "ray_commit": "recording"}

    @app.get("/api/packages/{protocol}/{name}")
    def package(protocol: str, name: str) -> Response:
        return Response(status_code=200 if f"{protocol}/{name}" in packages else 404)

    @app.put("/api/packages/{protocol}/{name}")
    async def upload(protocol: str, name: str, request: Request) -> Response:
        packages[f"{protocol}/{name}"] = len(await request.body())
        return Response(status_code=200)

    @app.post("/api/jobs/")
    async def submit(request: Request) -> JSONResponse:
        body = await request.json()
        job_id = body["submission_id"]
        with lock:
            submitted[job_id] += 1
            if job_id in jobs:
                message = f"Job with submission_id {job_id} already exists."
                return JSONResponse({"message": message}, status_code=400)
            jobs[job_id] = {"status": "RUNNING", "at": time.monotonic(), **body}
        return JSONResponse({"submission_id": job_id, "job_id": None})

    @app.get("/api/jobs/{job_id}")
    def details(job_id: str) -> JSONResponse:
        with lock:
            job = jobs.get(job_id)
            if job is None:
                return missing(job_id)
            return JSONResponse(
                {
                    "type": "SUBMISSION",
                    "submission_id": job_id,
                    "entrypoint": job["entrypoint"],
                    "status": status(job),
                    "message": "recorded, not run",
                }
            )

    @app.post("/api/jobs/{job_id}/stop")
    def stop(job_id: str) -> JSONResponse:
        with lock:
            job = jobs.get(job_id)
            if job is None:
                return missing(job_id)
            stopped[job_id] += 1
            was_running = status(job) == "RUNNING"
            job["status"] = "STOPPED" if was_running else job["status"]
        return JSONResponse({"stopped": was_running})

    @app.get("/records")
    def records() -> dict[str, Any]:
        with lock:
            return {
                "submitted": dict(submitted),
                "stopped": dict(stopped),
                "statuses": dict(Counter(status(job) for job in jobs.values())),
                "requests": answered["requests"],
            }

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--finish-after", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    app = create_jobs_api(args.finish_after)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
