//! The pod's two binaries run as the manifests run them: `--check-config` on exactly the
//! environment a rendered container gets ([`resolved`]), and the path the images' health
//! check asks ([`path_asked_by`]); durations as the binaries print them.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::kubernetes::{Container, Object, PodSpec, one};
use crate::{proxy_binary, runtime_binary};

/// A pod name as a ReplicaSet makes them, for `fieldRef: metadata.name`.
const POD_NAME: &str = "daedalus-5f7c9d8b4-x2x9q";
/// What a secret holds, for `--check-config` (which reads secret files; it never sees a real one).
const PLACEHOLDER_SECRET: &str = "placeholder-secret-value";

/// The two binaries of the pod.
#[derive(Debug, Clone, Copy)]
pub enum Binary {
    Runtime,
    Proxy,
}

impl Binary {
    pub fn container(self) -> &'static str {
        match self {
            Self::Runtime => "runtime",
            Self::Proxy => "proxy",
        }
    }

    pub fn path(self) -> PathBuf {
        match self {
            Self::Runtime => runtime_binary(),
            Self::Proxy => proxy_binary(),
        }
    }
}

/// What `<binary> --check-config` resolves from the container's environment, as the pod gives
/// it: each volume a directory here (a ConfigMap's keys as files, a Secret's as placeholder
/// files), paths into the mounts moved to those directories, a Secret's key a placeholder, a
/// ConfigMap's key its rendered value, the pod's name a realistic one. A refusal fails the test.
///
/// # Panics
/// When the binary refuses the environment (the test's failure, with what it said).
pub fn resolved(binary: Binary, pod: &PodSpec, container: &Container, objects: &[Object]) -> Value {
    let sandbox = tempfile::tempdir().expect("a temporary directory");
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for mount in &container.volume_mounts {
        let dir = sandbox.path().join(&mount.name);
        std::fs::create_dir_all(&dir).expect("a mount directory");
        let volume = pod.volume(&mount.name);
        if let Some(source) = &volume.config_map {
            let map = one(objects, Object::config_map, &source.name);
            for (key, value) in &map.data {
                std::fs::write(dir.join(key), value).expect("a ConfigMap file");
            }
        }
        mounts.push((mount.mount_path.clone(), dir));
    }
    let secret_mounts: Vec<&str> = container
        .volume_mounts
        .iter()
        .filter(|m| pod.volume(&m.name).secret.is_some())
        .map(|m| m.mount_path.as_str())
        .collect();
    let mut command = Command::new(binary.path());
    command.env_clear().arg("--check-config");
    for var in &container.env {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => {
                let local = moved_into(value, &mounts);
                if secret_mounts.iter().any(|m| value.starts_with(m)) {
                    std::fs::write(&local, PLACEHOLDER_SECRET).expect("a secret file");
                }
                local
            }
            (None, Some(from)) => {
                if from.secret_key_ref.is_some() {
                    PLACEHOLDER_SECRET.to_owned()
                } else if let Some(key) = &from.config_map_key_ref {
                    let map = one(objects, Object::config_map, &key.name);
                    map.data
                        .get(&key.key)
                        .cloned()
                        .unwrap_or_else(|| panic!("ConfigMap {} has the key {}", key.name, key.key))
                } else if let Some(field) = &from.field_ref {
                    assert_eq!(field.field_path, "metadata.name", "a field this test knows");
                    POD_NAME.to_owned()
                } else {
                    panic!("{}: a source this test knows", var.name)
                }
            }
            (None, None) => String::new(),
        };
        command.env(&var.name, value);
    }
    let output = command.output().expect("the binary runs");
    assert!(
        output.status.success(),
        "{} refuses the environment the manifests give it: {}",
        binary.container(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--check-config prints JSON")
}

/// `value` with a mount's path moved to the directory standing for it.
fn moved_into(value: &str, mounts: &[(String, PathBuf)]) -> String {
    mounts
        .iter()
        .filter(|(at, _)| value == at || value.starts_with(&format!("{at}/")))
        .max_by_key(|(at, _)| at.len())
        .map_or_else(
            || value.to_owned(),
            |(at, dir)| format!("{}{}", dir.display(), &value[at.len()..]),
        )
}

/// The path `<binary> healthcheck` (the images' `HEALTHCHECK`) asks, read off a listener.
///
/// # Panics
/// When the health check asks nothing, or not with `GET`.
pub fn path_asked_by(binary: Binary) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener
        .local_addr()
        .expect("an address")
        .port()
        .to_string();
    let var = match binary {
        Binary::Runtime => "A2A_PORT",
        Binary::Proxy => "PROXY_PORT",
    };
    let mut child = Command::new(binary.path())
        .env_clear()
        .env(var, &port)
        .env("AGENT_NAME", "demo")
        .arg("healthcheck")
        .spawn()
        .expect("the health check runs");
    let (mut stream, _) = listener.accept().expect("the health check connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let mut request = Vec::new();
    let mut buffer = [0_u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer).expect("the request");
        assert!(n > 0, "the health check sends a request");
        request.extend_from_slice(&buffer[..n]);
    }
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .expect("an answer");
    assert!(child.wait().expect("it ends").success(), "healthy on a 200");
    let line = String::from_utf8_lossy(&request);
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("GET"));
    words.next().expect("a path").to_owned()
}

/// Seconds of a duration as the binaries print it (`30s`, `1m`, `1h 30m`).
///
/// # Panics
/// When `printed` is not such a duration.
pub fn duration(printed: &Value) -> u64 {
    parse_duration(printed.as_str().expect("a duration"))
}

/// Seconds of `30s`, `1m`, `1h 30m`.
///
/// # Panics
/// On another unit.
pub fn parse_duration(text: &str) -> u64 {
    text.split_whitespace()
        .map(|part| {
            let split = part
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(part.len());
            let (n, unit) = part.split_at(split);
            let n: u64 = n.parse().unwrap_or_else(|_| panic!("a duration: {text}"));
            match unit {
                "s" | "" => n,
                "m" => n * 60,
                "h" => n * 3600,
                _ => panic!("a unit this test knows: {text}"),
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn durations_read_as_the_binaries_print_them() {
        assert_eq!(parse_duration("30s"), 30);
        assert_eq!(parse_duration("1m"), 60);
        assert_eq!(parse_duration("1h 30m"), 5400);
        assert_eq!(
            moved_into(
                "/etc/daedalus/agents.yaml",
                &[("/etc/daedalus".into(), Path::new("/x").into())]
            ),
            "/x/agents.yaml"
        );
        assert_eq!(
            moved_into(
                "/etc/daedalusx",
                &[("/etc/daedalus".into(), Path::new("/x").into())]
            ),
            "/etc/daedalusx"
        );
    }
}
