// A gRPC client on @grpc/grpc-js with its default settings: it calls each
// named method on the driver socket with the request bytes given in hex, and
// prints each reply's bytes in hex, one line per call.
//
//   node client.js /path/to/driver.sock /cosi.v1alpha2.Identity/DriverGetInfo "" ...
"use strict";

const grpc = require("@grpc/grpc-js");

// Raw bytes in and out, so no stubs are generated.
const raw = (buffer) => buffer;

async function main(argv) {
  if (argv.length < 3 || argv.length % 2 !== 1) {
    console.error("usage: client.js SOCKET METHOD HEX_REQUEST [METHOD HEX_REQUEST]...");
    process.exit(2);
  }
  const client = new grpc.Client("unix://" + argv[0], grpc.credentials.createInsecure());
  try {
    for (let i = 1; i < argv.length; i += 2) {
      const method = argv[i];
      const request = Buffer.from(argv[i + 1], "hex");
      const reply = await new Promise((resolve, reject) => {
        const deadline = new Date(Date.now() + 30000);
        client.makeUnaryRequest(method, raw, raw, request, { deadline }, (err, value) =>
          err ? reject(new Error(`${method}: ${err.code} ${err.details}`)) : resolve(value),
        );
      });
      console.log(reply.toString("hex"));
    }
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err.message);
  process.exit(1);
});
