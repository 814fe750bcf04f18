// Command upstream-driver is a COSI driver of upstream's v1alpha2 API
// (package sigs.k8s.io.cosi.v1alpha2), written on that API's generated Go
// stubs. Its buckets and accounts are real: it fronts a driver of cosi-rs's
// own API (package cosi.v1alpha2), such as cosi-driver-local, and
// translates each call field by field.
//
// Upstream provisions in one call where cosi-rs takes two: a bucket is
// DriverGenerateBucketId then DriverCreateBucket, an access
// DriverGenerateBucketAccessId then DriverGrantBucketAccess. Both generate
// calls derive the ID from the name, so each upstream call stays
// idempotent by name. A backend's error status is returned unchanged.
//
//	upstream-driver --endpoint unix:///run/upstream.sock --backend unix:///run/cosi.sock
//
// The endpoint defaults to COSI_ENDPOINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	rs "cosi-rs.dev/interop/go/gen/cosirs"
	up "cosi-rs.dev/interop/go/gen/upstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("COSI_ENDPOINT"), "where to serve upstream's API: unix:///path (default $COSI_ENDPOINT)")
	backend := flag.String("backend", "", "the cosi-rs driver to front: unix:///path")
	flag.Parse()
	if err := run(*endpoint, *backend); err != nil {
		log.Fatalf("upstream-driver: %v", err)
	}
}

func run(endpoint, backend string) error {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || path == "" {
		return fmt.Errorf("the endpoint must be unix:///path, not %q", endpoint)
	}
	if !strings.HasPrefix(backend, "unix://") {
		return fmt.Errorf("the backend must be unix:///path, not %q", backend)
	}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("backend %s: %w", backend, err)
	}
	defer conn.Close()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	d := &driver{identity: rs.NewIdentityClient(conn), provisioner: rs.NewProvisionerClient(conn)}
	up.RegisterIdentityServer(server, d)
	up.RegisterProvisionerServer(server, d)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		server.GracefulStop()
	}()
	log.Printf("upstream-driver: serving sigs.k8s.io.cosi.v1alpha2 on %s, fronting %s", endpoint, backend)
	return server.Serve(listener)
}

// driver serves upstream's Identity and Provisioner through a cosi-rs
// driver.
type driver struct {
	up.UnimplementedIdentityServer
	up.UnimplementedProvisionerServer
	identity    rs.IdentityClient
	provisioner rs.ProvisionerClient
}

func (d *driver) DriverGetInfo(ctx context.Context, _ *up.DriverGetInfoRequest) (*up.DriverGetInfoResponse, error) {
	info, err := d.identity.DriverGetInfo(ctx, &rs.DriverGetInfoRequest{})
	if err != nil {
		return nil, err
	}
	protocols := make([]*up.ObjectProtocol, 0, len(info.SupportedProtocols))
	for _, p := range info.SupportedProtocols {
		protocols = append(protocols, protocolToUpstream(p))
	}
	return &up.DriverGetInfoResponse{Name: info.Name, SupportedProtocols: protocols}, nil
}

func (d *driver) DriverCreateBucket(ctx context.Context, r *up.DriverCreateBucketRequest) (*up.DriverCreateBucketResponse, error) {
	protocols, err := protocolsToRs(r.Protocols)
	if err != nil {
		return nil, err
	}
	id, err := d.provisioner.DriverGenerateBucketId(ctx, &rs.DriverGenerateBucketIdRequest{
		Name: r.Name, Protocols: protocols, Parameters: r.Parameters,
	})
	if err != nil {
		return nil, err
	}
	created, err := d.provisioner.DriverCreateBucket(ctx, &rs.DriverCreateBucketRequest{
		BucketId: id.BucketId, Protocols: protocols, Parameters: r.Parameters,
	})
	if err != nil {
		return nil, err
	}
	return &up.DriverCreateBucketResponse{BucketId: id.BucketId, Protocols: bucketInfoToUpstream(created.Protocols)}, nil
}

func (d *driver) DriverGetExistingBucket(ctx context.Context, r *up.DriverGetExistingBucketRequest) (*up.DriverGetExistingBucketResponse, error) {
	protocols, err := protocolsToRs(r.Protocols)
	if err != nil {
		return nil, err
	}
	got, err := d.provisioner.DriverGetBucket(ctx, &rs.DriverGetBucketRequest{
		BucketId: r.ExistingBucketId, Protocols: protocols, Parameters: r.Parameters,
	})
	if err != nil {
		return nil, err
	}
	return &up.DriverGetExistingBucketResponse{BucketId: r.ExistingBucketId, Protocols: bucketInfoToUpstream(got.Protocols)}, nil
}

