//! The container `HEALTHCHECK` both binaries offer as a subcommand (`daedalus-runtime
//! healthcheck`, `daedalus-proxy healthcheck`), so images need no curl: one `GET` over plain
//! HTTP/1.1 to the process's own health endpoint, healthy when it answers 200.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// How long the whole probe may take, per step (connect, write, read).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the process is not healthy.
#[derive(Debug, thiserror::Error)]
pub enum HealthcheckError {
    #[error("{addr}: cannot connect: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{addr}: the exchange failed: {source}")]
    Exchange {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{addr}{path}: answered {status}")]
    Status {
        addr: SocketAddr,
        path: String,
        status: u16,
    },
    #[error("{addr}: not an HTTP answer")]
    NotHttp { addr: SocketAddr },
}

/// Where a server bound to `ip:port` is reached from inside its own container: loopback when
/// it listens on every address.
pub fn local_address(ip: IpAddr, port: u16) -> SocketAddr {
    let ip = if ip.is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        ip
    };
    SocketAddr::new(ip, port)
}

/// `GET path` at `addr`: `Ok` when it answers 200 within [`PROBE_TIMEOUT`] per step.
pub fn probe(addr: SocketAddr, path: &str) -> Result<(), HealthcheckError> {
    let exchange = |source| HealthcheckError::Exchange { addr, source };
    let mut stream = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)
        .map_err(|source| HealthcheckError::Connect { addr, source })?;
    stream
        .set_read_timeout(Some(PROBE_TIMEOUT))
        .map_err(exchange)?;
    stream
        .set_write_timeout(Some(PROBE_TIMEOUT))
        .map_err(exchange)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(exchange)?;
    // The status line is all that matters: "HTTP/1.1 200 OK".
    let mut head = [0u8; 32];
    let mut read = 0;
    while read < 12 {
        let n = stream.read(&mut head[read..]).map_err(exchange)?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let status = std::str::from_utf8(&head[..read])
        .ok()
        .filter(|line| line.starts_with("HTTP/1."))
        .and_then(|line| line.get(9..12))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or(HealthcheckError::NotHttp { addr })?;
    if status == 200 {
        Ok(())
    } else {
        Err(HealthcheckError::Status {
            addr,
            path: path.to_owned(),
            status,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot server answering `answer` to the first request.
    fn serve_once(answer: &'static str) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(answer.as_bytes());
        });
        addr
    }

    #[test]
    fn a_200_is_healthy() {
        let addr = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        probe(addr, "/health").unwrap();
    }

    #[test]
    fn a_503_is_not_and_says_so() {
        let addr = serve_once("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        let e = probe(addr, "/health").unwrap_err();
        assert!(
            matches!(e, HealthcheckError::Status { status: 503, .. }),
            "{e}"
        );
    }

    #[test]
    fn nothing_listening_is_a_connect_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        assert!(matches!(
            probe(addr, "/health"),
            Err(HealthcheckError::Connect { .. })
        ));
    }

    #[test]
    fn garbage_is_not_http() {
        let addr = serve_once("SSH-2.0-OpenSSH\r\n");
        assert!(matches!(
            probe(addr, "/health"),
            Err(HealthcheckError::NotHttp { .. })
        ));
    }

    #[test]
    fn every_address_means_loopback_inside_the_container() {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        assert_eq!(local_address(any, 8080), "127.0.0.1:8080".parse().unwrap());
        let own = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(local_address(own, 9090), "10.0.0.5:9090".parse().unwrap());
    }
}
