#!/usr/bin/env bash
# s3cmd against a BucketAccess Secret, configured from the Secret's keys
# (the keys themselves from the environment) plus the one setting the
# README documents for s3cmd: --host-bucket from the addressing style.
# Lists, uploads, downloads, uploads a 6 MiB object in 5 MiB parts,
# deletes. Usage: s3cmd.sh <scratch directory>.
set -euo pipefail
work=$1
host=${AWS_ENDPOINT_URL#*://}
host=${host%/}
case "$AWS_ENDPOINT_URL" in
  http://*) tls=--no-ssl ;;
  *) tls=--ssl ;;
esac
if [ "$AWS_S3_ADDRESSING_STYLE" = path ]; then
  host_bucket=$host
else
  host_bucket="%(bucket)s.$host"
fi
: > "$work/s3cfg"
s3() {
  s3cmd --config="$work/s3cfg" --host="$host" --host-bucket="$host_bucket" "$tls" \
    --region="$AWS_DEFAULT_REGION" "$@"
}
url="s3://$BUCKET_NAME/s3cmd"
client=s3cmd
list() { s3 ls "$url/"; }
put() { s3 put "$1" "$url/$2"; }
get() { s3 get --force "$url/$1" "$2"; }
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

small_round_trip

step "multipart upload"
head -c $((6 * 1024 * 1024)) /dev/urandom > "$work/big.bin"
# --progress names the parts even when stdout is not a terminal.
out=$(s3 put --progress --multipart-chunk-size-mb=5 "$work/big.bin" "$url/big.bin")
echo "$out"
case "$out" in
  *"part 2 of 2"*) ;;
  *) fail "the upload was not a multipart upload" ;;
esac
get big.bin "$work/big.back"
cmp -s "$work/big.bin" "$work/big.back" || fail "the multipart object differs from the upload"

step list
listed=$(list | awk '{print $4}' | sort | tr '\n' ' ')
[ "$listed" = "$url/big.bin $url/small.txt " ] || fail "listed $listed"

step delete
s3 del "$url/small.txt" "$url/big.bin"
[ -z "$(list)" ] || fail "objects remain after the deletes"
echo "s3cmd: ok"
