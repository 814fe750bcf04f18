package dev.cosirs.clienttest;

import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC client on grpc-java with its default settings: it calls each named
 * method on the driver socket with the request bytes given in hex, and prints
 * each reply's bytes in hex, one line per call.
 *
 * <pre>java Client /path/to/driver.sock /cosi.v1alpha2.Identity/DriverGetInfo "" ...</pre>
 */
public final class Client {
  /** Passes messages through as bytes, so no stubs are generated. */
  private static final MethodDescriptor.Marshaller<byte[]> RAW =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
          return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
          try {
            return stream.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 3 || args.length % 2 != 1) {
      System.err.println("usage: Client SOCKET METHOD HEX_REQUEST [METHOD HEX_REQUEST]...");
      System.exit(2);
    }
    ManagedChannel channel =
        Grpc.newChannelBuilder("unix://" + args[0], InsecureChannelCredentials.create()).build();
    int status = 0;
    try {
      for (int i = 1; i < args.length; i += 2) {
        MethodDescriptor<byte[], byte[]> method =
            MethodDescriptor.<byte[], byte[]>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY)
                .setFullMethodName(args[i].substring(1))
                .setRequestMarshaller(RAW)
                .setResponseMarshaller(RAW)
                .build();
        byte[] request = HexFormat.of().parseHex(args[i + 1]);
        try {
          byte[] reply =
              ClientCalls.blockingUnaryCall(
                  channel, method, CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), request);
          System.out.println(HexFormat.of().formatHex(reply));
        } catch (StatusRuntimeException e) {
          System.err.println(args[i] + ": " + e.getStatus());
          status = 1;
          break;
        }
      }
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    System.exit(status);
  }
}
