//! Connecting to a driver's UNIX socket. The channel reconnects by itself
//! when the driver restarts, so one client lives as long as its user.

use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Uri};

use crate::endpoint::Endpoint;
use crate::proto::identity_client::IdentityClient;
use crate::proto::provisioner_client::ProvisionerClient;
use crate::proto::{DriverGetInfoRequest, DriverGetInfoResponse};
use crate::upstream;
use crate::v1alpha1;

/// A client of both driver services, of every driver API, over one channel.
#[derive(Clone, Debug)]
pub struct DriverClient {
    /// The Identity service.
    pub identity: IdentityClient<Channel>,
    /// The Provisioner service.
    pub provisioner: ProvisionerClient<Channel>,
    /// The services of the v1alpha1 driver API.
    pub v1alpha1: V1alpha1Client,
    /// The services of upstream's v1alpha2 driver API.
    pub upstream: UpstreamClient,
    channel: Channel,
    endpoint: Endpoint,
}

/// The two services of the v1alpha1 driver API.
#[derive(Clone, Debug)]
pub struct V1alpha1Client {
    /// `cosi.v1alpha1.Identity`.
    pub identity: v1alpha1::identity_client::IdentityClient<Channel>,
    /// `cosi.v1alpha1.Provisioner`.
    pub provisioner: v1alpha1::provisioner_client::ProvisionerClient<Channel>,
}

/// The two services of upstream's v1alpha2 driver API
/// (`sigs.k8s.io.cosi.v1alpha2`).
#[derive(Clone, Debug)]
pub struct UpstreamClient {
    /// `sigs.k8s.io.cosi.v1alpha2.Identity`.
    pub identity: upstream::identity_client::IdentityClient<Channel>,
    /// `sigs.k8s.io.cosi.v1alpha2.Provisioner`.
    pub provisioner: upstream::provisioner_client::ProvisionerClient<Channel>,
}

impl DriverClient {
    /// Connects now, failing if the socket does not answer.
    pub async fn connect(endpoint: &Endpoint) -> Result<Self, tonic::transport::Error> {
        let channel = Self::builder()
            .connect_with_connector(connector(endpoint))
            .await?;
        Ok(Self::from_channel(endpoint, channel))
    }

    /// A client that connects on first use (and reconnects after failures).
    pub fn connect_lazy(endpoint: &Endpoint) -> Self {
        let channel = Self::builder().connect_with_connector_lazy(connector(endpoint));
        Self::from_channel(endpoint, channel)
    }

    /// The channel to the driver, for clients of other services or codecs.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Calls DriverGetInfo.
    pub async fn get_info(&self) -> Result<DriverGetInfoResponse, tonic::Status> {
        let mut identity = self.identity.clone();
        Ok(identity
            .driver_get_info(DriverGetInfoRequest {})
            .await?
            .into_inner())
    }

    /// Calls the RPC at `path` (e.g. `/some.package.Identity/DriverGetInfo`)
    /// with an empty request and ignores what the reply holds: OK or an
    /// error status says whether the driver serves that RPC, whatever its
    /// package. For DriverGetInfo, whose request is empty in every version.
    pub async fn call_empty(&self, path: &'static str) -> Result<(), tonic::Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("driver not reachable: {e}")))?;
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        grpc.unary(
            tonic::Request::new(()),
            http::uri::PathAndQuery::from_static(path),
            codec,
        )
        .await
        .map(|_| ())
    }

    /// Sends `body` as the request of the RPC at `path`, unchecked, and
    /// ignores what the reply holds: how a driver answers a request that
    /// does not decode (conformance tests send such bytes on purpose).
    pub async fn call_raw(&self, path: &'static str, body: Vec<u8>) -> Result<(), tonic::Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("driver not reachable: {e}")))?;
        grpc.unary(
            tonic::Request::new(body),
            http::uri::PathAndQuery::from_static(path),
            RawCodec,
        )
        .await
        .map(|_| ())
    }

    fn builder() -> tonic::transport::Endpoint {
        // The authority is unused over a UNIX socket; gRPC needs one anyway.
        tonic::transport::Endpoint::from_static("http://cosi-driver.invalid")
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
    }

    fn from_channel(endpoint: &Endpoint, channel: Channel) -> Self {
        Self {
            identity: IdentityClient::new(channel.clone()),
            provisioner: ProvisionerClient::new(channel.clone()),
            v1alpha1: V1alpha1Client {
                identity: v1alpha1::identity_client::IdentityClient::new(channel.clone()),
                provisioner: v1alpha1::provisioner_client::ProvisionerClient::new(channel.clone()),
            },
            upstream: UpstreamClient {
                identity: upstream::identity_client::IdentityClient::new(channel.clone()),
                provisioner: upstream::provisioner_client::ProvisionerClient::new(channel.clone()),
            },
            channel,
            endpoint: endpoint.clone(),
        }
    }
}

fn connector(
    endpoint: &Endpoint,
) -> impl tower::Service<
    Uri,
    Response = TokioIo<UnixStream>,
    Error = std::io::Error,
    Future = impl Future<Output = std::io::Result<TokioIo<UnixStream>>> + Send,
> + Clone
+ Send
+ 'static {
    let path = endpoint.path().to_owned();
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok(TokioIo::new(UnixStream::connect(path).await?)) }
    })
}

/// Sends bytes as they are; decodes any reply as the empty message.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ();
    type Encoder = RawCodec;
    type Decoder = tonic_prost::ProstDecoder<()>;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        buf: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut as _;
        buf.put_slice(&item);
        Ok(())
    }
}
