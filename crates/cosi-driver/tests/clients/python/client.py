"""A gRPC client on grpcio (gRPC's C core) with its default settings: it
calls each named method on the driver socket with the request bytes given in
hex, and prints each reply's bytes in hex, one line per call.

    python3 client.py /path/to/driver.sock /cosi.v1alpha2.Identity/DriverGetInfo "" ...
"""

import sys

import grpc


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        sys.exit("usage: client.py SOCKET METHOD HEX_REQUEST [METHOD HEX_REQUEST]...")
    # Raw bytes in and out (no serializers), so no stubs are generated.
    with grpc.insecure_channel("unix://" + argv[1]) as channel:
        for method, request in zip(argv[2::2], argv[3::2]):
            call = channel.unary_unary(method)
            try:
                reply = call(bytes.fromhex(request), timeout=30)
            except grpc.RpcError as e:
                sys.exit(f"{method}: {e.code()}: {e.details()}")
            print(reply.hex(), flush=True)


if __name__ == "__main__":
    main(sys.argv)
