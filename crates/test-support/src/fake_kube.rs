//! A fake Kubernetes API server for `coordination.k8s.io/v1` Leases,
//! faithful where the claim protocol depends on it: objects stored with
//! real resourceVersions (one counter for the whole store, as etcd's
//! revision), create answers 409 AlreadyExists for a taken name, a replace
//! or a delete whose resourceVersion (precondition) is stale answers 409
//! Conflict, label selectors on list, and every error a `Status` object in
//! Kubernetes' shape. Faults: the next N requests answer a chosen code.

use super::fake_http::serve;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

const PREFIX: &str = "/apis/coordination.k8s.io/v1/namespaces/";

#[derive(Default)]
struct State {
    /// (namespace, name) -> the stored object.
    leases: BTreeMap<(String, String), Value>,
    revision: u64,
    /// Codes the next requests answer with, first first.
    faults: Vec<u16>,
    /// Every request, as "METHOD path".
    requests: Vec<String>,
    /// Every body a client sent.
    bodies: Vec<Value>,
}

#[derive(Clone)]
pub struct FakeKube {
    state: Arc<Mutex<State>>,
    server: Arc<MockServer>,
}

impl FakeKube {
    pub async fn start() -> FakeKube {
        let state = Arc::new(Mutex::new(State::default()));
        let server = serve(Responder { state: state.clone() }).await;
        FakeKube {
            state,
            server: Arc::new(server),
        }
    }

    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// A client of this server, in namespace `default`.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url().parse().unwrap());
        forgehand::replicas::kube_leases::client_from(config).unwrap()
    }

    /// The next `count` requests answer `code` (500, 429, ...).
    pub fn fail_next(&self, count: usize, code: u16) {
        self.state
            .lock()
            .unwrap()
            .faults
            .extend(std::iter::repeat_n(code, count));
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .leases
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Rewrites the stored Lease's `renewTime` and `acquireTime` as a
    /// replica whose clock is `offset_secs` off would have written them.
    pub fn skew_times(&self, namespace: &str, name: &str, offset_secs: i64) {
        let mut state = self.state.lock().unwrap();
        let lease = state
            .leases
            .get_mut(&(namespace.to_owned(), name.to_owned()))
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let skewed = chrono::DateTime::from_timestamp(now + offset_secs, 0)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        lease["spec"]["renewTime"] = json!(skewed);
        lease["spec"]["acquireTime"] = json!(skewed);
    }

    pub fn leases(&self) -> Vec<Value> {
        self.state.lock().unwrap().leases.values().cloned().collect()
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.state.lock().unwrap().bodies.clone()
    }
}

struct Responder {
    state: Arc<Mutex<State>>,
}

/// A `Status` object as the API server sends it.
fn status(code: u16, reason: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": if code < 300 { "Success" } else { "Failure" },
        "message": message,
        "reason": reason,
        "details": {"group": "coordination.k8s.io", "kind": "leases"},
        "code": code,
    }))
}

fn not_found(name: &str) -> ResponseTemplate {
    status(
        404,
        "NotFound",
        &format!("leases.coordination.k8s.io \"{name}\" not found"),
    )
}

fn conflict(name: &str) -> ResponseTemplate {
    status(
        409,
        "Conflict",
        &format!("Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"),
    )
}

