//! Every log line the sidecar (and the libraries it uses) writes during the
//! suite, captured to memory so a test can check that none holds a credential.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// Set to a file path to also keep the captured lines there (debugging).
const COPY_ENV: &str = "SIDECAR_TEST_LOG_FILE";

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        if let Some(path) = std::env::var_os(COPY_ENV) {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path);
            if let Ok(mut f) = file {
                let _ = f.write_all(buf);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (once per test binary).
pub fn init() {
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let filter = tracing_subscriber::EnvFilter::new(
            "info,cosi_sidecar=trace,cosi_runtime=trace,cosi_driver=debug,kube=debug,kube_runtime=debug,kube_client=debug,tonic=debug,kube_lease_manager=debug,kube_sim=off",
        );
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        buf
    });
}

/// Everything captured so far.
pub fn captured() -> String {
    let buf = LOGS.get().expect("logs::init was called");
    String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}
