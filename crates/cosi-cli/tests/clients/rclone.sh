#!/usr/bin/env bash
# rclone against a BucketAccess Secret, configured from the Secret's keys
# in the environment (the keys themselves through env_auth) plus the one
# setting the README documents for rclone: force_path_style from the
# addressing style. Lists, uploads, downloads, uploads a 6 MiB object in
# two 5 MiB-cutoff parts, deletes. Usage: rclone.sh <scratch directory>.
set -euo pipefail
work=$1
export RCLONE_CONFIG="$work/rclone.conf"
: > "$RCLONE_CONFIG"
export RCLONE_CONFIG_COSI_TYPE=s3
export RCLONE_CONFIG_COSI_PROVIDER=Other
export RCLONE_CONFIG_COSI_ENV_AUTH=true
export RCLONE_CONFIG_COSI_ENDPOINT="$AWS_ENDPOINT_URL"
export RCLONE_CONFIG_COSI_REGION="$AWS_DEFAULT_REGION"
if [ "$AWS_S3_ADDRESSING_STYLE" = path ]; then
  export RCLONE_CONFIG_COSI_FORCE_PATH_STYLE=true
else
  export RCLONE_CONFIG_COSI_FORCE_PATH_STYLE=false
fi
remote="cosi:$BUCKET_NAME/rclone"
client=rclone
list() { rclone lsf "$remote"; }
put() { rclone copyto "$1" "$remote/$2"; }
get() { rclone copyto "$remote/$1" "$2"; }
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

small_round_trip

step "multipart upload"
head -c $((6 * 1024 * 1024)) /dev/urandom > "$work/big.bin"
rclone copyto -vv --s3-upload-cutoff 5M --s3-chunk-size 5M "$work/big.bin" "$remote/big.bin" 2> "$work/rclone.log" \
  || { cat "$work/rclone.log" >&2; fail "the multipart upload failed"; }
grep -qi "multipart upload" "$work/rclone.log" || fail "the upload was not a multipart upload"
get big.bin "$work/big.back"
cmp -s "$work/big.bin" "$work/big.back" || fail "the multipart object differs from the upload"

step list
listed=$(list | sort | tr '\n' ' ')
[ "$listed" = "big.bin small.txt " ] || fail "listed $listed"

step delete
rclone deletefile "$remote/small.txt"
rclone deletefile "$remote/big.bin"
[ -z "$(list)" ] || fail "objects remain after the deletes"
echo "rclone: ok"
