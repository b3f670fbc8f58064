use super::*;

const SIGNED: &str =
    "https://storage.example/bucket/obj?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=0123abcd";

#[test]
fn a_url_keeps_scheme_host_port_and_path_only() {
    let parsed = Url::parse("https://bot:s3cret@lfs.example:8443/a/b.bin?sig=abc#frag").unwrap();
    assert_eq!(url(&parsed), "https://lfs.example:8443/a/b.bin");
    assert_eq!(
        url(&Url::parse(SIGNED).unwrap()),
        "https://storage.example/bucket/obj"
    );
}

#[test]
fn the_query_goes_and_closing_punctuation_stays() {
    assert_eq!(
        urls_in(&format!("error sending request for url ({SIGNED})")),
        "error sending request for url (https://storage.example/bucket/obj)"
    );
    assert_eq!(
        urls_in(&format!("see {SIGNED}.")),
        "see https://storage.example/bucket/obj."
    );
}

#[test]
fn fragments_and_userinfo_go() {
    assert_eq!(
        urls_in("at https://h.example/p#access_token=xyz now"),
        "at https://h.example/p now"
    );
    assert_eq!(
        urls_in("cloning https://x-access-token:ghs_abc@github.example/o/r.git failed"),
        "cloning https://github.example/o/r.git failed"
    );
    assert_eq!(urls_in("http://user@h.example:81"), "http://h.example:81");
    assert_eq!(urls_in("http://h.example?key=k"), "http://h.example");
}

#[test]
fn every_url_in_a_text_is_redacted_and_the_rest_kept() {
    let text = format!(
        "first {SIGNED}, then \"http://u:p@127.0.0.1:9/x?y=z\" and <ftp://a.example/f?k=v>; done: no://"
    );
    assert_eq!(
        urls_in(&text),
        "first https://storage.example/bucket/obj, then \"http://127.0.0.1:9/x\" and <ftp://a.example/f>; done: no://"
    );
    let plain = "nothing here: a path /tmp/x?y and git@github.example:o/r.git";
    assert_eq!(urls_in(plain), plain);
}

#[test]
fn a_malformed_scheme_does_not_let_an_address_through() {
    assert_eq!(urls_in("9x://h/p?secret=1"), "9x://h/p");
    assert_eq!(urls_in("(://h/p?secret=1)"), "(://h/p)");
    assert!(!urls_in("https://h/p?sig=a)b").contains('b'));
}

/// A server that takes one connection and closes it unanswered.
async fn closing_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            drop(stream);
        }
    });
    addr
}

#[tokio::test]
async fn a_reqwest_error_says_what_failed_without_the_query() {
    let addr = closing_server().await;
    let address = format!("http://bot:pw@{addr}/objects/abc?X-Amz-Signature=feedface#f");
    let err = reqwest::Client::new().get(&address).send().await.unwrap_err();
    assert!(
        err.to_string().contains("feedface"),
        "reqwest itself says it: {err}"
    );
    let said = http_error(&err);
    assert!(!said.contains("feedface") && !said.contains("pw@"), "{said}");
    assert!(said.contains(&format!("http://{addr}/objects/abc")), "{said}");
    // The cause reqwest's own text leaves out is there.
    assert!(
        said.len() > format!("error sending request for url (http://{addr}/objects/abc)").len(),
        "{said}"
    );
}
