//! `cosi`: run COSI on this machine, or print its CRDs.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

// The API server, the components and the driver all allocate and free a
// great many small JSON values; mimalloc serves those faster than the
// system allocator. Built without transparent huge pages, which would
// make resident memory grow in 2 MiB steps.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// cosi-rs: Kubernetes Container Object Storage Interface v1alpha2.
#[derive(Parser)]
#[command(name = "cosi", version = env!("COSI_VERSION"), about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole system on this machine once: create a bucket and two
    /// accesses, use them through S3, delete everything, check each step.
    Quickstart(cosi_cli::quickstart::Args),
    /// Run the whole system on this machine until Ctrl-C, for kubectl.
    Dev(cosi_cli::dev::Args),
    /// Measure provisioning throughput, latency, API writes, resync cost and memory.
    Bench(cosi_cli::bench::Args),
    /// Measure cosi-rs and upstream COSI's Go controller and sidecar side by
    /// side on a real kube-apiserver, under injected API and driver latency.
    BenchUpstream(cosi_cli::bench::side_by_side::Args),
    /// Bring Rook ObjectBucketClaims, COSI v1alpha1 objects or an upstream
    /// v1alpha2 install over to cosi-rs: plan, apply, finish.
    Migrate(cosi_cli::migrate::Args),
    /// Run one component in this process (the benchmark starts these).
    #[command(name = "__run", hide = true)]
    Run(cosi_cli::bench::child::Args),
    /// Print the five CRDs as YAML, or write them to a directory.
    Crds {
        /// Write one file per CRD into this directory instead of printing.
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    let done = match cli.command {
        Command::Migrate(args) => return runtime()?.block_on(cosi_cli::migrate::run(args)),
        Command::Crds { write } => crds(write),
        Command::Quickstart(args) => runtime()?.block_on(cosi_cli::quickstart::run(args)),
        Command::Dev(args) => runtime()?.block_on(cosi_cli::dev::run(args)),
        Command::Bench(args) => runtime()?.block_on(cosi_cli::bench::run(args)),
        Command::BenchUpstream(args) => {
            runtime()?.block_on(cosi_cli::bench::side_by_side::run(args))
        }
        Command::Run(args) => runtime()?.block_on(cosi_cli::bench::child::run(args)),
    };
    done.map(|()| std::process::ExitCode::SUCCESS)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn crds(write: Option<PathBuf>) -> anyhow::Result<()> {
    match write {
        None => print!("{}", cosi_api::crd::all_yaml()?),
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
            for (file, crd) in cosi_api::crd::all() {
                let path = dir.join(file);
                std::fs::write(&path, cosi_api::crd::to_yaml(&crd)?)
                    .with_context(|| format!("write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}
