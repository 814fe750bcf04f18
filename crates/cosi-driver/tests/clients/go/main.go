// A gRPC client on grpc-go with its default settings: it calls each named
// method on the driver socket with the request bytes given in hex, and
// prints each reply's bytes in hex, one line per call.
//
//	go run . /path/to/driver.sock /cosi.v1alpha2.Identity/DriverGetInfo "" ...
package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// raw passes messages through as bytes, so no stubs are generated.
type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (raw) Name() string { return "proto" }

func main() {
	if len(os.Args) < 4 || len(os.Args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "usage: client SOCKET METHOD HEX_REQUEST [METHOD HEX_REQUEST]...")
		os.Exit(2)
	}
	conn, err := grpc.NewClient("unix://"+os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	defer conn.Close()
	for i := 2; i < len(os.Args); i += 2 {
		method := os.Args[i]
		request, err := hex.DecodeString(os.Args[i+1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "request:", err)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var reply []byte
		err = conn.Invoke(ctx, method, &request, &reply, grpc.ForceCodec(raw{}))
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", method, err)
			os.Exit(1)
		}
		fmt.Println(hex.EncodeToString(reply))
	}
}
