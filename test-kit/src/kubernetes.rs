//! The Kubernetes manifests under `deploy/kubernetes/`, rendered as an operator renders them
//! (`kubectl kustomize`) and read into typed objects: only the fields the tests check, the
//! rest ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// `deploy/kubernetes/` of this checkout.
pub fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("deploy")
        .join("kubernetes")
}

/// The overlays an operator applies, by folder name (`single`, `replicas`, ...).
///
/// # Panics
/// When the folder is unreadable.
pub fn overlays() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(manifests_dir().join("overlays"))
        .expect("deploy/kubernetes/overlays is readable")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// The kubectl `.ci/setup` installs (pinned, in `.venv-k8s`), never the machine's own, whose
/// kustomize may be too old to render components.
fn kubectl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-k8s/bin/kubectl")
}

/// `kubectl kustomize deploy/kubernetes/<kustomization>` (`overlays/single`, `example`), read
/// into objects.
///
/// # Panics
/// When `kubectl` is missing or the overlay does not render (the test's failure, with
/// kubectl's message).
pub fn render(kustomization: &str) -> Vec<Object> {
    let dir = manifests_dir().join(kustomization);
    let output = Command::new(kubectl())
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl runs (.ci/setup installs it into .venv-k8s)");
    assert!(
        output.status.success(),
        "{kustomization} does not render: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("kubectl writes UTF-8");
    serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{kustomization} renders objects we cannot read: {e}"))
}

/// One rendered object, by kind.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind")]
pub enum Object {
    Deployment(Workload),
    StatefulSet(Workload),
    Service(Service),
    ConfigMap(ConfigMap),
    PodDisruptionBudget(Selecting),
    NetworkPolicy(NetworkPolicy),
    ScaledObject(ScaledObject),
    PersistentVolumeClaim(Named),
    Namespace(Named),
    ServiceAccount(Named),
    /// The Prometheus Operator's (`components/monitoring`; test-kit/tests/monitoring.rs reads
    /// their specs).
    PodMonitor(Named),
    PrometheusRule(Named),
    #[serde(other)]
    Other,
}

/// The one object of the kind `pick` takes that is named `name`.
///
/// # Panics
/// When there is none, or more than one.
pub fn one<'a, T>(
    objects: &'a [Object],
    pick: impl Fn(&'a Object) -> Option<&'a T>,
    name: &str,
) -> &'a T {
    let found: Vec<&T> = objects
        .iter()
        .filter(|o| o.metadata().is_some_and(|m| m.name == name))
        .filter_map(pick)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "exactly one object named {name} of that kind"
    );
    found[0]
}

