//! `/healthz/driver`: the liveness probe of the driver container, served by
//! the sidecar in the same Pod (as CSI's livenessprobe serves a CSI
//! driver's). Drivers that listen only on their UNIX socket have no HTTP
//! endpoint of their own, so without it a hung driver is never restarted.
//!
//! Each request makes one DriverGetInfo call on the socket, with a
//! deadline. The driver is alive when it answers: OK, or UNIMPLEMENTED (the
//! process serves gRPC, only not that API; restarting it would not help).
//! Anything else (no socket, no answer within the deadline, a transport
//! error) fails the request with 503 and the reason; the kubelet restarts
//! the driver container after the probe's `failureThreshold` failures in a
//! row. Every replica serves it, leader or standby.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use cosi_driver::DriverClient;
use tonic::Code;

use crate::DriverApi;

/// Where the probe is served, on the sidecar's health address.
pub const PATH: &str = "/healthz/driver";

/// The router serving [`PATH`] for the driver behind `client`, each call
/// given `timeout`.
pub fn router(client: DriverClient, timeout: Duration) -> Router {
    Router::new()
        .route(
            PATH,
            get(
                |State((client, timeout)): State<(DriverClient, Duration)>| async move {
                    match check(&client, timeout).await {
                        Ok(()) => (StatusCode::OK, "ok".to_owned()),
                        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
                    }
                },
            ),
        )
        .with_state((client, timeout))
}

/// One DriverGetInfo call within `timeout`, judged by [`verdict`].
async fn check(client: &DriverClient, timeout: Duration) -> Result<(), String> {
    let path = DriverApi::V1alpha2.get_info_path();
    let answer = tokio::time::timeout(timeout, client.call_empty(path))
        .await
        .map_err(|_| None)
        .and_then(|r| r.map_err(Some));
    verdict(answer, timeout).map_err(|why| format!("driver at {} {why}", client.endpoint()))
}

/// Whether a driver that gave `answer` (`Err(None)`: none within `timeout`)
/// is alive; if not, why.
pub fn verdict(answer: Result<(), Option<tonic::Status>>, timeout: Duration) -> Result<(), String> {
    match answer {
        Ok(()) => Ok(()),
        Err(Some(status)) if status.code() == Code::Unimplemented => Ok(()),
        Err(Some(status)) => Err(format!(
            "failed DriverGetInfo: {:?}: {}",
            status.code(),
            status.message()
        )),
        Err(None) => Err(format!(
            "did not answer DriverGetInfo within {}s",
            timeout.as_secs_f64()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Status;

    const T: Duration = Duration::from_secs(3);

    #[test]
    fn a_driver_is_alive_when_it_answers_even_on_another_api() {
        assert!(verdict(Ok(()), T).is_ok());
        assert!(verdict(Err(Some(Status::unimplemented("no such service"))), T).is_ok());
    }

    #[test]
    fn a_driver_that_hangs_or_fails_is_not_alive_and_the_reason_says_which() {
        let hung = verdict(Err(None), T).unwrap_err();
        assert_eq!(hung, "did not answer DriverGetInfo within 3s");
        let down = verdict(Err(Some(Status::unavailable("connection refused"))), T).unwrap_err();
        assert!(down.contains("Unavailable: connection refused"), "{down}");
    }

    #[tokio::test]
    async fn the_probe_fails_with_503_while_nothing_serves_the_socket() {
        use tower::ServiceExt as _;
        let dir = tempfile::tempdir().unwrap();
        let endpoint = cosi_driver::Endpoint::from_path(dir.path().join("none.sock")).unwrap();
        let request = axum::http::Request::get(PATH)
            .body(axum::body::Body::empty())
            .unwrap();
        let reply = router(DriverClient::connect_lazy(&endpoint), T)
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(reply.status(), 503);
        let body = axum::body::to_bytes(reply.into_body(), 4096).await.unwrap();
        let body = String::from_utf8_lossy(&body);
        assert!(
            body.contains("none.sock") && body.contains("DriverGetInfo"),
            "{body}"
        );
    }
}
