// The AWS SDK for JavaScript v3 against a BucketAccess Secret.
//
// Configured from the Secret's keys in the environment (as `envFrom` gives
// them) plus the one setting the README documents for this SDK:
// `forcePathStyle` from the addressing style. Lists, uploads, downloads,
// uploads a 6 MiB object in two parts, deletes; exits non-zero on the
// first step that fails. Prints no credentials.
import { randomBytes } from "node:crypto";
import {
  S3Client,
  ListObjectsV2Command,
  PutObjectCommand,
  GetObjectCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  CompleteMultipartUploadCommand,
  DeleteObjectCommand,
} from "@aws-sdk/client-s3";

const MIB = 1024 * 1024;
const Bucket = process.env.BUCKET_NAME;
const s3 = new S3Client({
  forcePathStyle: process.env.AWS_S3_ADDRESSING_STYLE === "path",
});

function step(name) {
  console.log(`js-v3: ${name}`);
}

function check(ok, what) {
  if (!ok) {
    console.error(`js-v3: ${what}`);
    process.exit(1);
  }
}

async function download(Key) {
  const out = await s3.send(new GetObjectCommand({ Bucket, Key }));
  return Buffer.from(await out.Body.transformToByteArray());
}

async function listed() {
  const out = await s3.send(new ListObjectsV2Command({ Bucket, Prefix: "js/" }));
  return (out.Contents ?? []).map((o) => o.Key).sort();
}

step("list");
await listed();

step("upload");
const small = Buffer.from("written by the AWS SDK for JavaScript v3\n");
await s3.send(new PutObjectCommand({ Bucket, Key: "js/small.txt", Body: small }));

step("download");
check((await download("js/small.txt")).equals(small), "downloaded bytes differ from the upload");

step("multipart upload");
const big = randomBytes(6 * MIB);
const parts = [big.subarray(0, 5 * MIB), big.subarray(5 * MIB)];
const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key: "js/big.bin" }));
const done = [];
for (const [i, Body] of parts.entries()) {
  const PartNumber = i + 1;
  const out = await s3.send(new UploadPartCommand({ Bucket, Key: "js/big.bin", UploadId, PartNumber, Body }));
  done.push({ PartNumber, ETag: out.ETag });
}
await s3.send(
  new CompleteMultipartUploadCommand({ Bucket, Key: "js/big.bin", UploadId, MultipartUpload: { Parts: done } }),
);
check((await download("js/big.bin")).equals(big), "the multipart object differs from the upload");

step("list");
const keys = await listed();
check(JSON.stringify(keys) === JSON.stringify(["js/big.bin", "js/small.txt"]), `listed ${keys}`);

step("delete");
for (const Key of keys) {
  await s3.send(new DeleteObjectCommand({ Bucket, Key }));
}
check((await listed()).length === 0, "objects remain after the deletes");
console.log("js-v3: ok");
