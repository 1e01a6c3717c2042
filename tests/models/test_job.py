import pytest
from pydantic import ValidationError

from models import Job, JobKind


def test_small_short_contract_job_is_debug() -> None:
    """A job of 8 GPUs or fewer with a minimum runtime of 15 min or less is derived as debug."""
    assert Job(id="a", project="p", gpus=4, min_runtime="10m").kind is JobKind.DEBUG


def test_large_job_is_batch() -> None:
    """A job above 8 GPUs is derived as batch whatever its contract."""
    assert Job(id="a", project="p", gpus=16, min_runtime="10m").kind is JobKind.BATCH


def test_explicit_kind_is_kept() -> None:
    """An explicit kind is never overridden by the derivation."""
    assert Job(id="a", project="p", gpus=1, min_runtime="5m", kind="interactive").kind is JobKind.INTERACTIVE


def test_zero_min_runtime_is_unallocated() -> None:
    """min_runtime 0 marks free (unallocated) work."""
    assert not Job(id="a", project="p", gpus=1, min_runtime=0).allocated
    assert Job(id="a", project="p", gpus=1, min_runtime="1m").allocated


def test_job_is_frozen() -> None:
    """Jobs are immutable."""
    job = Job(id="a", project="p", gpus=1)
    with pytest.raises(ValidationError):
        job.gpus = 2  # type: ignore[misc]


def test_unknown_field_is_rejected() -> None:
    """A misspelt key is an error, not silently ignored."""
    with pytest.raises(ValidationError, match="gpu"):
        Job.model_validate({"id": "a", "project": "p", "gpus": 1, "gpu": 2})


def test_allows_checks_types_and_clusters() -> None:
    """allows() honours both the GPU-type and the cluster restriction."""
    job = Job(id="a", project="p", gpus=1, gpu_types=["B200"], clusters=["beta"])
    assert job.allows("beta", "B200")
    assert not job.allows("alpha", "B200")
    assert not job.allows("beta", "H100")


def test_free_small_job_is_batch() -> None:
    """Free work (min_runtime 0) is never derived as debug, however small."""
    assert Job(id="a", project="p", gpus=1, min_runtime=0).kind is JobKind.BATCH
