"""An S3 endpoint a test talks to over HTTP, and helpers to make buckets and clients on it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config


@dataclass(frozen=True)
class S3Endpoint:
    """Where a running S3 server listens and how to authenticate to it."""

    name: str  # "moto" or "rgw"
    url: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def client(self, **config: Any) -> Any:
        """A raw boto3 client (for assertions and baselines), path-style, one attempt."""
        cfg = Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            **config,
        )
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=cfg,
        )

    def new_bucket(self) -> str:
        """Create a fresh bucket with a unique name and return its name."""
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.client().create_bucket(Bucket=name)
        return name

    def env(self) -> dict[str, str]:
        """Environment variables that point the AWS SDK (and our CLI) at this endpoint."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
        }
