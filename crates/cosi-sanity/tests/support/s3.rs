//! A tiny path-style S3 endpoint over the in-memory driver's state: PUT,
//! GET and DELETE of objects, authorised by the access key ID of the SigV4
//! `Authorization` header against the keys the driver granted. Enough for
//! the suite's data-plane cases to see real allowed and denied answers from
//! a real S3 client.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cosi_driver::proto::AccessMode;
use tokio::net::TcpListener;

use super::driver::State;

type Shared = Arc<Mutex<State>>;

fn error(status: StatusCode, code: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{code}</Message></Error>"
    );
    (status, [(header::CONTENT_TYPE, "application/xml")], body).into_response()
}

/// The access key ID of a SigV4 Authorization header.
fn access_key(headers: &HeaderMap) -> Option<String> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let credential = auth.split("Credential=").nth(1)?;
    Some(credential.split('/').next()?.to_owned())
}

async fn object(
    AxumState(state): AxumState<Shared>,
    method: Method,
    headers: HeaderMap,
    Path((bucket, key)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let mut state = state.lock().unwrap();
    let Some(mode) =
        access_key(&headers).and_then(|id| state.keys.get(&id).map(|k| k.modes.clone()))
    else {
        return error(StatusCode::FORBIDDEN, "InvalidAccessKeyId");
    };
    if !state.buckets.contains_key(&bucket) {
        return error(StatusCode::NOT_FOUND, "NoSuchBucket");
    }
    let mode = mode
        .get(&bucket)
        .copied()
        .unwrap_or(AccessMode::Unspecified);
    let allowed = match method {
        Method::GET => mode.can_read(),
        _ => mode.can_write(),
    };
    if !allowed {
        return error(StatusCode::FORBIDDEN, "AccessDenied");
    }
    let id = (bucket, key);
    match method {
        Method::PUT => {
            state.objects.insert(id, body.to_vec());
            (StatusCode::OK, [(header::ETAG, "\"sanity\"")]).into_response()
        }
        Method::GET => match state.objects.get(&id) {
            Some(data) => (StatusCode::OK, data.clone()).into_response(),
            None => error(StatusCode::NOT_FOUND, "NoSuchKey"),
        },
        Method::DELETE => {
            state.objects.remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
    }
}

/// Serves the endpoint on 127.0.0.1 (any port) until the test ends; returns its URL.
pub async fn start(state: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/{bucket}/{*key}", axum::routing::any(object))
        .with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}
