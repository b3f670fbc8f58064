//! The Lease calls of the claim protocol over the Kubernetes API: typed
//! `coordination.k8s.io/v1` Leases through `kube`, each call retried with
//! backoff while the answer is worth retrying (a 5xx, 429 beyond kube's own
//! retries, a connection that failed or timed out).

use super::lease::{LeaseApi, LeaseError, LeaseRecord};
use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::Api;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// Who made a Lease (the standard label), and which installation's it is.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const GROUP: &str = "io.forgehand/lease-group";
/// The task's journal key.
pub const TASK: &str = "io.forgehand/task";

/// One call's connect and read limits: a hanging API server must not hold
/// a claim's renewal or the daemon's loop.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct KubeLeases {
    api: Api<Lease>,
    group: String,
    retry: ExponentialBuilder,
}

impl KubeLeases {
    /// Leases in `namespace`, labelled with `group` (replicas working the
    /// same forges share it).
    pub fn new(client: kube::Client, namespace: &str, group: &str) -> KubeLeases {
        KubeLeases {
            api: Api::namespaced(client, namespace),
            group: group.to_owned(),
            retry: ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(2))
                .with_max_times(4)
                .with_jitter(),
        }
    }

    async fn call<T, F, Fut>(&self, what: &str, call: F) -> Result<T, LeaseError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LeaseError>>,
    {
        call.retry(self.retry)
            .when(LeaseError::is_retryable)
            .notify(|err, wait| {
                tracing::debug!(call = what, error = %err, "Lease call failed; trying again in {} ms", wait.as_millis())
            })
            .await
    }

    fn to_lease(&self, record: &LeaseRecord) -> Lease {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(record.name.clone()),
                resource_version: (!record.resource_version.is_empty())
                    .then(|| record.resource_version.clone()),
                labels: Some(BTreeMap::from([
                    (MANAGED_BY.to_owned(), "forgehand".to_owned()),
                    (GROUP.to_owned(), self.group.clone()),
                ])),
                annotations: Some(BTreeMap::from([(TASK.to_owned(), record.task.clone())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: (!record.holder.is_empty()).then(|| record.holder.clone()),
                lease_duration_seconds: Some(
                    i32::try_from(record.duration.as_secs().max(1)).unwrap_or(i32::MAX),
                ),
                lease_transitions: Some(record.transitions),
                // For people reading the Lease; the protocol never compares
                // one replica's clock with another's.
                renew_time: Some(now.clone()),
                acquire_time: Some(now),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// A stored Lease as the protocol sees it.
fn to_record(lease: Lease) -> LeaseRecord {
    let spec = lease.spec.unwrap_or_default();
    LeaseRecord {
        name: lease.metadata.name.unwrap_or_default(),
        resource_version: lease.metadata.resource_version.unwrap_or_default(),
        holder: spec.holder_identity.unwrap_or_default(),
        duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
        transitions: spec.lease_transitions.unwrap_or(0),
        task: lease
            .metadata
            .annotations
            .and_then(|mut a| a.remove(TASK))
            .unwrap_or_default(),
    }
}

/// What an API error means to the protocol.
fn classify(name: &str, err: kube::Error) -> LeaseError {
    match err {
        kube::Error::Api(status) if status.is_already_exists() => LeaseError::AlreadyExists(name.to_owned()),
        kube::Error::Api(status) if status.is_conflict() => LeaseError::Conflict(name.to_owned()),
        kube::Error::Api(status) => {
            let retryable = matches!(status.code, 429 | 500 | 502 | 503 | 504);
            let advice = if status.is_forbidden() {
                "; the daemon's service account needs get, list, create, update and delete on leases (coordination.k8s.io) in this namespace"
            } else {
                ""
            };
            LeaseError::Api {
                detail: format!("{} {}: {}{advice}", status.code, status.reason, status.message),
                retryable,
            }
        }
        // The connection failed, timed out, or the answer did not parse.
        other => LeaseError::Api {
            detail: other.to_string(),
            retryable: true,
        },
    }
}

#[async_trait]
impl LeaseApi for KubeLeases {
    async fn create(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
        let body = self.to_lease(lease);
        self.call("create", || async {
            self.api
                .create(&PostParams::default(), &body)
                .await
                .map(to_record)
                .map_err(|e| classify(&lease.name, e))
        })
        .await
    }

    async fn get(&self, name: &str) -> Result<Option<LeaseRecord>, LeaseError> {
        self.call("get", || async {
            self.api
                .get_opt(name)
                .await
                .map(|found| found.map(to_record))
                .map_err(|e| classify(name, e))
        })
        .await
    }

    async fn replace(&self, lease: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
        let body = self.to_lease(lease);
        self.call("replace", || async {
            match self.api.replace(&lease.name, &PostParams::default(), &body).await {
                Ok(stored) => Ok(to_record(stored)),
                // Gone (released, or deleted by hand): not ours any more.
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    Err(LeaseError::Conflict(lease.name.clone()))
                }
                Err(e) => Err(classify(&lease.name, e)),
            }
        })
        .await
    }

    async fn delete(&self, name: &str, resource_version: &str) -> Result<(), LeaseError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(resource_version.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        self.call("delete", || async {
            match self.api.delete(name, &params).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
                Err(e) => Err(classify(name, e)),
            }
        })
        .await
    }

    async fn list(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
        let params = ListParams::default().labels(&format!("{MANAGED_BY}=forgehand,{GROUP}={}", self.group));
        self.call("list", || async {
            self.api
                .list(&params)
                .await
                .map(|list| list.items.into_iter().map(to_record).collect())
                .map_err(|e| classify("(list)", e))
        })
        .await
    }
}

/// A client from the usual places (`KUBECONFIG`, `~/.kube/config`, or the
/// pod's service account), with short call limits.
pub async fn client() -> Result<kube::Client, String> {
    client_with_read_timeout(READ_TIMEOUT).await
}

/// [`client`] whose reads may wait `read_timeout` (exec streams sit idle
/// between pings for longer than a Lease call may take).
pub async fn client_with_read_timeout(read_timeout: Duration) -> Result<kube::Client, String> {
    let mut config = kube::Config::infer().await.map_err(|e| {
        format!("cannot find the Kubernetes API: {e}. Run in a pod with a service account, or set KUBECONFIG")
    })?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(read_timeout);
    config.write_timeout = Some(READ_TIMEOUT);
    client_from(config)
}

/// A client for `config`. Several TLS providers are compiled in, so the
/// process's default is chosen here (ring, as the forge clients use).
///
/// The stack is kube's own (base URI, server retries, auth, timeouts) over
/// a connector with `TCP_NODELAY`: exec streams carry small frames both
/// ways (an MCP message, a yamux window update), and Nagle's algorithm
/// against the server's delayed ACK held some of them back 40 ms.
pub fn client_from(config: kube::Config) -> Result<kube::Client, String> {
    use kube::client::ConfigExt;
    // Already chosen (by an earlier client) is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if config.proxy_url.is_some() {
        // kube knows how to reach the API through a proxy; keep its stack.
        return kube::Client::try_from(config)
            .map_err(|e| format!("cannot make a Kubernetes API client: {e}"));
    }
    let fail = |e: kube::Error| format!("cannot make a Kubernetes API client: {e}");
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http).map_err(fail)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let http_client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer().map_err(fail)?)
        .layer(config.extra_headers_layer().map_err(fail)?)
        .map_err(tower::BoxError::from)
        .service(http_client);
    Ok(kube::Client::new(service, config.default_namespace))
}
