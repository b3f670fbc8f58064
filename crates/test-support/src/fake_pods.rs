//! A fake Kubernetes API server for sandbox pods, faithful where the pod
//! backend depends on it: pods and NetworkPolicies stored with real
//! resourceVersions, 409 AlreadyExists on a taken name, 404 `Status`
//! objects, label selectors on list, and exec over a WebSocket speaking
//! `v5.channel.k8s.io` (or only `v4`, to test the fallback): channel bytes
//! 0-3, the end-of-stdin frame `[255, 0]`, the final `Status` on channel 3.
//! Each pod is a real Docker container (network `none`, the pod's user,
//! read-only root, its `emptyDir`s as tmpfs), so files, exit codes and
//! timeouts are real. Every body a client sends is kept for validation.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;

/// Containers standing in for pods carry this label (the server's id).
pub const POD_LABEL: &str = "forgehand-test.fake-pod";

#[derive(Default)]
struct Store {
    /// (namespace, name) -> the stored pod (without status).
    pods: BTreeMap<(String, String), Value>,
    /// (namespace, name) -> the Docker container standing in.
    containers: HashMap<(String, String), String>,
    /// Pods whose image was not there: they wait in ErrImagePull.
    unpullable: HashMap<(String, String), String>,
    policies: BTreeMap<(String, String), Value>,
    revision: u64,
    faults: Vec<u16>,
    requests: Vec<String>,
    bodies: Vec<Value>,
    execs: usize,
    /// "verb resource[/subresource]" that access reviews deny.
    denied: Vec<String>,
    namespaces: Vec<String>,
}

#[derive(Clone)]
struct Shared {
    store: Arc<Mutex<Store>>,
    docker: Docker,
    id: String,
    /// Stripped from pod images: the "registry" the fake pulls from.
    registry: String,
    v5: bool,
}

pub struct FakePods {
    shared: Shared,
    url: String,
    _server: tokio::task::JoinHandle<()>,
}

impl FakePods {
    /// A server on loopback whose pods pull `<registry>/<image>` from the
    /// local engine's `<image>`.
    pub async fn start(docker: Docker, registry: &str, v5: bool) -> FakePods {
        let shared = Shared {
            store: Arc::default(),
            docker,
            id: crate::unique("fakepods"),
            registry: registry.trim_end_matches('/').to_owned(),
            v5,
        };
        let app = Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(list_pods).post(create_pod))
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(get_pod).delete(delete_pod),
            )
            .route("/api/v1/namespaces/{ns}/pods/{name}/exec", get(exec).post(exec))
            .route(
                "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
                post(create_policy),
            )
            .route(
                "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}",
                get(get_policy),
            )
            .route("/api/v1/namespaces/{ns}", get(get_namespace))
            .route(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                post(access_review),
            )
            .route("/version", get(version))
            .with_state(shared.clone())
            .layer(axum::middleware::from_fn_with_state(shared.clone(), faults));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // As the API server (Go) does: no Nagle delay on small frames.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakePods {
            shared,
            url,
            _server: server,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client of this server, in namespace `default`.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().unwrap());
        forgehand::replicas::kube_leases::client_from(config).unwrap()
    }

    pub fn fail_next(&self, count: usize, code: u16) {
        let mut store = self.shared.store.lock().unwrap();
        store.faults.extend(std::iter::repeat_n(code, count));
    }

    /// Access reviews of "verb resource[/subresource]" answer not allowed.
    pub fn deny(&self, what: &str) {
        self.shared.store.lock().unwrap().denied.push(what.to_owned());
    }

    /// Namespaces that exist besides `default`.
    pub fn add_namespace(&self, name: &str) {
        self.shared.store.lock().unwrap().namespaces.push(name.to_owned());
    }

    pub fn pods(&self) -> Vec<Value> {
        self.shared.store.lock().unwrap().pods.values().cloned().collect()
    }

    pub fn policies(&self) -> Vec<Value> {
        self.shared
            .store
            .lock()
            .unwrap()
            .policies
            .values()
            .cloned()
            .collect()
    }

    /// Every body a client sent (pods, NetworkPolicies).
    pub fn bodies(&self) -> Vec<Value> {
        self.shared.store.lock().unwrap().bodies.clone()
    }

    pub fn requests(&self) -> Vec<String> {
        self.shared.store.lock().unwrap().requests.clone()
    }

    pub fn execs(&self) -> usize {
        self.shared.store.lock().unwrap().execs
    }

    /// The Docker container standing in for pod `name` of `default`.
    pub fn container_of(&self, name: &str) -> Option<String> {
        let store = self.shared.store.lock().unwrap();
        store
            .containers
            .get(&("default".to_owned(), name.to_owned()))
            .cloned()
    }

    /// Removes every container this server made.
    pub async fn cleanup(&self) {
        let ids: Vec<String> = self
            .shared
            .store
            .lock()
            .unwrap()
            .containers
            .values()
            .cloned()
            .collect();
        for id in ids {
            remove(&self.shared.docker, &id).await;
        }
    }
}

