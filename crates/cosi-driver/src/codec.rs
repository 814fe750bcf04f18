//! The gRPC codec of both driver APIs: prost's, except for who is blamed
//! when a message does not decode. prost answers `INTERNAL` either way; a
//! request that does not decode is the caller's fault, and the driver
//! specification wants invalid requests answered `INVALID_ARGUMENT`
//! (which the sidecar does not retry). A reply that does not decode stays
//! `INTERNAL`: that is the driver's fault, not the request's.

use std::marker::PhantomData;

use prost::{Message, Name};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// The codec the generated clients and servers use.
#[derive(Debug, Clone)]
pub struct CosiCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for CosiCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for CosiCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Name + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = CosiDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        CosiDecoder(ProstDecoder::new(BufferSettings::default()))
    }
}

/// prost's decoder, with decode failures of requests as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct CosiDecoder<U>(ProstDecoder<U>);

impl<U: Message + Name + Default> Decoder for CosiDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| {
            if is_request(U::NAME) {
                Status::invalid_argument(format!(
                    "the request is not a valid {}: {}",
                    U::full_name(),
                    status.message()
                ))
            } else {
                status
            }
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// True for the name of an RPC's request message (every request of both
/// driver APIs is named `<Rpc>Request`, every reply `<Rpc>Response`).
fn is_request(message_name: &str) -> bool {
    message_name.ends_with("Request")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_are_told_apart_by_name() {
        assert!(is_request("DriverCreateBucketRequest"));
        assert!(!is_request("DriverCreateBucketResponse"));
        assert!(!is_request("BucketInfo"));
    }
}
