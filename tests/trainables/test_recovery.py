"""Which checkpoint a trial resumes from when the one Tune's state names is gone."""

from __future__ import annotations

from pathlib import Path

from pyarrow.fs import LocalFileSystem

from tests.trainables import test_s3_storage
from tests.trainables.test_s3_storage import BUCKET, client_keys
from trainables.driver.recovery import exists, replacement

s3 = test_s3_storage.s3  # its moto server, as a fixture of this module too


def trial_folder(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / "result.json").write_text("{}")
    return tmp_path


def test_the_oldest_checkpoint_written_after_the_missing_one_replaces_it(tmp_path: Path) -> None:
    # checkpoint_000004 may be an upload a kill cut short; 000003 was registered.
    folder = trial_folder(tmp_path, "checkpoint_000003", "checkpoint_000004")
    missing = str(folder / "checkpoint_000002")
    assert not exists(LocalFileSystem(), missing)
    assert replacement(LocalFileSystem(), str(folder), missing) == str(folder / "checkpoint_000003")


def test_no_later_checkpoint_means_none(tmp_path: Path) -> None:
    folder = trial_folder(tmp_path, "checkpoint_000001")
    assert exists(LocalFileSystem(), str(folder / "checkpoint_000001"))
    assert replacement(LocalFileSystem(), str(folder), str(folder / "checkpoint_000002")) is None
    assert replacement(LocalFileSystem(), str(tmp_path / "gone"), str(folder / "x")) is None


def test_the_same_on_s3(s3: dict[str, str]) -> None:
    """Checkpoints on S3 are key prefixes, not folders: found and listed the same way."""
    import boto3
    from pyarrow.fs import S3FileSystem

    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], **client_keys())
    trial = f"{BUCKET}/ray-results/sweep/trial_0"
    for name in ("checkpoint_000003", "checkpoint_000004"):
        client.put_object(Bucket=BUCKET, Key=f"ray-results/sweep/trial_0/{name}/state.pt", Body=b"")
    filesystem = S3FileSystem(
        access_key=s3["AWS_ACCESS_KEY_ID"],
        secret_key=s3["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
        endpoint_override=s3["AWS_ENDPOINT_URL"],
        scheme="http",
    )
    assert exists(filesystem, f"{trial}/checkpoint_000003")
    assert not exists(filesystem, f"{trial}/checkpoint_000002")
    found = replacement(filesystem, trial, f"{trial}/checkpoint_000002")
    assert found == f"{trial}/checkpoint_000003"
    assert replacement(filesystem, trial, f"{trial}/checkpoint_000004") is None