async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let _ = docker.remove_container(id, Some(options)).await;
}

fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap(),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn faults(State(shared): State<Shared>, request: Request, next: axum::middleware::Next) -> Response {
    let line = format!(
        "{} {}",
        request.method(),
        request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("")
    );
    let fault = {
        let mut store = shared.store.lock().unwrap();
        store.requests.push(line);
        (!store.faults.is_empty()).then(|| store.faults.remove(0))
    };
    match fault {
        Some(code) => {
            let reason = match code {
                403 => "Forbidden",
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                _ => "InternalError",
            };
            status(code, reason, format!("injected fault {code}"))
        }
        None => next.run(request).await,
    }
}

fn query_pairs(uri: &axum::http::Uri) -> Vec<(String, String)> {
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn selected(pod: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (key, value) = term.split_once('=').unwrap_or((term, ""));
        pod["metadata"]["labels"][key].as_str() == Some(value)
    })
}

async fn list_pods(State(shared): State<Shared>, Path(ns): Path<String>, request: Request) -> Response {
    let q = query_pairs(request.uri());
    let selector = q
        .iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let limit: usize = q
        .iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(usize::MAX);
    let (items, revision): (Vec<(String, Value)>, u64) = {
        let store = shared.store.lock().unwrap();
        (
            store
                .pods
                .iter()
                .filter(|((n, _), pod)| *n == ns && selected(pod, &selector))
                .take(limit)
                .map(|((_, name), pod)| (name.clone(), pod.clone()))
                .collect(),
            store.revision,
        )
    };
    let mut with_status = Vec::new();
    for (name, pod) in items {
        with_status.push(with_pod_status(&shared, &ns, &name, pod).await);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": revision.to_string()},
            "items": with_status,
        }),
    )
}

