//! The HTTP side of the debuginfod client, through ureq (rustls on ring).

use std::io::{Read, Write};
use std::time::Instant;

use super::{DebuginfodClient, FetchFailure, MAX_REDIRECTS};

pub(super) fn download(
    client: &DebuginfodClient,
    url: &str,
    mut file: std::fs::File,
) -> Result<(), FetchFailure> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(FetchFailure::UnsupportedUrl);
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(MAX_REDIRECTS)
        .max_redirects_will_error(true)
        .timeout_connect(Some(client.timeout))
        .timeout_recv_response(Some(client.timeout))
        .timeout_per_read(Some(client.timeout))
        .timeout_global(Some(client.max_time))
        .user_agent(concat!(
            "mpir-rs/",
            env!("CARGO_PKG_VERSION"),
            " debuginfod"
        ))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(root_certs())
                .build(),
        )
        .build()
        .into();
    let started = Instant::now();
    tracing::info!(%url, "debuginfod: fetching");
    let response = agent.get(url).call().map_err(|e| failure(client, e))?;
    match response.status().as_u16() {
        200 => {}
        404 => return Err(FetchFailure::NotFound),
        s => return Err(FetchFailure::Status(s)),
    }
    let claimed = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let limit = client.max_size;
    if claimed.is_some_and(|c| c > limit) {
        return Err(FetchFailure::TooLarge { limit, claimed });
    }
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    let mut next_report: u64 = 16 << 20;
    loop {
        let n = reader.read(&mut buf).map_err(|e| read_failure(client, e))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > limit {
            return Err(FetchFailure::TooLarge { limit, claimed });
        }
        file.write_all(&buf[..n])
            .map_err(|e| FetchFailure::Unreachable(format!("writing the cache: {e}")))?;
        if total >= next_report {
            tracing::info!(%url, bytes = total, "debuginfod: downloading");
            next_report += 16 << 20;
        }
    }
    file.sync_all()
        .map_err(|e| FetchFailure::Unreachable(format!("writing the cache: {e}")))?;
    tracing::info!(%url, bytes = total, elapsed = ?started.elapsed(), "debuginfod: fetched");
    Ok(())
}

/// The system's certificate authorities, as curl (and so elfutils) trusts them: the file
/// `SSL_CERT_FILE` names, else the distribution's bundle; Mozilla's roots (webpki-roots)
/// when there is none. Read once per process.
fn root_certs() -> ureq::tls::RootCerts {
    static ROOTS: std::sync::OnceLock<ureq::tls::RootCerts> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let named = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
            let bundles = named.into_iter().chain(
                [
                    "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Arch
                    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
                    "/etc/ssl/ca-bundle.pem",             // openSUSE
                    "/etc/ssl/cert.pem",                  // Alpine
                ]
                .into_iter()
                .map(std::path::PathBuf::from),
            );
            for bundle in bundles {
                let Ok(file) = crate::files::open_regular(&bundle) else {
                    continue;
                };
                let mut pem = Vec::new();
                // A bundle is a few hundred KiB; a bound in case the path names a huge file.
                if file.take(16 << 20).read_to_end(&mut pem).is_err() {
                    continue;
                }
                let certs: Vec<_> = ureq::tls::parse_pem(&pem)
                    .filter_map(|item| match item {
                        Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.to_owned()),
                        _ => None,
                    })
                    .collect();
                if !certs.is_empty() {
                    return ureq::tls::RootCerts::new_with_certs(&certs);
                }
            }
            ureq::tls::RootCerts::WebPki
        })
        .clone()
}

fn failure(client: &DebuginfodClient, e: ureq::Error) -> FetchFailure {
    match e {
        ureq::Error::Timeout(t) => FetchFailure::Timeout {
            what: t.to_string(),
            after: match t {
                ureq::Timeout::Global => client.max_time,
                _ => client.timeout,
            },
        },
        ureq::Error::TooManyRedirects => FetchFailure::TooManyRedirects(MAX_REDIRECTS),
        ureq::Error::BodyExceedsLimit(n) => FetchFailure::TooLarge {
            limit: n,
            claimed: None,
        },
        ureq::Error::Io(e) => FetchFailure::Unreachable(e.to_string()),
        e @ (ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Tls(_)
        | ureq::Error::Rustls(_)) => FetchFailure::Unreachable(e.to_string()),
        e @ ureq::Error::BadUri(_) => FetchFailure::Garbage(e.to_string()),
        e => FetchFailure::Garbage(e.to_string()),
    }
}

/// An error while reading the body: ureq wraps its own errors (timeouts) in `io::Error`.
fn read_failure(client: &DebuginfodClient, e: std::io::Error) -> FetchFailure {
    let message = e.to_string();
    match e.into_inner().map(|inner| inner.downcast::<ureq::Error>()) {
        Some(Ok(u)) => failure(client, *u),
        _ => FetchFailure::Unreachable(message),
    }
}
