//! `cardhour` binary: parses the command line and hands over to the library.

// The ingest allocates many small strings and sample vectors per hour; mimalloc spends a fraction of glibc's time on
// them (BENCHMARKS.md). Built without transparent huge pages (Cargo.toml says why).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CARDHOUR_LOG").unwrap_or_else(|_| "cardhour=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        // colours only for a person at a terminal, not in log files and journals
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = cardhour::cli::Cli::parse_args();
    match cardhour::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