/// The pod with a status read from its container, as a kubelet would say.
async fn with_pod_status(shared: &Shared, ns: &str, name: &str, mut pod: Value) -> Value {
    let key = (ns.to_owned(), name.to_owned());
    let (container, unpullable) = {
        let store = shared.store.lock().unwrap();
        (
            store.containers.get(&key).cloned(),
            store.unpullable.get(&key).cloned(),
        )
    };
    let image = pod["spec"]["containers"][0]["image"].clone();
    let cname = pod["spec"]["containers"][0]["name"].clone();
    pod["status"] = if let Some(image) = unpullable {
        json!({"phase": "Pending", "containerStatuses": [{
            "name": cname, "ready": false, "restartCount": 0, "image": image, "imageID": "",
            "state": {"waiting": {"reason": "ErrImagePull", "message": format!("rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": not found")}}
        }]})
    } else if let Some(id) = container {
        let state = shared
            .docker
            .inspect_container(&id, None)
            .await
            .ok()
            .and_then(|info| info.state)
            .unwrap_or_default();
        if state.running == Some(true) {
            json!({"phase": "Running", "containerStatuses": [{
                "name": cname, "ready": true, "restartCount": 0, "image": image, "imageID": "",
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
            }]})
        } else {
            let code = state.exit_code.unwrap_or(137);
            json!({"phase": if code == 0 { "Succeeded" } else { "Failed" }, "containerStatuses": [{
                "name": cname, "ready": false, "restartCount": 0, "image": image, "imageID": "",
                "state": {"terminated": {"exitCode": code, "reason": "Error"}}
            }]})
        }
    } else {
        json!({"phase": "Pending"})
    };
    pod
}

async fn get_pod(State(shared): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let pod = shared
        .store
        .lock()
        .unwrap()
        .pods
        .get(&(ns.clone(), name.clone()))
        .cloned();
    match pod {
        Some(pod) => json_response(StatusCode::OK, &with_pod_status(&shared, &ns, &name, pod).await),
        None => status(404, "NotFound", format!("pods \"{name}\" not found")),
    }
}

fn bytes_of(quantity: &Value) -> Option<u64> {
    quantity.as_str()?.parse().ok()
}

async fn create_pod(State(shared): State<Shared>, Path(ns): Path<String>, body: String) -> Response {
    let Ok(mut pod) = serde_json::from_str::<Value>(&body) else {
        return status(400, "BadRequest", "the body is not JSON".into());
    };
    let Some(name) = pod["metadata"]["name"].as_str().map(str::to_owned) else {
        return status(422, "Invalid", "metadata.name: Required value".into());
    };
    let key = (ns.clone(), name.clone());
    {
        let mut store = shared.store.lock().unwrap();
        store.bodies.push(pod.clone());
        if store.pods.contains_key(&key) {
            return status(409, "AlreadyExists", format!("pods \"{name}\" already exists"));
        }
        store.revision += 1;
        pod["metadata"]["resourceVersion"] = json!(store.revision.to_string());
        pod["metadata"]["uid"] = json!(format!("uid-{}-{}", shared.id, store.revision));
        pod["metadata"]["namespace"] = json!(ns);
        pod["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        store.pods.insert(key.clone(), pod.clone());
    }
    let spec = &pod["spec"];
    let c = &spec["containers"][0];
    let image = c["image"].as_str().unwrap_or_default().to_owned();
    let local = image
        .strip_prefix(&format!("{}/", shared.registry))
        .unwrap_or(&image)
        .to_owned();
    if shared.docker.inspect_image(&local).await.is_err() {
        shared.store.lock().unwrap().unpullable.insert(key, image);
        return json_response(StatusCode::CREATED, &pod);
    }
    // emptyDirs as tmpfs of their size limit (executable, as emptyDirs are).
    let sizes: HashMap<String, u64> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_owned(),
                bytes_of(&v["emptyDir"]["sizeLimit"]).unwrap_or(1 << 30),
            )
        })
        .collect();
    let tmpfs: HashMap<String, String> = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let size = sizes
                .get(m["name"].as_str().unwrap_or_default())
                .copied()
                .unwrap_or(1 << 30);
            (
                m["mountPath"].as_str().unwrap_or_default().to_owned(),
                format!("rw,exec,nosuid,nodev,size={size},mode=1777"),
            )
        })
        .collect();
    let sc = &c["securityContext"];
    let user = match (sc["runAsUser"].as_i64(), sc["runAsGroup"].as_i64()) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        _ => None,
    };
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
    };
    let env: Vec<String> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}={}",
                e["name"].as_str().unwrap_or(""),
                e["value"].as_str().unwrap_or("")
            )
        })
        .collect();
    let memory = bytes_of(&c["resources"]["limits"]["memory"]).map(|m| m as i64);
    let body = ContainerCreateBody {
        image: Some(local),
        entrypoint: strings(&c["command"]),
        cmd: strings(&c["args"]).or(Some(vec![])),
        user,
        working_dir: c["workingDir"].as_str().map(str::to_owned),
        env: Some(env),
        labels: Some(HashMap::from([(POD_LABEL.to_owned(), shared.id.clone())])),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: sc["readOnlyRootFilesystem"].as_bool(),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            memory,
            memory_swap: memory,
            tmpfs: Some(tmpfs.clone()),
            init: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let cname = format!("{}-{}", shared.id, name);
    let options = CreateContainerOptionsBuilder::default().name(&cname).build();
    let created = match shared.docker.create_container(Some(options), body).await {
        Ok(created) => created.id,
        Err(e) => panic!("the fake cannot make a container for pod {name}: {e}"),
    };
    shared
        .store
        .lock()
        .unwrap()
        .containers
        .insert(key, created.clone());
    if let Err(e) = shared.docker.start_container(&created, None).await {
        panic!("the fake cannot start the container of pod {name}: {e}");
    }
    // An emptyDir is open to all (0777), whatever the image has at its path
    // (Docker's tmpfs copies the image's folder and its mode).
    let mut chmod = vec!["chmod".to_owned(), "0777".to_owned()];
    chmod.extend(tmpfs.keys().cloned());
    let options = CreateExecOptions {
        cmd: Some(chmod),
        user: Some("0".into()),
        ..Default::default()
    };
    if let Ok(created_exec) = shared.docker.create_exec(&created, options).await {
        let _ = shared
            .docker
            .start_exec(
                &created_exec.id,
                Some(StartExecOptions {
                    detach: true,
                    ..Default::default()
                }),
            )
            .await;
        for _ in 0..100 {
            match shared.docker.inspect_exec(&created_exec.id).await {
                Ok(info) if info.running == Some(false) => break,
                _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }
    json_response(StatusCode::CREATED, &pod)
}

async fn delete_pod(State(shared): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let key = (ns, name.clone());
    let (pod, container) = {
        let mut store = shared.store.lock().unwrap();
        store.unpullable.remove(&key);
        (store.pods.remove(&key), store.containers.remove(&key))
    };
    if let Some(id) = container {
        remove(&shared.docker, &id).await;
    }
    match pod {
        Some(pod) => json_response(StatusCode::OK, &pod),
        None => status(404, "NotFound", format!("pods \"{name}\" not found")),
    }
}

async fn create_policy(State(shared): State<Shared>, Path(ns): Path<String>, body: String) -> Response {
    let Ok(mut policy) = serde_json::from_str::<Value>(&body) else {
        return status(400, "BadRequest", "the body is not JSON".into());
    };
    let name = policy["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let mut store = shared.store.lock().unwrap();
    store.bodies.push(policy.clone());
    let key = (ns.clone(), name.clone());
    if store.policies.contains_key(&key) {
        return status(
            409,
            "AlreadyExists",
            format!("networkpolicies.networking.k8s.io \"{name}\" already exists"),
        );
    }
    store.revision += 1;
    policy["metadata"]["resourceVersion"] = json!(store.revision.to_string());
    policy["metadata"]["namespace"] = json!(ns);
    store.policies.insert(key, policy.clone());
    json_response(StatusCode::CREATED, &policy)
}

async fn get_policy(State(shared): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let store = shared.store.lock().unwrap();
    match store.policies.get(&(ns, name.clone())) {
        Some(policy) => json_response(StatusCode::OK, policy),
        None => status(
            404,
            "NotFound",
            format!("networkpolicies.networking.k8s.io \"{name}\" not found"),
        ),
    }
}

async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
    )
}

async fn get_namespace(State(shared): State<Shared>, Path(ns): Path<String>) -> Response {
    let exists = ns == "default" || shared.store.lock().unwrap().namespaces.contains(&ns);
    if exists {
        json_response(
            StatusCode::OK,
            &json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}, "status": {"phase": "Active"}}),
        )
    } else {
        status(404, "NotFound", format!("namespaces \"{ns}\" not found"))
    }
}