#[derive(Debug, Deserialize)]
pub struct Metadata {
    pub name: String,
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub struct Named {
    pub metadata: Metadata,
}

/// A Deployment or a StatefulSet.
#[derive(Debug, Deserialize)]
pub struct Workload {
    pub metadata: Metadata,
    pub spec: WorkloadSpec,
}

#[derive(Debug, Deserialize)]
pub struct WorkloadSpec {
    pub replicas: Option<u32>,
    pub strategy: Option<Strategy>,
    pub selector: LabelSelector,
    pub template: PodTemplate,
    /// A StatefulSet's volumes of its own.
    #[serde(rename = "volumeClaimTemplates", default)]
    pub volume_claim_templates: Vec<Named>,
}

#[derive(Debug, Deserialize)]
pub struct Strategy {
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct LabelSelector {
    #[serde(rename = "matchLabels", default)]
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub struct PodTemplate {
    pub metadata: TemplateMetadata,
    pub spec: PodSpec,
}

/// A pod template's metadata (no name).
#[derive(Debug, Deserialize)]
pub struct TemplateMetadata {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub termination_grace_period_seconds: Option<u64>,
    pub automount_service_account_token: Option<bool>,
    pub enable_service_links: Option<bool>,
    pub security_context: Option<SecurityContext>,
    #[serde(default)]
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    #[serde(default)]
    pub volumes: Vec<Volume>,
    #[serde(default)]
    pub topology_spread_constraints: Vec<TopologySpread>,
}

impl PodSpec {
    /// The container (or init container) named `name`.
    ///
    /// # Panics
    /// When the pod has none of that name.
    pub fn container(&self, name: &str) -> &Container {
        self.init_containers
            .iter()
            .chain(&self.containers)
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("the pod has a container named {name}"))
    }

    /// The volume named `name`.
    ///
    /// # Panics
    /// When the pod has none of that name.
    pub fn volume(&self, name: &str) -> &Volume {
        self.volumes
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("the pod has a volume named {name}"))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpread {
    pub topology_key: String,
    pub label_selector: LabelSelector,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    pub image: String,
    pub restart_policy: Option<String>,
    #[serde(default)]
    pub env: Vec<EnvVar>,
    #[serde(default)]
    pub ports: Vec<ContainerPort>,
    pub startup_probe: Option<Probe>,
    pub readiness_probe: Option<Probe>,
    pub liveness_probe: Option<Probe>,
    pub security_context: Option<SecurityContext>,
    pub resources: Option<Resources>,
    #[serde(default)]
    pub volume_mounts: Vec<VolumeMount>,
}

impl Container {
    /// The literal value of the variable `name`, if the container sets one.
    pub fn literal(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.value.as_deref())
    }

    /// The variable `name`, if the container sets it.
    pub fn var(&self, name: &str) -> Option<&EnvVar> {
        self.env.iter().find(|v| v.name == name)
    }

    /// The number of the port named `name`.
    ///
    /// # Panics
    /// When the container declares no port of that name.
    pub fn port(&self, name: &str) -> u16 {
        self.ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("container {} has a port named {name}", self.name))
            .container_port
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub name: String,
    pub value: Option<String>,
    pub value_from: Option<EnvSource>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvSource {
    pub secret_key_ref: Option<KeyRef>,
    pub config_map_key_ref: Option<KeyRef>,
    pub field_ref: Option<FieldRef>,
}

#[derive(Debug, Deserialize)]
pub struct KeyRef {
    pub name: String,
    pub key: String,
    pub optional: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldRef {
    pub field_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    pub name: Option<String>,
    pub container_port: u16,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub http_get: Option<HttpGet>,
    pub initial_delay_seconds: Option<u64>,
    pub period_seconds: Option<u64>,
    pub failure_threshold: Option<u64>,
}

impl Probe {
    /// Seconds from the first failure the probe sees to the kubelet acting on it (at least).
    pub fn patience_seconds(&self) -> u64 {
        self.period_seconds.unwrap_or(10) * self.failure_threshold.unwrap_or(3)
    }
}

#[derive(Debug, Deserialize)]
pub struct HttpGet {
    pub path: String,
    pub port: PortRef,
}

/// A port by name or number.
#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(untagged)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    pub run_as_non_root: Option<bool>,
    pub run_as_user: Option<u32>,
    pub read_only_root_filesystem: Option<bool>,
    pub allow_privilege_escalation: Option<bool>,
    pub capabilities: Option<Capabilities>,
    pub seccomp_profile: Option<SeccompProfile>,
}

#[derive(Debug, Deserialize)]
pub struct Capabilities {
    #[serde(default)]
    pub drop: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct SeccompProfile {
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct Resources {
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    pub read_only: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    pub config_map: Option<ConfigMapSource>,
    pub secret: Option<SecretSource>,
    pub persistent_volume_claim: Option<ClaimSource>,
    pub empty_dir: Option<EmptyDir>,
}

#[derive(Debug, Deserialize)]
pub struct ConfigMapSource {
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    pub secret_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    pub claim_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDir {
    pub size_limit: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Service {
    pub metadata: Metadata,
    pub spec: ServiceSpec,
}

#[derive(Debug, Deserialize)]
pub struct ServiceSpec {
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    pub name: String,
    pub port: u16,
    pub target_port: PortRef,
}

#[derive(Debug, Deserialize)]
pub struct ConfigMap {
    pub metadata: Metadata,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

/// An object that selects pods (a PodDisruptionBudget).
#[derive(Debug, Deserialize)]
pub struct Selecting {
    pub metadata: Metadata,
    pub spec: SelectingSpec,
}

#[derive(Debug, Deserialize)]
pub struct SelectingSpec {
    pub selector: LabelSelector,
}

#[derive(Debug, Deserialize)]
pub struct NetworkPolicy {
    pub metadata: Metadata,
    pub spec: NetworkPolicySpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    pub pod_selector: LabelSelector,
    #[serde(default)]
    pub ingress: Vec<IngressRule>,
}

#[derive(Debug, Deserialize)]
pub struct IngressRule {
    #[serde(default)]
    pub ports: Vec<PolicyPort>,
}

#[derive(Debug, Deserialize)]
pub struct PolicyPort {
    pub port: PortRef,
}

/// KEDA's `ScaledObject` (a custom resource: no Kubernetes schema checks it, this does).
#[derive(Debug, Deserialize)]
pub struct ScaledObject {
    pub metadata: Metadata,
    pub spec: ScaledObjectSpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    pub scale_target_ref: ScaleTarget,
    pub min_replica_count: Option<u32>,
    pub max_replica_count: Option<u32>,
    pub cooldown_period: Option<u64>,
    pub triggers: Vec<Trigger>,
}

#[derive(Debug, Deserialize)]
pub struct ScaleTarget {
    pub kind: Option<String>,
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub struct Trigger {
    #[serde(rename = "type")]
    pub kind: String,
    pub metadata: BTreeMap<String, String>,
}

/// Accessors by kind, for [`one`].
impl Object {
    /// Its metadata, when it is of a kind this reads.
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            Self::Deployment(o) | Self::StatefulSet(o) => Some(&o.metadata),
            Self::Service(o) => Some(&o.metadata),
            Self::ConfigMap(o) => Some(&o.metadata),
            Self::PodDisruptionBudget(o) => Some(&o.metadata),
            Self::NetworkPolicy(o) => Some(&o.metadata),
            Self::ScaledObject(o) => Some(&o.metadata),
            Self::PersistentVolumeClaim(o)
            | Self::Namespace(o)
            | Self::ServiceAccount(o)
            | Self::PodMonitor(o)
            | Self::PrometheusRule(o) => Some(&o.metadata),
            Self::Other => None,
        }
    }

    pub fn deployment(&self) -> Option<&Workload> {
        match self {
            Self::Deployment(w) => Some(w),
            _ => None,
        }
    }
    pub fn stateful_set(&self) -> Option<&Workload> {
        match self {
            Self::StatefulSet(w) => Some(w),
            _ => None,
        }
    }
    pub fn service(&self) -> Option<&Service> {
        match self {
            Self::Service(s) => Some(s),
            _ => None,
        }
    }
    pub fn config_map(&self) -> Option<&ConfigMap> {
        match self {
            Self::ConfigMap(c) => Some(c),
            _ => None,
        }
    }
    pub fn disruption_budget(&self) -> Option<&Selecting> {
        match self {
            Self::PodDisruptionBudget(p) => Some(p),
            _ => None,
        }
    }
    pub fn network_policy(&self) -> Option<&NetworkPolicy> {
        match self {
            Self::NetworkPolicy(p) => Some(p),
            _ => None,
        }
    }
    pub fn scaled_object(&self) -> Option<&ScaledObject> {
        match self {
            Self::ScaledObject(s) => Some(s),
            _ => None,
        }
    }
    pub fn claim(&self) -> Option<&Named> {
        match self {
            Self::PersistentVolumeClaim(c) => Some(c),
            _ => None,
        }
    }
}

/// A Kubernetes quantity of bytes (`1Gi`, `256Mi`, `512M`, `1048576`).
///
/// # Panics
/// On a quantity it does not know.
pub fn bytes(quantity: &str) -> u64 {
    let units = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("K", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ];
    for (suffix, factor) in units {
        if let Some(n) = quantity.strip_suffix(suffix) {
            return n.parse::<u64>().expect("a whole number") * factor;
        }
    }
    quantity.parse().expect("a whole number of bytes")
}
