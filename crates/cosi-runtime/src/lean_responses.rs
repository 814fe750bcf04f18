//! A client layer that takes `managedFields` out of every JSON response
//! (watch streams included) before kube parses it: see
//! [`managed_fields`](crate::managed_fields) for why and how.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http_body::{Body, Frame, SizeHint};
use tower::{Layer, Service};

use crate::managed_fields::Lines;

/// Wraps a client's service so JSON response bodies arrive without
/// `managedFields`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LeanResponsesLayer;

impl<S> Layer<S> for LeanResponsesLayer {
    type Service = LeanResponses<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LeanResponses { inner }
    }
}

/// The service [`LeanResponsesLayer`] wraps around a client's.
#[derive(Clone, Debug)]
pub struct LeanResponses<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Req, B> Service<Req> for LeanResponses<S>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<LeanBody<B>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let sent = self.inner.call(req);
        Box::pin(async move {
            let response = sent.await?;
            let json = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            Ok(response.map(|body| LeanBody::new(body, json)))
        })
    }
}

/// A response body; stripped line by line when it is JSON, else passed on
/// as it is.
#[derive(Debug)]
pub struct LeanBody<B> {
    inner: Pin<Box<B>>,
    /// Set for JSON bodies only.
    lines: Option<Lines>,
    /// A frame held back until the held lines are out.
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl<B> LeanBody<B> {
    fn new(inner: B, json: bool) -> Self {
        Self {
            inner: Box::pin(inner),
            lines: json.then(Lines::default),
            trailers: None,
            ended: false,
        }
    }
}

impl<B> Body for LeanBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let Some(lines) = &mut this.lines else {
            return this.inner.as_mut().poll_frame(cx);
        };
        loop {
            if this.ended {
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            let out = match ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) => lines.push(chunk),
                    // Trailers end a body: the held line goes first.
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        this.ended = true;
                        lines.finish()
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.ended = true;
                    lines.finish()
                }
            };
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self.lines {
            None => self.inner.is_end_stream(),
            Some(_) => self.ended && self.trailers.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.lines {
            None => self.inner.size_hint(),
            // Known only once it has been stripped.
            Some(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use std::convert::Infallible;
    use tower::{ServiceExt, service_fn};

    /// What a service answering `frames` with `content_type` yields
    /// through the layer: the data frames, then the trailers' names.
    async fn through_layer(
        content_type: &'static str,
        frames: Vec<Frame<Bytes>>,
    ) -> (Vec<Bytes>, Vec<String>) {
        let mut frames = Some(frames);
        let service = LeanResponsesLayer.layer(service_fn(move |_req: ()| {
            let frames = frames.take().unwrap_or_default();
            let body = StreamBody::new(futures::stream::iter(
                frames.into_iter().map(Ok::<_, Infallible>),
            ));
            let response = http::Response::builder()
                .header(CONTENT_TYPE, content_type)
                .body(body)
                .unwrap();
            async move { Ok::<_, Infallible>(response) }
        }));
        let mut body = service.oneshot(()).await.unwrap().into_body();
        let (mut data, mut trailers) = (Vec::new(), Vec::new());
        while let Some(frame) = body.frame().await {
            match frame.unwrap().into_data() {
                Ok(chunk) => data.push(chunk),
                Err(frame) => {
                    let map = frame.into_trailers().unwrap();
                    trailers.extend(map.keys().map(|k| k.to_string()));
                }
            }
        }
        (data, trailers)
    }

    fn data(text: &'static str) -> Frame<Bytes> {
        Frame::data(Bytes::from_static(text.as_bytes()))
    }

    #[tokio::test]
    async fn json_bodies_are_stripped_and_others_pass_as_they_are() {
        let event = r#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[]}}}"#;
        let stripped = r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#;
        let (head, tail) = event.split_at(30);
        let frames = || vec![data(head), data(tail), data("\n")];
        let (json, _) = through_layer("application/json;stream=watch", frames()).await;
        assert_eq!(json, [format!("{stripped}\n")]);
        let (yaml, _) = through_layer("application/yaml", frames()).await;
        assert_eq!(yaml, [head, tail, "\n"]);
    }

    #[tokio::test]
    async fn a_held_line_goes_out_before_the_trailers() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-done", http::HeaderValue::from_static("1"));
        let frames = vec![
            data(r#"{"metadata":{"managedFields":[]}}"#),
            Frame::trailers(trailers),
        ];
        let (data, trailers) = through_layer("application/json", frames).await;
        assert_eq!(data, [r#"{"metadata":{}}"#]);
        assert_eq!(trailers, ["x-done"]);
    }
}