/// A SelfSubjectAccessReview: allowed unless the test denied it.
async fn access_review(State(shared): State<Shared>, body: String) -> Response {
    let mut review: Value = serde_json::from_str(&body).unwrap();
    let attributes = &review["spec"]["resourceAttributes"];
    let mut what = format!(
        "{} {}",
        attributes["verb"].as_str().unwrap_or(""),
        attributes["resource"].as_str().unwrap_or("")
    );
    if let Some(sub) = attributes["subresource"].as_str() {
        what.push('/');
        what.push_str(sub);
    }
    let allowed = {
        let mut store = shared.store.lock().unwrap();
        store.bodies.push(review.clone());
        !store.denied.contains(&what)
    };
    review["status"] = json!({"allowed": allowed});
    json_response(StatusCode::CREATED, &review)
}

/// The exec subresource: a WebSocket upgrade, then the process in the
/// pod's container with its streams on channels.
async fn exec(
    State(shared): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    mut request: Request,
) -> Response {
    let Some(container) = shared
        .store
        .lock()
        .unwrap()
        .containers
        .get(&(ns, name.clone()))
        .cloned()
    else {
        return status(404, "NotFound", format!("pods \"{name}\" not found"));
    };
    let q = query_pairs(request.uri());
    let argv: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let flag = |key: &str| q.iter().any(|(k, v)| k == key && v == "true");
    let with_stdin = flag("stdin");
    let offered = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let wanted = if shared.v5 {
        "v5.channel.k8s.io"
    } else {
        "v4.channel.k8s.io"
    };
    let protocol = if offered.split(',').any(|p| p.trim() == wanted) {
        wanted
    } else if offered.split(',').any(|p| p.trim() == "v4.channel.k8s.io") {
        "v4.channel.k8s.io"
    } else {
        return status(
            400,
            "BadRequest",
            format!("no supported channel protocol in {offered:?}"),
        );
    };
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY).cloned() else {
        return status(400, "BadRequest", "not a WebSocket upgrade".into());
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let v5 = protocol == "v5.channel.k8s.io";
    shared.store.lock().unwrap().execs += 1;
    let on_upgrade = hyper::upgrade::on(&mut request);
    let docker = shared.docker.clone();
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        run_exec(docker, container, argv, with_stdin, v5, socket).await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
        .body(Body::empty())
        .unwrap()
}