func (d *driver) DriverDeleteBucket(ctx context.Context, r *up.DriverDeleteBucketRequest) (*up.DriverDeleteBucketResponse, error) {
	if _, err := d.provisioner.DriverDeleteBucket(ctx, &rs.DriverDeleteBucketRequest{
		BucketId: r.BucketId, Parameters: r.Parameters,
	}); err != nil {
		return nil, err
	}
	return &up.DriverDeleteBucketResponse{}, nil
}

func (d *driver) DriverGrantBucketAccess(ctx context.Context, r *up.DriverGrantBucketAccessRequest) (*up.DriverGrantBucketAccessResponse, error) {
	protocol, err := protocolToRs(r.Protocol)
	if err != nil {
		return nil, err
	}
	auth, err := authenticationToRs(r.AuthenticationType, r.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	buckets := make([]*rs.AccessedBucket, 0, len(r.Buckets))
	for i, b := range r.Buckets {
		modes, err := accessModesToRs(i, b.AccessMode)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, &rs.AccessedBucket{BucketId: b.BucketId, AccessMode: modes})
	}
	id, err := d.provisioner.DriverGenerateBucketAccessId(ctx, &rs.DriverGenerateBucketAccessIdRequest{
		AccountName: r.AccountName, Buckets: buckets, Protocol: protocol,
		AuthenticationType: auth, Parameters: r.Parameters,
	})
	if err != nil {
		return nil, err
	}
	granted, err := d.provisioner.DriverGrantBucketAccess(ctx, &rs.DriverGrantBucketAccessRequest{
		AccountId: id.AccountId, Buckets: buckets, Protocol: protocol,
		AuthenticationType: auth, Parameters: r.Parameters,
	})
	if err != nil {
		return nil, err
	}
	resp := &up.DriverGrantBucketAccessResponse{AccountId: id.AccountId, Credentials: credentialsToUpstream(granted.Credentials)}
	for _, b := range granted.Buckets {
		resp.Buckets = append(resp.Buckets, &up.DriverGrantBucketAccessResponse_BucketInfo{
			BucketId: b.BucketId, BucketInfo: bucketInfoToUpstream(b.BucketInfo),
		})
	}
	return resp, nil
}

