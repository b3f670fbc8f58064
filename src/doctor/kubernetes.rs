//! `forgehand doctor` on Kubernetes (`cluster.mode: kubernetes` or
//! `sandbox.backend: kubernetes`): the API answers, the namespaces exist,
//! and the daemon's identity may do each thing the code does there (one
//! SelfSubjectAccessReview per verb, so a missing one is named).

use super::{check, Check, Status};
use crate::config::{ClusterMode, Config, SandboxBackendChoice};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

/// (API group, resource, subresource, verbs).
type Rule = (&'static str, &'static str, &'static str, &'static [&'static str]);

/// What the claims use.
const LEASE_VERBS: &[Rule] = &[(
    "coordination.k8s.io",
    "leases",
    "",
    &["get", "list", "create", "update", "delete"],
)];

/// What sandbox pods need.
const POD_VERBS: &[Rule] = &[
    ("", "pods", "", &["get", "list", "create", "delete"]),
    ("", "pods", "exec", &["create", "get"]),
    ("networking.k8s.io", "networkpolicies", "", &["get", "create"]),
];

/// Whether the config uses Kubernetes at all.
pub fn wanted(config: &Config) -> bool {
    config.cluster.mode == ClusterMode::Kubernetes
        || matches!(config.sandbox.backend, SandboxBackendChoice::Kubernetes(_))
}

/// The checks, with a client found the usual way; with `probe_network`, a
/// sandbox pod also tries to reach the API server.
pub async fn run(config: &Config, probe_network: bool) -> Vec<Check> {
    let client = match crate::replicas::kube_leases::client().await {
        Ok(client) => client,
        Err(e) => return vec![check("kubernetes", Status::Fail, e)],
    };
    let mut out = checks(&client, config).await;
    if let (SandboxBackendChoice::Kubernetes(pods), true) = (&config.sandbox.backend, probe_network) {
        let target = kube::Config::infer().await.ok().and_then(|c| {
            let url = c.cluster_url;
            let default_port = if url.scheme_str() == Some("http") { 80 } else { 443 };
            Some((url.host()?.to_owned(), url.port_u16().unwrap_or(default_port)))
        });
        let backend = crate::sandbox::kubernetes::KubernetesBackend::with_client(
            client,
            config.sandbox.clone(),
            pods.clone(),
            format!("doctor-{}", std::process::id()),
        );
        let image = crate::images::image_tag(&config.images, "base");
        let project = config.daemon.state_dir.join("doctor-network-probe");
        let probed = match (&target, std::fs::create_dir_all(&project)) {
            (_, Err(e)) => check(
                super::network_probe::NAME,
                Status::Fail,
                format!("cannot make {}: {e}", project.display()),
            ),
            (Some((host, port)), Ok(())) => {
                let pod = super::network_probe::ProbePod {
                    backend: &backend,
                    image: &image,
                    project: &project,
                };
                let probed = super::network_probe::probe(pod, host, *port).await;
                let _ = std::fs::remove_dir(&project);
                probed
            }
            (None, Ok(())) => check(
                super::network_probe::NAME,
                Status::Warn,
                "cannot tell: the API server's address has no host and port to try",
            ),
        };
        out.retain(|c| c.name != super::network_probe::NAME);
        out.push(probed);
    }
    out
}

/// The checks against `client`.
pub async fn checks(client: &kube::Client, config: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    match client.apiserver_version().await {
        Ok(version) => out.push(check(
            "kubernetes",
            Status::Pass,
            format!(
                "API server {}.{} ({})",
                version.major, version.minor, version.git_version
            ),
        )),
        Err(e) => {
            out.push(check(
                "kubernetes",
                Status::Fail,
                format!("the API server does not answer: {e}; check KUBECONFIG or the pod's service account"),
            ));
            return out;
        }
    }
    let default = client.default_namespace().to_owned();
    let mut wanted: Vec<(String, &[Rule])> = Vec::new();
    if config.cluster.mode == ClusterMode::Kubernetes {
        let ns = non_empty(&config.cluster.namespace, &default);
        wanted.push((ns, LEASE_VERBS));
    }
    if let SandboxBackendChoice::Kubernetes(pods) = &config.sandbox.backend {
        let ns = non_empty(&pods.namespace, &default);
        wanted.push((ns, POD_VERBS));
    }
    let mut namespaces: Vec<&String> = wanted.iter().map(|(ns, _)| ns).collect();
    namespaces.dedup();
    for ns in namespaces {
        out.push(namespace_check(client, ns).await);
    }
    for (ns, rules) in &wanted {
        out.push(access_check(client, ns, rules).await);
    }
    if let SandboxBackendChoice::Kubernetes(pods) = &config.sandbox.backend {
        out.push(isolation_check(config, &default, pods));
        out.push(check(
            super::network_probe::NAME,
            Status::Warn,
            "only the cluster's network plugin enforces the sandboxes' deny-all NetworkPolicy (some do not); `forgehand doctor --probe-network` starts a sandbox pod that tries to reach the API server",
        ));
        out.push(check(
            "sandbox images",
            Status::Warn,
            format!(
                "pulled from {} by the nodes; only a node can tell whether it can pull them (a sandbox that cannot fails at once with ErrImagePull)",
                if pods.registry.is_empty() { "the image names as they are (images.registry is empty)".to_owned() } else { pods.registry.clone() }
            ),
        ));
    }
    out
}

/// Whether sandbox pods have a namespace of their own: where they share the
/// daemon's, the Role that makes and execs into them reaches the daemon's
/// own pods too.
fn isolation_check(config: &Config, default: &str, pods: &crate::config::KubeSandboxConfig) -> Check {
    let sandboxes = non_empty(&pods.namespace, default);
    let mut daemon = vec![default.to_owned()];
    if config.cluster.mode == ClusterMode::Kubernetes {
        daemon.push(non_empty(&config.cluster.namespace, default));
    }
    if daemon.contains(&sandboxes) {
        check(
            "sandbox namespace",
            Status::Warn,
            format!(
                "sandbox pods share the namespace {sandboxes} with the daemon: the Role that makes and execs into them also reaches the daemon's own pods, their environment and the Secrets they mount. Set sandbox.kubernetes.namespace to a namespace of their own (deploy/kubernetes/overlays/cluster does)"
            ),
        )
    } else {
        check(
            "sandbox namespace",
            Status::Pass,
            format!("sandbox pods have {sandboxes} to themselves"),
        )
    }
}

fn non_empty(configured: &str, default: &str) -> String {
    if configured.is_empty() {
        default.to_owned()
    } else {
        configured.to_owned()
    }
}

async fn namespace_check(client: &kube::Client, ns: &str) -> Check {
    let name = format!("namespace {ns}");
    match Api::<Namespace>::all(client.clone()).get_opt(ns).await {
        Ok(Some(_)) => check(name, Status::Pass, "exists"),
        Ok(None) => check(
            name,
            Status::Fail,
            format!("does not exist; create it (kubectl create namespace {ns}) or set cluster.namespace / sandbox.kubernetes.namespace"),
        ),
        // A Role cannot grant reading namespaces (they are cluster-wide).
        Err(kube::Error::Api(status)) if status.is_forbidden() => check(
            name,
            Status::Warn,
            "cannot tell: reading namespaces needs a ClusterRole, which forgehand does not need otherwise",
        ),
        Err(e) => check(name, Status::Fail, format!("cannot read it: {e}")),
    }
}

async fn access_check(client: &kube::Client, ns: &str, rules: &[Rule]) -> Check {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    let mut granted = 0;
    for (group, resource, subresource, verbs) in rules {
        for verb in *verbs {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some((*group).to_owned()),
                        resource: Some((*resource).to_owned()),
                        subresource: (!subresource.is_empty()).then(|| (*subresource).to_owned()),
                        verb: Some((*verb).to_owned()),
                        namespace: Some(ns.to_owned()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let what = match subresource {
                &"" => format!("{verb} {resource}"),
                sub => format!("{verb} {resource}/{sub}"),
            };
            match reviews.create(&PostParams::default(), &review).await {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => granted += 1,
                Ok(_) => denied.push(what),
                Err(e) => {
                    return check(
                        format!("access in {ns}"),
                        Status::Fail,
                        format!("cannot ask the API server whether this identity may {what}: {e}"),
                    )
                }
            }
        }
    }
    if denied.is_empty() {
        check(
            format!("access in {ns}"),
            Status::Pass,
            format!("all {granted} verbs forgehand uses are allowed"),
        )
    } else {
        check(
            format!("access in {ns}"),
            Status::Fail,
            format!(
                "not allowed: {}; grant them with a Role like deploy/kubernetes/overlays/cluster/role.yaml",
                denied.join(", ")
            ),
        )
    }
}
