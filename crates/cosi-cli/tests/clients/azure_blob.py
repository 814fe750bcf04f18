"""Microsoft's azure-storage-blob SDK against an Azure BucketAccess Secret.

Configured from the Secret's keys in the environment alone (as `envFrom`
gives them): AZURE_STORAGE_SAS_TOKEN is the container's SAS URL, which
ContainerClient.from_container_url takes as it is. Prints one JSON line and
no credential.

  write: uploads KEY with BODY, lists the container, downloads KEY;
         prints {"listed": [...], "downloaded": "..."}.
  read:  downloads KEY; prints {"downloaded": "..."} or, when the service
         refuses, {"refused": <HTTP status>, "code": "..."}.
"""

import datetime
import json
import os
import sys

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient


def main() -> None:
    mode, key = sys.argv[1], sys.argv[2]
    expiry = os.environ["AZURE_STORAGE_SAS_TOKEN_EXPIRY_TIMESTAMP"]
    expires = datetime.datetime.fromisoformat(expiry.replace("Z", "+00:00"))
    if expires <= datetime.datetime.now(datetime.timezone.utc):
        sys.exit(f"the token expired at {expiry}")
    container = ContainerClient.from_container_url(os.environ["AZURE_STORAGE_SAS_TOKEN"])
    if mode == "write":
        container.upload_blob(key, sys.argv[3].encode(), overwrite=True)
        listed = [b.name for b in container.list_blobs()]
        downloaded = container.download_blob(key).readall().decode()
        print(json.dumps({"listed": listed, "downloaded": downloaded}))
    else:
        try:
            downloaded = container.download_blob(key).readall().decode()
            print(json.dumps({"downloaded": downloaded}))
        except HttpResponseError as e:
            print(json.dumps({"refused": e.status_code, "code": e.error_code}))


if __name__ == "__main__":
    main()
