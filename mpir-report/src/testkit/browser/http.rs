//! Minimal HTTP/1.1 client to chromedriver: one request per connection, JSON bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest HTTP response body accepted (a full-page screenshot of a big report is a few MB).
const MAX_BODY: usize = 256 << 20;

/// Send one request to `127.0.0.1:port` and parse the JSON response (`Null` when empty).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<(u16, Value), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if body.is_some() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
            payload.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(&payload);
    stream
        .write_all(req.as_bytes())
        .map_err(|e| format!("sending request: {e}"))?;
    stream
        .flush()
        .map_err(|e| format!("sending request: {e}"))?;

    let mut r = BufReader::new(stream);
    let mut line = String::new();
    read_line(&mut r, &mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))?;
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    loop {
        read_line(&mut r, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                content_length = Some(v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?);
            } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
    }
    let mut data = Vec::new();
    if chunked {
        loop {
            read_line(&mut r, &mut line)?;
            let hex = line.trim().split(';').next().unwrap_or("");
            let n =
                usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
            if n == 0 {
                break; // trailers, if any, are ignored (the connection is closed anyway)
            }
            if data.len() + n > MAX_BODY {
                return Err("response too large".into());
            }
            let start = data.len();
            data.resize(start + n, 0);
            r.read_exact(&mut data[start..])
                .map_err(|e| format!("reading chunk: {e}"))?;
            read_line(&mut r, &mut line)?; // CRLF after the chunk
        }
    } else if let Some(n) = content_length {
        if n > MAX_BODY {
            return Err(format!("response too large ({n} bytes)"));
        }
        data.resize(n, 0);
        r.read_exact(&mut data)
            .map_err(|e| format!("reading body ({n} bytes): {e}"))?;
    } else {
        r.take(MAX_BODY as u64)
            .read_to_end(&mut data)
            .map_err(|e| format!("reading body: {e}"))?;
    }
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok((status, Value::Null));
    }
    let v = serde_json::from_slice(&data).map_err(|e| {
        format!(
            "HTTP {status}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&data[..data.len().min(300)])
        )
    })?;
    Ok((status, v))
}

fn read_line(r: &mut BufReader<TcpStream>, line: &mut String) -> Result<(), String> {
    line.clear();
    let n = r
        .by_ref()
        .take(64 * 1024)
        .read_line(line)
        .map_err(|e| format!("reading response: {e}"))?;
    if n == 0 {
        return Err("connection closed before the response was complete".into());
    }
    Ok(())
}
