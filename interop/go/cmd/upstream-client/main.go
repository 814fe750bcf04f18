// Command upstream-client calls a COSI driver of upstream's v1alpha2 API
// (package sigs.k8s.io.cosi.v1alpha2) as upstream's sidecar does, on that
// API's generated Go stubs, and checks what it gets with a real S3 client:
// DriverGetInfo, DriverCreateBucket (twice: the same bucket_id),
// DriverGrantBucketAccess for S3 keys with READ_WRITE, a PUT and a GET of
// an object with the granted endpoint, region and keys (the AWS SDK for Go
// v2, path-style), DriverRevokeBucketAccess (the key then fails),
// DriverDeleteBucket, and DriverGetExistingBucket (NotFound).
//
// It exits non-zero with what went wrong on the first failure, and never
// prints a secret key.
//
//	upstream-client --endpoint unix:///run/cosi.sock --bucket b1 --account a1
//
// The endpoint defaults to COSI_ENDPOINT.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"time"

	up "cosi-rs.dev/interop/go/gen/upstream"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The object written and read back.
const (
	objectKey  = "interop/hello.txt"
	objectBody = "written through upstream's COSI API"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("COSI_ENDPOINT"), "the driver: unix:///path (default $COSI_ENDPOINT)")
	bucket := flag.String("bucket", "upstream-interop", "the bucket's name (DriverCreateBucketRequest.name)")
	account := flag.String("account", "upstream-interop-account", "the account's name (DriverGrantBucketAccessRequest.account_name)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("upstream-client: ")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, *endpoint, *bucket, *account); err != nil {
		log.Fatalf("FAILED: %v", err)
	}
	log.Print("OK")
}

func run(ctx context.Context, endpoint, bucketName, accountName string) error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	defer conn.Close()
	identity := up.NewIdentityClient(conn)
	provisioner := up.NewProvisionerClient(conn)
	s3Protocol := &up.ObjectProtocol{Type: up.ObjectProtocol_S3}
	keyAuth := &up.AuthenticationType{Type: up.AuthenticationType_KEY}

	info, err := identity.DriverGetInfo(ctx, &up.DriverGetInfoRequest{})
	if err != nil {
		return fmt.Errorf("DriverGetInfo: %w", err)
	}
	if info.Name == "" || !slices.ContainsFunc(info.SupportedProtocols, func(p *up.ObjectProtocol) bool {
		return p.GetType() == up.ObjectProtocol_S3
	}) {
		return fmt.Errorf("DriverGetInfo: want a name and S3 among the protocols, got %v", info)
	}
	log.Printf("driver %s", info.Name)

	create := &up.DriverCreateBucketRequest{Name: bucketName, Protocols: []*up.ObjectProtocol{s3Protocol}}
	created, err := provisioner.DriverCreateBucket(ctx, create)
	if err != nil {
		return fmt.Errorf("DriverCreateBucket: %w", err)
	}
	bucketID := created.BucketId
	if bucketID == "" || created.GetProtocols().GetS3() == nil {
		return fmt.Errorf("DriverCreateBucket: want a bucket_id and S3 info, got %v", created)
	}
	again, err := provisioner.DriverCreateBucket(ctx, create)
	if err != nil {
		return fmt.Errorf("DriverCreateBucket, repeated: %w", err)
	}
	if again.BucketId != bucketID {
		return fmt.Errorf("DriverCreateBucket is not idempotent by name: %q, then %q", bucketID, again.BucketId)
	}
	log.Printf("bucket %s created", bucketID)

	granted, err := provisioner.DriverGrantBucketAccess(ctx, &up.DriverGrantBucketAccessRequest{
		AccountName:        accountName,
		Protocol:           s3Protocol,
		AuthenticationType: keyAuth,
		Buckets: []*up.DriverGrantBucketAccessRequest_AccessedBucket{{
			BucketId:   bucketID,
			AccessMode: &up.AccessMode{Mode: up.AccessMode_READ_WRITE},
		}},
	})
	if err != nil {
		return fmt.Errorf("DriverGrantBucketAccess: %w", err)
	}
	keys := granted.GetCredentials().GetS3()
	if granted.AccountId == "" || keys.GetAccessKeyId() == "" || keys.GetAccessSecretKey() == "" {
		return errors.New("DriverGrantBucketAccess: want an account_id and S3 keys, got some empty")
	}
	if len(granted.Buckets) != 1 || granted.Buckets[0].BucketId != bucketID {
		return fmt.Errorf("DriverGrantBucketAccess: want info for bucket %s alone, got %d buckets", bucketID, len(granted.Buckets))
	}
	where := granted.Buckets[0].GetBucketInfo().GetS3()
	if where.GetBucketId() == "" || where.GetEndpoint() == "" || where.GetRegion() == "" {
		return fmt.Errorf("DriverGrantBucketAccess: want S3 bucket_id, endpoint and region, got %v", where)
	}
	log.Printf("account %s granted; S3 bucket %s at %s, region %s", granted.AccountId, where.BucketId, where.Endpoint, where.Region)

	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(where.Endpoint),
		Region:       where.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(keys.AccessKeyId, keys.AccessSecretKey, ""),
		UsePathStyle: true,
	})
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(where.BucketId),
		Key:    aws.String(objectKey),
		Body:   bytes.NewReader([]byte(objectBody)),
	}); err != nil {
		return fmt.Errorf("S3 PUT with the granted keys: %w", err)
	}
	body, err := getObject(ctx, client, where.BucketId)
	if err != nil {
		return fmt.Errorf("S3 GET with the granted keys: %w", err)
	}
	if body != objectBody {
		return fmt.Errorf("S3 GET returned %q, want %q", body, objectBody)
	}
	log.Printf("S3 PUT and GET of %s with the granted keys", objectKey)

	if _, err := provisioner.DriverRevokeBucketAccess(ctx, &up.DriverRevokeBucketAccessRequest{
		AccountId:          granted.AccountId,
		Protocol:           s3Protocol,
		AuthenticationType: keyAuth,
		Buckets:            []*up.DriverRevokeBucketAccessRequest_AccessedBucket{{BucketId: bucketID}},
	}); err != nil {
		return fmt.Errorf("DriverRevokeBucketAccess: %w", err)
	}
	if _, err := getObject(ctx, client, where.BucketId); err == nil {
		return errors.New("S3 GET with the revoked keys still works")
	}
	log.Printf("account %s revoked; its key is refused", granted.AccountId)

	if _, err := provisioner.DriverDeleteBucket(ctx, &up.DriverDeleteBucketRequest{BucketId: bucketID}); err != nil {
		return fmt.Errorf("DriverDeleteBucket: %w", err)
	}
	_, err = provisioner.DriverGetExistingBucket(ctx, &up.DriverGetExistingBucketRequest{
		ExistingBucketId: bucketID, Protocols: []*up.ObjectProtocol{s3Protocol},
	})
	if status.Code(err) != codes.NotFound {
		return fmt.Errorf("DriverGetExistingBucket after DriverDeleteBucket: want NotFound, got %v", err)
	}
	log.Printf("bucket %s deleted", bucketID)
	return nil
}

func getObject(ctx context.Context, client *s3.Client, bucket string) (string, error) {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(objectKey)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	return string(body), err
}
