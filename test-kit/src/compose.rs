//! `docker-compose.yml` and the Dockerfiles, read into typed services: what the compose stack
//! says the pod is (its containers' variables, ports, grace), for comparison with the
//! Kubernetes manifests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The repository's top-level directory.
pub fn repository_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `docker-compose.yml`, read.
///
/// # Panics
/// When it does not read as a compose file.
pub fn compose_file() -> ComposeFile {
    let text = std::fs::read_to_string(repository_dir().join("docker-compose.yml"))
        .expect("docker-compose.yml is readable");
    serde_saphyr::from_str(&text).expect("docker-compose.yml reads")
}

#[derive(Debug, Deserialize)]
pub struct ComposeFile {
    pub services: BTreeMap<String, ComposeService>,
}

impl ComposeFile {
    /// The service named `name`.
    ///
    /// # Panics
    /// When there is none.
    pub fn service(&self, name: &str) -> &ComposeService {
        self.services
            .get(name)
            .unwrap_or_else(|| panic!("docker-compose.yml has a service {name}"))
    }
}

#[derive(Debug, Deserialize)]
pub struct ComposeService {
    pub image: Option<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub ports: Vec<String>,
    pub stop_grace_period: Option<String>,
    pub network_mode: Option<String>,
}

impl ComposeService {
    /// The variables it sets to a fixed value: a `${VAR:-default}` is the host's to choose,
    /// so it is left out.
    pub fn fixed_environment(&self) -> BTreeMap<&str, &str> {
        self.environment
            .iter()
            .filter(|(_, value)| !value.contains("${"))
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect()
    }
}

/// What a Dockerfile's final stage says about the container it makes.
#[derive(Debug, Default)]
pub struct Image {
    /// `ENV` names and values.
    pub environment: BTreeMap<String, String>,
    /// `USER`.
    pub user: Option<String>,
    /// `EXPOSE`.
    pub exposed: Vec<u16>,
    /// `HEALTHCHECK ... CMD [...]`, the command's words.
    pub healthcheck: Vec<String>,
}

/// Reads `file` (`Dockerfile.runtime`, `Dockerfile.proxy`): the lines of its last stage.
///
/// # Panics
/// When the file is unreadable.
pub fn image(file: &str) -> Image {
    let text = std::fs::read_to_string(repository_dir().join(file))
        .unwrap_or_else(|e| panic!("{file} is readable: {e}"));
    let joined = text.replace("\\\n", " ");
    let last_stage = joined.rsplit("\nFROM ").next().unwrap_or_default();
    let mut image = Image::default();
    for line in last_stage.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("ENV ") {
            for pair in rest.split_whitespace() {
                if let Some((name, value)) = pair.split_once('=') {
                    image.environment.insert(name.to_owned(), value.to_owned());
                }
            }
        } else if let Some(rest) = line.strip_prefix("USER ") {
            image.user = Some(rest.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("EXPOSE ") {
            image.exposed.extend(
                rest.split_whitespace()
                    .filter_map(|p| p.parse::<u16>().ok()),
            );
        } else if line.starts_with("HEALTHCHECK ") {
            let command = line.split_once(" CMD ").map_or("", |(_, c)| c);
            image.healthcheck = serde_json::from_str(command).unwrap_or_default();
        }
    }
    image
}