/// Whether `lease` carries every `key=value` of a label selector.
fn selected(lease: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        lease["metadata"]["labels"][key].as_str() == Some(value)
    })
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut state = self.state.lock().unwrap();
        let path = req.url.path().to_owned();
        state.requests.push(format!("{} {path}", req.method.as_str()));
        if !req.body.is_empty() {
            if let Ok(body) = serde_json::from_slice::<Value>(&req.body) {
                state.bodies.push(body);
            }
        }
        if !state.faults.is_empty() {
            let code = state.faults.remove(0);
            let reason = if code == 429 {
                "TooManyRequests"
            } else {
                "InternalError"
            };
            return status(code, reason, "injected fault").insert_header("Retry-After", "0");
        }
        let Some(rest) = path.strip_prefix(PREFIX) else {
            return not_found(&path);
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let (namespace, name) = match parts.as_slice() {
            [ns, "leases"] => (ns.to_string(), None),
            [ns, "leases", name] => (ns.to_string(), Some(name.to_string())),
            _ => return not_found(&path),
        };
        let method = req.method.as_str();
        match (method, name) {
            ("GET", None) => {
                let selector = super::fake_http::query(req)
                    .remove("labelSelector")
                    .unwrap_or_default();
                let items: Vec<Value> = state
                    .leases
                    .iter()
                    .filter(|((ns, _), lease)| *ns == namespace && selected(lease, &selector))
                    .map(|(_, lease)| lease.clone())
                    .collect();
                let revision = state.revision.to_string();
                ResponseTemplate::new(200).set_body_json(json!({
                    "kind": "LeaseList",
                    "apiVersion": "coordination.k8s.io/v1",
                    "metadata": {"resourceVersion": revision},
                    "items": items,
                }))
            }
            ("POST", None) => {
                let mut lease: Value = match serde_json::from_slice(&req.body) {
                    Ok(v) => v,
                    Err(e) => return status(400, "BadRequest", &e.to_string()),
                };
                let name = lease["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                if lease["metadata"]["resourceVersion"].is_string() {
                    return status(
                        400,
                        "BadRequest",
                        "resourceVersion should not be set on objects to be created",
                    );
                }
                let key = (namespace.clone(), name.clone());
                if state.leases.contains_key(&key) {
                    return status(
                        409,
                        "AlreadyExists",
                        &format!("leases.coordination.k8s.io \"{name}\" already exists"),
                    );
                }
                state.revision += 1;
                let metadata = lease["metadata"].as_object_mut().unwrap();
                metadata.insert("resourceVersion".into(), json!(state.revision.to_string()));
                metadata.insert("uid".into(), json!(format!("uid-{}", state.revision)));
                metadata.insert("namespace".into(), json!(namespace));
                lease["kind"] = json!("Lease");
                lease["apiVersion"] = json!("coordination.k8s.io/v1");
                state.leases.insert(key, lease.clone());
                ResponseTemplate::new(201).set_body_json(lease)
            }
            ("GET", Some(name)) => match state.leases.get(&(namespace, name.clone())) {
                Some(lease) => ResponseTemplate::new(200).set_body_json(lease),
                None => not_found(&name),
            },
            ("PUT", Some(name)) => {
                let mut lease: Value = match serde_json::from_slice(&req.body) {
                    Ok(v) => v,
                    Err(e) => return status(400, "BadRequest", &e.to_string()),
                };
                let key = (namespace.clone(), name.clone());
                let Some(stored) = state.leases.get(&key) else {
                    return not_found(&name);
                };
                if lease["metadata"]["name"].as_str() != Some(name.as_str()) {
                    return status(
                        400,
                        "BadRequest",
                        "the name of the object does not match the name on the URL",
                    );
                }
                // Leases allow an unconditional update (no resourceVersion sent).
                let sent = lease["metadata"]["resourceVersion"].as_str().unwrap_or_default();
                if !sent.is_empty()
                    && sent != stored["metadata"]["resourceVersion"].as_str().unwrap_or_default()
                {
                    return conflict(&name);
                }
                let uid = stored["metadata"]["uid"].clone();
                state.revision += 1;
                let metadata = lease["metadata"].as_object_mut().unwrap();
                metadata.insert("resourceVersion".into(), json!(state.revision.to_string()));
                metadata.insert("uid".into(), uid);
                metadata.insert("namespace".into(), json!(namespace));
                lease["kind"] = json!("Lease");
                lease["apiVersion"] = json!("coordination.k8s.io/v1");
                state.leases.insert(key, lease.clone());
                ResponseTemplate::new(200).set_body_json(lease)
            }
            ("DELETE", Some(name)) => {
                let key = (namespace, name.clone());
                let Some(stored) = state.leases.get(&key) else {
                    return not_found(&name);
                };
                let options: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                if let Some(wanted) = options["preconditions"]["resourceVersion"].as_str() {
                    if stored["metadata"]["resourceVersion"].as_str() != Some(wanted) {
                        return status(
                            409,
                            "Conflict",
                            &format!("Precondition failed: ResourceVersion in precondition: {wanted}, ResourceVersion in object meta: {}", stored["metadata"]["resourceVersion"]),
                        );
                    }
                }
                state.leases.remove(&key);
                status(200, "", "")
            }
            _ => status(
                405,
                "MethodNotAllowed",
                &format!("{method} is not supported on leases"),
            ),
        }
    }
}
