"""boto3 against a BucketAccess Secret.

Configured from the Secret's keys in the environment (as `envFrom` gives
them) plus the one setting the README documents for boto3: the addressing
style. Lists, uploads, downloads, uploads a 6 MiB object in two parts,
deletes; exits non-zero on the first step that fails. Prints no
credentials.
"""

import os
import sys

import boto3
from botocore.config import Config

MIB = 1024 * 1024


def main() -> None:
    bucket = os.environ["BUCKET_NAME"]
    s3 = boto3.client(
        "s3",
        config=Config(s3={"addressing_style": os.environ["AWS_S3_ADDRESSING_STYLE"]}),
    )

    step("list")
    s3.list_objects_v2(Bucket=bucket, Prefix="boto3/")

    step("upload")
    small = b"written by boto3\n"
    s3.put_object(Bucket=bucket, Key="boto3/small.txt", Body=small)

    step("download")
    got = s3.get_object(Bucket=bucket, Key="boto3/small.txt")["Body"].read()
    check(got == small, "downloaded bytes differ from the upload")

    step("multipart upload")
    big = os.urandom(6 * MIB)
    parts = [big[: 5 * MIB], big[5 * MIB :]]
    up = s3.create_multipart_upload(Bucket=bucket, Key="boto3/big.bin")
    done = []
    for number, data in enumerate(parts, start=1):
        out = s3.upload_part(
            Bucket=bucket,
            Key="boto3/big.bin",
            UploadId=up["UploadId"],
            PartNumber=number,
            Body=data,
        )
        done.append({"PartNumber": number, "ETag": out["ETag"]})
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="boto3/big.bin",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": done},
    )
    got = s3.get_object(Bucket=bucket, Key="boto3/big.bin")["Body"].read()
    check(got == big, "the multipart object differs from the upload")

    step("list")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/")
    keys = sorted(o["Key"] for o in listed.get("Contents", []))
    check(keys == ["boto3/big.bin", "boto3/small.txt"], f"listed {keys}")

    step("delete")
    for key in keys:
        s3.delete_object(Bucket=bucket, Key=key)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/")
    check(listed.get("KeyCount", 0) == 0, "objects remain after the deletes")
    print("boto3: ok")


def step(name: str) -> None:
    print(f"boto3: {name}", flush=True)


def check(ok: bool, what: str) -> None:
    if not ok:
        sys.exit(f"boto3: {what}")


if __name__ == "__main__":
    main()