func (d *driver) DriverRevokeBucketAccess(ctx context.Context, r *up.DriverRevokeBucketAccessRequest) (*up.DriverRevokeBucketAccessResponse, error) {
	protocol, err := protocolToRs(r.Protocol)
	if err != nil {
		return nil, err
	}
	auth, err := authenticationToRs(r.AuthenticationType, r.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	buckets := make([]*rs.RevokedBucket, 0, len(r.Buckets))
	for _, b := range r.Buckets {
		buckets = append(buckets, &rs.RevokedBucket{BucketId: b.BucketId})
	}
	if _, err := d.provisioner.DriverRevokeBucketAccess(ctx, &rs.DriverRevokeBucketAccessRequest{
		AccountId: r.AccountId, Buckets: buckets, Protocol: protocol,
		AuthenticationType: auth, Parameters: r.Parameters,
	}); err != nil {
		return nil, err
	}
	return &up.DriverRevokeBucketAccessResponse{}, nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// protocolToRs unwraps upstream's ObjectProtocol{type}.
func protocolToRs(p *up.ObjectProtocol) (rs.ObjectProtocol, error) {
	switch p.GetType() {
	case up.ObjectProtocol_S3:
		return rs.ObjectProtocol_OBJECT_PROTOCOL_S3, nil
	case up.ObjectProtocol_AZURE:
		return rs.ObjectProtocol_OBJECT_PROTOCOL_AZURE, nil
	case up.ObjectProtocol_GCS:
		return rs.ObjectProtocol_OBJECT_PROTOCOL_GCS, nil
	}
	return 0, invalid("protocol %v is not S3, AZURE or GCS", p.GetType())
}

func protocolsToRs(ps []*up.ObjectProtocol) ([]rs.ObjectProtocol, error) {
	out := make([]rs.ObjectProtocol, 0, len(ps))
	for _, p := range ps {
		rp, err := protocolToRs(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rp)
	}
	return out, nil
}

func protocolToUpstream(p rs.ObjectProtocol) *up.ObjectProtocol {
	t := up.ObjectProtocol_UNKNOWN
	switch p {
	case rs.ObjectProtocol_OBJECT_PROTOCOL_S3:
		t = up.ObjectProtocol_S3
	case rs.ObjectProtocol_OBJECT_PROTOCOL_AZURE:
		t = up.ObjectProtocol_AZURE
	case rs.ObjectProtocol_OBJECT_PROTOCOL_GCS:
		t = up.ObjectProtocol_GCS
	}
	return &up.ObjectProtocol{Type: t}
}

// authenticationToRs unwraps upstream's AuthenticationType{type}. Upstream
// names a ServiceAccount without its namespace, which a cosi-rs driver
// needs, so only Key authentication is translated.
func authenticationToRs(a *up.AuthenticationType, serviceAccount string) (rs.AuthenticationType, error) {
	switch a.GetType() {
	case up.AuthenticationType_KEY:
		if serviceAccount != "" {
			return 0, invalid("service_account_name must be empty with KEY authentication")
		}
		return rs.AuthenticationType_AUTHENTICATION_TYPE_KEY, nil
	case up.AuthenticationType_SERVICE_ACCOUNT:
		return 0, invalid("SERVICE_ACCOUNT authentication is not supported: upstream's request does not name the ServiceAccount's namespace")
	}
	return 0, invalid("authentication_type %v is not KEY", a.GetType())
}

// accessModesToRs gives upstream's one mode for a bucket to each of
// cosi-rs's three categories.
func accessModesToRs(i int, m *up.AccessMode) (*rs.AccessModes, error) {
	var mode rs.AccessMode
	switch m.GetMode() {
	case up.AccessMode_READ_WRITE:
		mode = rs.AccessMode_ACCESS_MODE_READ_WRITE
	case up.AccessMode_READ_ONLY:
		mode = rs.AccessMode_ACCESS_MODE_READ_ONLY
	case up.AccessMode_WRITE_ONLY:
		mode = rs.AccessMode_ACCESS_MODE_WRITE_ONLY
	default:
		return nil, invalid("buckets[%d].access_mode %v is not READ_WRITE, READ_ONLY or WRITE_ONLY", i, m.GetMode())
	}
	return &rs.AccessModes{ObjectData: mode, ObjectMetadata: mode, BucketMetadata: mode}, nil
}

// bucketInfoToUpstream translates per-protocol bucket info. S3's fields
// are renumbered (upstream: endpoint 2, region 3; cosi-rs: region 2,
// endpoint 3), and its addressing style is wrapped.
func bucketInfoToUpstream(b *rs.ProtocolBucketInfo) *up.ObjectProtocolAndBucketInfo {
	if b == nil {
		return nil
	}
	out := &up.ObjectProtocolAndBucketInfo{}
	if s3 := b.S3; s3 != nil {
		style := up.S3AddressingStyle_UNKNOWN
		switch s3.AddressingStyle {
		case rs.S3AddressingStyle_S3_ADDRESSING_STYLE_PATH:
			style = up.S3AddressingStyle_PATH
		case rs.S3AddressingStyle_S3_ADDRESSING_STYLE_VIRTUAL:
			style = up.S3AddressingStyle_VIRTUAL
		}
		out.S3 = &up.S3BucketInfo{
			BucketId:        s3.BucketName,
			Endpoint:        s3.Endpoint,
			Region:          s3.Region,
			AddressingStyle: &up.S3AddressingStyle{Style: style},
		}
	}
	if az := b.Azure; az != nil {
		out.Azure = &up.AzureBucketInfo{StorageAccount: az.StorageAccount}
	}
	if gcs := b.Gcs; gcs != nil {
		out.Gcs = &up.GcsBucketInfo{ProjectId: gcs.ProjectId, BucketName: gcs.BucketName}
	}
	return out
}

// credentialsToUpstream translates credentials. Azure's expiry becomes an
// RFC 3339 string; cosi-rs's certificate authority has no upstream field.
func credentialsToUpstream(c *rs.Credentials) *up.CredentialInfo {
	if c == nil {
		return nil
	}
	out := &up.CredentialInfo{}
	if s3 := c.S3; s3 != nil {
		out.S3 = &up.S3CredentialInfo{AccessKeyId: s3.AccessKeyId, AccessSecretKey: s3.AccessSecretKey}
	}
	if az := c.Azure; az != nil {
		expiry := ""
		if az.ExpiryTimestamp != nil {
			expiry = az.ExpiryTimestamp.AsTime().Format(time.RFC3339)
		}
		out.Azure = &up.AzureCredentialInfo{AccessToken: az.AccessToken, ExpiryTimestamp: expiry}
	}
	if gcs := c.Gcs; gcs != nil {
		out.Gcs = &up.GcsCredentialInfo{
			AccessId:       gcs.HmacAccessId,
			AccessSecret:   gcs.HmacSecret,
			PrivateKeyName: gcs.PrivateKeyId,
			ServiceAccount: gcs.ServiceAccountName,
		}
	}
	return out
}