async fn run_exec<S>(
    docker: Docker,
    container: String,
    argv: Vec<String>,
    with_stdin: bool,
    v5: bool,
    socket: tokio_tungstenite::WebSocketStream<S>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = socket.split();
    let send_status = |status: Value| Message::binary([vec![3u8], status.to_string().into_bytes()].concat());
    let options = CreateExecOptions {
        attach_stdin: Some(with_stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(argv.clone()),
        ..Default::default()
    };
    let started = match docker.create_exec(&container, options).await {
        Ok(created) => match docker
            .start_exec(&created.id, Some(StartExecOptions::default()))
            .await
        {
            Ok(StartExecResults::Attached { output, input }) => Some((created.id, output, input)),
            _ => None,
        },
        Err(_) => None,
    };
    let Some((exec_id, mut output, mut input)) = started else {
        let _ = sink
            .send(send_status(json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
                "message": format!("Internal error occurred: error executing command in container: failed to exec in container: {argv:?}")})))
            .await;
        let _ = sink.close().await;
        return;
    };
    // Client frames go to the process's stdin on their own task: output is
    // never held up by input.
    let feeder = tokio::spawn(async move {
        while let Some(Ok(frame)) = source.next().await {
            match frame {
                Message::Binary(bytes)
                    if bytes.first() == Some(&0) && input.write_all(&bytes[1..]).await.is_err() =>
                {
                    break
                }
                Message::Binary(bytes) if v5 && bytes.as_ref() == [255, 0] => {
                    let _ = input.shutdown().await;
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    });
    while let Some(item) = output.next().await {
        let frame = match item {
            Ok(bollard::container::LogOutput::StdOut { message }) => [vec![1u8], message.to_vec()].concat(),
            Ok(bollard::container::LogOutput::StdErr { message }) => [vec![2u8], message.to_vec()].concat(),
            Ok(_) => continue,
            Err(_) => break,
        };
        if sink.send(Message::binary(frame)).await.is_err() {
            feeder.abort();
            return;
        }
    }
    let code = docker
        .inspect_exec(&exec_id)
        .await
        .ok()
        .and_then(|info| info.exit_code)
        .unwrap_or(-1);
    let status = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command {argv:?}, exit code {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    };
    let _ = sink.send(send_status(status)).await;
    let _ = sink.close().await;
    feeder.abort();
}
