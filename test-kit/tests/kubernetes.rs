//! The Kubernetes manifests (`deploy/kubernetes/`), rendered with `kubectl kustomize` as an
//! operator renders them, held to what the pod must be: the proxy a native sidecar, probes on
//! the endpoints the images' health checks ask, a grace period that covers both drains, locked
//! down containers, the stores each overlay promises; every variable they set accepted by the
//! binaries' `--check-config`; and the same pod as `docker-compose.yml` describes.
//! (`.ci/kubernetes` adds the schema and policy scans: kubernetes-validate and checkov.)

use std::collections::{BTreeMap, BTreeSet};

use daedalus_test_kit::compose::{compose_file, image};
use daedalus_test_kit::documented::help_variables;
use daedalus_test_kit::kubernetes::{Object, PortRef, Workload, bytes, one, overlays, render};
use daedalus_test_kit::pod::{Binary, duration, parse_duration, path_asked_by, resolved};
use daedalus_test_kit::{proxy_binary, runtime_binary};
use serde_json::Value;

/// The kustomizations that run the agent pod: our overlays and the example of an operator's own.
const POD_OVERLAYS: [&str; 4] = [
    "overlays/single",
    "overlays/replicas",
    "overlays/full",
    "example",
];
/// Seconds the pod's grace keeps beyond the two drains: the runtime's hand-off of the turns
/// still running (a checkpoint write waits at most 3 s) and the proxy's last acks.
const GRACE_MARGIN: u64 = 5;
/// Variables each binary reads beside its flags (`--help` lists only the flags'): the
/// deployment file's, the LLM providers' (its defaults) and OpenTelemetry's.
const READ_BESIDE_THE_FLAGS: [&str; 8] = [
    "AGENTS_CONFIG",
    "PALLAS_AGENTS_CONFIG",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OTEL_SERVICE_NAME",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

fn agent_pod(objects: &[Object]) -> &Workload {
    one(objects, Object::deployment, "daedalus")
}

#[test]
fn every_overlay_renders_into_one_namespace() {
    let names = overlays();
    assert_eq!(names, ["full", "nats", "replicas", "single"]);
    for overlay in &names {
        let objects = render(&format!("overlays/{overlay}"));
        assert!(objects.len() >= 5, "{overlay} renders its objects");
        for object in &objects {
            let metadata = object.metadata().unwrap_or_else(|| {
                panic!("{overlay} renders only kinds this test reads");
            });
            let namespace = if matches!(object, Object::Namespace(_)) {
                Some(metadata.name.as_str())
            } else {
                metadata.namespace.as_deref()
            };
            assert_eq!(namespace, Some("daedalus"), "{overlay}: {}", metadata.name);
        }
    }
}

#[test]
fn the_proxy_is_a_native_sidecar_and_the_grace_covers_both_drains() {
    for overlay in POD_OVERLAYS {
        let objects = render(overlay);
        let pod = &agent_pod(&objects).spec.template.spec;
        assert_eq!(
            pod.containers.len(),
            1,
            "{overlay}: the runtime is the pod's container"
        );
        assert_eq!(pod.containers[0].name, "runtime");
        let proxy = pod.container("proxy");
        assert!(
            pod.init_containers.iter().any(|c| c.name == "proxy"),
            "{overlay}: the proxy is an init container"
        );
        assert_eq!(
            proxy.restart_policy.as_deref(),
            Some("Always"),
            "{overlay}: a native sidecar (it starts before the runtime and stops after it)"
        );
        assert!(
            proxy.startup_probe.is_none(),
            "{overlay}: a sidecar's startup probe would hold back the runtime the proxy waits for"
        );

        let runtime = resolved(Binary::Runtime, pod, pod.container("runtime"), &objects);
        let proxy_plan = resolved(Binary::Proxy, pod, proxy, &objects);
        let runtime_grace = duration(&runtime["termination_grace_period"]);
        let proxy_grace = duration(&proxy_plan["termination_grace_period"]);
        assert_eq!(
            pod.termination_grace_period_seconds,
            Some(runtime_grace + proxy_grace + GRACE_MARGIN),
            "{overlay}: the pod's grace is the runtime's drain, then the proxy's, then a margin"
        );

        let runtime_container = pod.container("runtime");
        let liveness = runtime_container.liveness_probe.as_ref().expect("liveness");
        assert!(
            liveness.patience_seconds() > runtime_grace + GRACE_MARGIN,
            "{overlay}: a draining runtime (/health 503) is not killed by its liveness probe"
        );
        let proxy_liveness = proxy.liveness_probe.as_ref().expect("the proxy's liveness");
        let startup_timeout = duration(&proxy_plan["startup_timeout"]);
        assert!(
            proxy_liveness.initial_delay_seconds.unwrap_or(0) + proxy_liveness.patience_seconds()
                > startup_timeout,
            "{overlay}: the proxy's liveness waits out its own STARTUP_TIMEOUT"
        );
    }
}

#[test]
fn the_probes_ask_what_the_images_health_checks_ask() {
    let runtime_path = path_asked_by(Binary::Runtime);
    let proxy_path = path_asked_by(Binary::Proxy);
    for overlay in POD_OVERLAYS {
        let objects = render(overlay);
        let pod = &agent_pod(&objects).spec.template.spec;
        for (name, path) in [("runtime", &runtime_path), ("proxy", &proxy_path)] {
            let container = pod.container(name);
            let probes = [
                &container.startup_probe,
                &container.readiness_probe,
                &container.liveness_probe,
            ];
            assert!(
                container.readiness_probe.is_some() && container.liveness_probe.is_some(),
                "{overlay}: {name} has readiness and liveness"
            );
            let asked: Vec<_> = probes.iter().filter_map(|p| p.as_ref()).collect();
            for probe in asked {
                let get = probe.http_get.as_ref().expect("an HTTP probe");
                assert_eq!(
                    &get.path, path,
                    "{overlay}: {name} probes its health endpoint"
                );
                let PortRef::Name(port) = &get.port else {
                    panic!("{overlay}: {name}'s probes name their port");
                };
                container.port(port);
            }
        }
    }
}

#[test]
fn every_container_runs_locked_down_within_its_limits() {
    for overlay in [
        "overlays/single",
        "overlays/replicas",
        "overlays/full",
        "overlays/nats",
    ] {
        let objects = render(overlay);
        let workloads = objects
            .iter()
            .filter_map(|o| o.deployment().or_else(|| o.stateful_set()));
        for workload in workloads {
            let pod = &workload.spec.template.spec;
            assert_eq!(
                pod.automount_service_account_token,
                Some(false),
                "{overlay}"
            );
            let pod_context = pod
                .security_context
                .as_ref()
                .expect("a pod security context");
            assert_eq!(pod_context.run_as_non_root, Some(true), "{overlay}");
            for container in pod.init_containers.iter().chain(&pod.containers) {
                let what = format!("{overlay}: {}", container.name);
                let context = container.security_context.as_ref().expect(&what);
                assert_eq!(context.read_only_root_filesystem, Some(true), "{what}");
                assert_eq!(context.allow_privilege_escalation, Some(false), "{what}");
                let dropped = &context.capabilities.as_ref().expect(&what).drop;
                assert_eq!(dropped, &["ALL"], "{what}");
                let seccomp = context.seccomp_profile.as_ref().expect(&what);
                assert_eq!(seccomp.kind, "RuntimeDefault", "{what}");
                let resources = container.resources.as_ref().expect(&what);
                for key in ["cpu", "memory"] {
                    assert!(
                        resources.requests.contains_key(key),
                        "{what} requests {key}"
                    );
                    assert!(
                        resources.limits.contains_key(key),
                        "{what} is limited in {key}"
                    );
                }
                for mount in &container.volume_mounts {
                    let claimed = workload.spec.volume_claim_templates.iter();
                    let from_claim = claimed.map(|c| &c.metadata.name).any(|n| *n == mount.name);
                    assert!(from_claim || pod.volumes.iter().any(|v| v.name == mount.name));
                }
            }
        }
    }
}

#[test]
fn the_runtime_memory_limit_holds_every_bound_it_resolves() {
    for overlay in POD_OVERLAYS {
        let objects = render(overlay);
        let pod = &agent_pod(&objects).spec.template.spec;
        let container = pod.container("runtime");
        let plan = resolved(Binary::Runtime, pod, container, &objects);
        let bounds: u64 = [
            "/limits/turn_memory_bytes",
            "/limits/task_memory_bytes",
            "/mcp_sessions/max_bytes",
            "/push/queue_bytes",
        ]
        .iter()
        .map(|at| plan.pointer(at).and_then(Value::as_u64).expect(at))
        .sum();
        let limit = bytes(&container.resources.as_ref().expect("resources").limits["memory"]);
        assert!(
            limit >= bounds + (128 << 20),
            "{overlay}: the memory limit ({limit}) holds the bounds ({bounds}) and 128 MiB more"
        );
    }
}

#[test]
fn the_single_overlay_keeps_its_stores_on_a_claim_under_one_stable_replica() {
    let objects = render("overlays/single");
    let deployment = agent_pod(&objects);
    assert_eq!(deployment.spec.replicas, Some(1));
    let strategy = deployment.spec.strategy.as_ref().expect("a strategy");
    assert_eq!(
        strategy.kind, "Recreate",
        "two pods never open the SQLite files"
    );
    let pod = &deployment.spec.template.spec;
    let plan = resolved(Binary::Runtime, pod, pod.container("runtime"), &objects);
    let work_dir = pod
        .container("runtime")
        .literal("WORK_DIR")
        .expect("WORK_DIR");
    let mount = pod
        .container("runtime")
        .volume_mounts
        .iter()
        .find(|m| m.mount_path == work_dir)
        .expect("WORK_DIR is a mount");
    // Both stores are SQLite files in WORK_DIR (each mount stands in a directory named after
    // its volume while `--check-config` reads them).
    let in_work_dir = format!("/{}/", mount.name);
    assert_eq!(plan["tasks_db"]["kind"], "sqlite");
    for file in [&plan["tasks_db"]["path"], &plan["sessions_db"]["sqlite"]] {
        let file = file.as_str().expect("a SQLite file");
        assert!(
            file.contains(&in_work_dir) && file.ends_with(".sqlite"),
            "{file}"
        );
    }
    let volume = pod.volume(&mount.name);
    let claim = volume.persistent_volume_claim.as_ref().expect("on a claim");
    assert!(
        volume.empty_dir.is_none(),
        "the claim replaces the scratch directory"
    );
    one(&objects, Object::claim, &claim.claim_name);
    let replica = pod.container("runtime").literal("REPLICA_ID");
    assert!(
        replica.is_some_and(|r| !r.is_empty()),
        "a fixed REPLICA_ID: the next pod is the same replica and resumes its turns"
    );
}

#[test]
fn the_replicas_overlay_shares_nats_kv_and_names_each_replica_after_its_pod() {
    let objects = render("overlays/replicas");
    let deployment = agent_pod(&objects);
    assert!(deployment.spec.replicas.unwrap_or(1) >= 2);
    let pod = &deployment.spec.template.spec;
    let runtime = pod.container("runtime");
    let replica = runtime.var("REPLICA_ID").expect("REPLICA_ID");
    let field = replica
        .value_from
        .as_ref()
        .and_then(|f| f.field_ref.as_ref());
    assert_eq!(field.map(|f| f.field_path.as_str()), Some("metadata.name"));

    let nats = pod
        .container("proxy")
        .literal("NATS_URL")
        .expect("NATS_URL");
    let host = nats.trim_start_matches("nats://");
    let plan = resolved(Binary::Runtime, pod, runtime, &objects);
    let nats_url = format!("nats://{host}");
    assert_eq!(plan["tasks_db"]["kind"], "nats_kv");
    assert_eq!(
        plan["tasks_db"]["url"],
        nats_url.as_str(),
        "tasks on the proxy's NATS"
    );
    assert_eq!(
        plan["sessions_db"]["nats_kv"]["url"],
        nats_url.as_str(),
        "conversations too"
    );

    let labels = &deployment.spec.selector.match_labels;
    let budget = one(&objects, Object::disruption_budget, "daedalus");
    assert_eq!(&budget.spec.selector.match_labels, labels);
    let keys: BTreeSet<_> = pod
        .topology_spread_constraints
        .iter()
        .inspect(|c| assert_eq!(&c.label_selector.match_labels, labels))
        .map(|c| c.topology_key.as_str())
        .collect();
    assert!(
        keys.contains("kubernetes.io/hostname") && keys.contains("topology.kubernetes.io/zone")
    );

    let policy = one(&objects, Object::network_policy, "daedalus");
    assert_eq!(&policy.spec.pod_selector.match_labels, labels);
    let runtime_port = runtime.port("http");
    let open: BTreeSet<_> = policy
        .spec
        .ingress
        .iter()
        .flat_map(|rule| &rule.ports)
        .map(|p| &p.port)
        .collect();
    assert!(
        open.contains(&PortRef::Number(runtime_port)),
        "named callers reach the runtime"
    );
}

#[test]
fn keda_scales_the_pods_on_their_agents_pending_tasks() {
    let objects = render("overlays/full");
    let scaled = one(&objects, Object::scaled_object, "daedalus");
    assert_eq!(
        scaled.spec.scale_target_ref.kind.as_deref(),
        Some("Deployment")
    );
    let deployment = agent_pod(&objects);
    assert_eq!(scaled.spec.scale_target_ref.name, deployment.metadata.name);
    assert!(
        scaled.spec.min_replica_count.unwrap_or(0) >= 2,
        "at least two, as the PDB needs"
    );
    let pod = &deployment.spec.template.spec;
    assert!(
        scaled.spec.cooldown_period.unwrap_or(300)
            > pod.termination_grace_period_seconds.unwrap_or(30),
        "scale-in waits longer than a pod's drain"
    );

    let proxy = resolved(Binary::Proxy, pod, pod.container("proxy"), &objects);
    let [trigger] = scaled.spec.triggers.as_slice() else {
        panic!("one trigger");
    };
    assert_eq!(trigger.kind, "nats-jetstream");
    assert_eq!(
        Some(trigger.metadata["stream"].as_str()),
        proxy.pointer("/streams/tasks").and_then(Value::as_str)
    );
    let agent = proxy["agent"].as_str().expect("the proxy's agent");
    assert_eq!(
        trigger.metadata["consumer"],
        format!("agent-{agent}"),
        "the proxy's consumer"
    );

    // The monitoring endpoint is the NATS overlay's Service, in the pods' namespace.
    let nats = render("overlays/nats");
    let service = one(&nats, Object::service, "nats");
    let namespace = service.metadata.namespace.as_deref().expect("a namespace");
    let monitor = service
        .spec
        .ports
        .iter()
        .find(|p| p.name == "monitor")
        .expect("monitor");
    assert_eq!(
        trigger.metadata["natsServerMonitoringEndpoint"],
        format!("nats.{namespace}.svc.cluster.local:{}", monitor.port)
    );
    assert_eq!(deployment.metadata.namespace.as_deref(), Some(namespace));
    let nats_url = pod
        .container("proxy")
        .literal("NATS_URL")
        .expect("NATS_URL");
    let client = service
        .spec
        .ports
        .iter()
        .find(|p| p.name == "client")
        .expect("client");
    assert_eq!(
        nats_url,
        format!("nats://{}:{}", service.metadata.name, client.port)
    );
}

#[test]
fn every_variable_the_manifests_set_is_one_the_binaries_know_and_accept() {
    let known_runtime = help_variables(&runtime_binary());
    let known_proxy = help_variables(&proxy_binary());
    for overlay in POD_OVERLAYS {
        let objects = render(overlay);
        let pod = &agent_pod(&objects).spec.template.spec;
        for (binary, known) in [
            (Binary::Runtime, &known_runtime),
            (Binary::Proxy, &known_proxy),
        ] {
            let container = pod.container(binary.container());
            for var in &container.env {
                assert!(
                    known.contains(&var.name) || READ_BESIDE_THE_FLAGS.contains(&var.name.as_str()),
                    "{overlay}: {} sets {}, which {} does not read",
                    container.name,
                    var.name,
                    binary.container()
                );
            }
            // Accepted: `resolved` fails the test on a refusal, naming the variable.
            let plan = resolved(binary, pod, container, &objects);
            let listen = plan["listen"].as_str().expect("listen");
            let port = container.ports.first().expect("a port").container_port;
            assert!(
                listen.ends_with(&format!(":{port}")),
                "{overlay}: listens where declared"
            );
        }
    }
}

#[test]
fn compose_and_the_manifests_describe_the_same_pod() {
    let compose = compose_file();
    let objects = render("overlays/replicas");
    let deployment = agent_pod(&objects);
    let pod = &deployment.spec.template.spec;
    let service = one(&objects, Object::service, "daedalus");
    let published: BTreeSet<u16> = compose
        .service("pod")
        .ports
        .iter()
        .map(|p| {
            p.rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("a port")
        })
        .collect();
    let mut served = BTreeSet::new();
    for (binary, dockerfile) in [
        (Binary::Runtime, "Dockerfile.runtime"),
        (Binary::Proxy, "Dockerfile.proxy"),
    ] {
        let name = binary.container();
        let built = image(dockerfile);
        let composed = compose.service(name);
        let container = pod.container(name);
        assert_eq!(
            composed.network_mode.as_deref(),
            Some("service:pod"),
            "one namespace"
        );
        assert_eq!(
            composed.image.as_deref(),
            Some(container.image.as_str()),
            "{name}: image"
        );
        assert_eq!(
            built.user.as_deref().and_then(|u| u.parse().ok()),
            container
                .security_context
                .as_ref()
                .and_then(|c| c.run_as_user),
            "{name}: the image's user"
        );
        let port = container.ports.first().expect("a port").container_port;
        assert!(
            built.exposed.contains(&port),
            "{name}: the image exposes {port}"
        );
        served.insert(port);
        let by_service = service.spec.ports.iter().any(|p| p.port == port);
        assert!(by_service, "{name}: the Service serves {port}");

        // Compose's fixed variables (with the image's), and the pod's literal ones, agree.
        let mut composed_env: BTreeMap<&str, &str> = built
            .environment
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        composed_env.extend(composed.fixed_environment());
        for (var, value) in composed.fixed_environment() {
            assert_eq!(
                container.literal(var),
                Some(value),
                "{name}: {var} as compose sets it"
            );
        }
        for var in &container.env {
            if let (Some(value), Some(composed)) = (&var.value, composed_env.get(var.name.as_str()))
            {
                assert_eq!(
                    value, composed,
                    "{name}: {} as compose and the image set it",
                    var.name
                );
            }
        }

        // Compose stops each container after its drain, with the same margin.
        let plan = resolved(binary, pod, container, &objects);
        let grace = duration(&plan["termination_grace_period"]);
        let stop = composed
            .stop_grace_period
            .as_deref()
            .expect("stop_grace_period");
        assert_eq!(
            parse_duration(stop),
            grace + GRACE_MARGIN,
            "{name}: compose's grace"
        );
        // The image's HEALTHCHECK runs the binary's own health check.
        assert_eq!(
            built.healthcheck.get(1).map(String::as_str),
            Some("healthcheck")
        );
    }
    assert_eq!(
        published, served,
        "compose publishes the ports the pod serves"
    );
    let agents: BTreeSet<_> = ["runtime", "proxy"]
        .iter()
        .map(|name| compose.service(name).environment["AGENT_NAME"].as_str())
        .chain(
            ["runtime", "proxy"]
                .iter()
                .filter_map(|n| pod.container(n).literal("AGENT_NAME")),
        )
        .collect();
    assert_eq!(
        agents.len(),
        1,
        "one agent, named alike everywhere: {agents:?}"
    );
}
