//! Each rule against its published format, and ordinary text (hashes,
//! UUIDs, base64 in code, build output) that must stay as it is. Test
//! credentials are assembled at run time so no scanner mistakes this file
//! for a leak.

use super::*;
use std::collections::BTreeSet;

const ALNUM: &[u8] = b"aZ3kQ9wE1rT7yU5iO2pA8sD4fG6hJ0lKxCvBnMqWeRtYuIoPzXcVbNmLjHgFdSa";

/// `n` letters and digits, mixed, different for each `seed`.
fn body(n: usize, seed: usize) -> String {
    (0..n)
        .map(|i| ALNUM[(i * 7 + seed * 13 + 3) % ALNUM.len()] as char)
        .collect()
}

fn hex(n: usize) -> String {
    (0..n)
        .map(|i| b"0123456789abcdef"[(i * 5 + 1) % 16] as char)
        .collect()
}

/// `text` masks `secret` by `rule`: the secret is gone, the mask names the rule.
fn assert_masked(text: &str, secret: &str, rule: &str) {
    let masked = mask(text);
    assert!(
        !masked.text.contains(secret),
        "{rule}: {secret} is still in {:?}",
        masked.text
    );
    assert!(
        masked.text.contains(&format!("[masked: {rule}]")),
        "{rule} did not mask {text:?}: {:?} by {:?}",
        masked.text,
        masked.rules
    );
    assert!(masked.rules.contains(rule), "{:?}", masked.rules);
    // Masking again changes nothing: a mask never reads as a credential.
    assert_eq!(mask(&masked.text).text, masked.text);
}

fn assert_kept(text: &str) {
    let masked = mask(text);
    assert_eq!(masked.text, text, "masked by {:?}", masked.rules);
    assert!(masked.rules.is_empty());
}

/// (rule, text, the secret in it): one or more true positives per rule.
fn positives() -> Vec<(&'static str, String, String)> {
    let mut all = Vec::new();
    let mut add = |rule: &'static str, text: String, secret: String| all.push((rule, text, secret));
    // GitHub.
    for (rule, prefix) in [
        ("github-pat", "ghp_"),
        ("github-oauth", "gho_"),
        ("github-app-token", "ghu_"),
        ("github-app-token", "ghs_"),
        ("github-refresh-token", "ghr_"),
    ] {
        let token = format!("{prefix}{}", body(36, 1));
        add(rule, format!("REGISTRY_TOKEN={token}\n"), token);
    }
    let fine = format!("github_pat_{}_{}", body(22, 2), body(59, 3));
    add("github-fine-grained-pat", format!("token: {fine}"), fine);
    // An installation token in the URL a job clones with.
    let installation = format!("ghs_{}", body(36, 4));
    add(
        "github-app-token",
        format!("git clone https://x-access-token:{installation}@github.com/o/r.git"),
        installation,
    );
    // GitLab.
    for (rule, token) in [
        ("gitlab-pat", format!("glpat-{}", body(20, 5))),
        ("gitlab-pat", format!("glpat-{}.01{}", body(27, 6), "0a1b2c3")),
        ("gitlab-deploy-token", format!("gldt-{}", body(20, 7))),
        ("gitlab-runner-token", format!("glrt-{}", body(20, 8))),
        ("gitlab-runner-token", format!("glrtr-{}", body(20, 9))),
        ("gitlab-runner-token", format!("GR1348941{}", body(20, 10))),
        ("gitlab-cicd-job-token", format!("glcbt-64_{}", body(20, 11))),
        ("gitlab-trigger-token", format!("glptt-{}", hex(40))),
        ("gitlab-token", format!("gloas-{}", hex(64))),
        ("gitlab-token", format!("glft-{}", body(20, 12))),
    ] {
        add(rule, format!("echo \"{token}\""), token);
    }
    // AWS.
    let key_id = "AKIAIOSFODNN7QWERTY2".to_owned();
    add(
        "aws-access-token",
        format!("aws_access_key_id = {key_id}"),
        key_id,
    );
    let temporary = "ASIAZ2XQ3W4E5R6T7Y2U".to_owned();
    add("aws-access-token", format!("[{temporary}]"), temporary);
    let secret_key = format!("{}/{}+{}", body(18, 13), body(10, 14), body(10, 15));
    add(
        "aws-secret-access-key",
        format!("AWS_SECRET_ACCESS_KEY={secret_key}\n"),
        secret_key.clone(),
    );
    add(
        "aws-secret-access-key",
        format!("aws_secret_access_key: \"{secret_key}\""),
        secret_key,
    );
    // Slack.
    let bot = format!("xoxb-1234567890-1234567890123-{}", body(24, 16));
    add("slack-token", format!("SLACK_BOT={bot}"), bot);
    let user = format!("xoxp-1234567890-1234567890-1234567890123-{}", body(32, 17));
    add("slack-token", user.clone(), user);
    let app = format!("xapp-1-A0123456789-1234567890123-{}", hex(64));
    add("slack-app-token", app.clone(), app);
    let hook = format!("hooks.slack.com/services/T01234567/B01234567/{}", body(24, 18));
    add("slack-webhook-url", format!("curl -X POST https://{hook}"), hook);
    // OpenAI.
    let project = format!("sk-proj-{}-{}_{}", body(40, 19), body(30, 20), body(20, 21));
    add("openai-api-key", format!("OPENAI={project}"), project);
    let legacy = format!("sk-{}T3BlbkFJ{}", body(20, 22), body(20, 23));
    add("openai-api-key", format!("key {legacy} ok"), legacy);
    let service = format!("sk-svcacct-{}", body(60, 24));
    add("openai-api-key", service.clone(), service);
    // Anthropic.
    let anthropic = format!("sk-ant-api03-{}-{}AA", body(60, 25), body(32, 26));
    add("anthropic-api-key", format!("x-api-key: {anthropic}"), anthropic);
    let admin = format!("sk-ant-admin01-{}", body(93, 27));
    add("anthropic-api-key", admin.clone(), admin);
    // Google.
    let api_key = format!("AIza{}", body(35, 28));
    add("gcp-api-key", format!("?key={api_key}&q=1"), api_key);
    let client_secret = format!("GOCSPX-{}", body(28, 29));
    add("google-oauth-client-secret", client_secret.clone(), client_secret);
    let access = format!("ya29.{}", body(80, 30));
    add(
        "google-oauth-access-token",
        format!("Bearer-less {access}"),
        access,
    );
    // Private keys: a PEM block, one inside a JSON string, one cut before its END.
    let base64_line = body(64, 31);
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{base64_line}\n{}\n-----END RSA PRIVATE KEY-----",
        body(40, 32)
    );
    add("private-key", format!("key:\n{pem}\ndone"), base64_line.clone());
    let escaped = format!("-----BEGIN PRIVATE KEY-----\\n{base64_line}\\n-----END PRIVATE KEY-----\\n");
    add(
        "private-key",
        format!("{{\"key\": \"{escaped}\"}}"),
        base64_line.clone(),
    );
    let openssh = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{base64_line}\n{}\n",
        body(70, 33)
    );
    add("private-key", format!("$ cat id_ed25519\n{openssh}"), base64_line);
    // JWT.
    let jwt = format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.{}",
        body(43, 34)
    );
    add("jwt", format!("id_token={jwt}"), jwt);
    // Registries and other services.
    for (rule, token) in [
        ("npm-access-token", format!("npm_{}", body(36, 35))),
        (
            "pypi-upload-token",
            format!("pypi-AgEIcHlwaS5vcmc{}", body(60, 36)),
        ),
        ("docker-hub-pat", format!("dckr_pat_{}", body(27, 37))),
        ("huggingface-access-token", format!("hf_{}", body(34, 38))),
        ("stripe-access-token", format!("sk_live_{}", body(24, 39))),
        ("stripe-access-token", format!("rk_test_{}", body(24, 40))),
        (
            "sendgrid-api-token",
            format!("SG.{}.{}", body(22, 41), body(43, 42)),
        ),
        ("digitalocean-token", format!("dop_v1_{}", hex(64))),
        ("shopify-token", format!("shpat_{}", hex(32))),
        ("vault-token", format!("hvs.{}", body(95, 43))),
        (
            "age-secret-key",
            format!(
                "AGE-SECRET-KEY-1{}",
                "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L".repeat(2)[..58].to_owned()
            ),
        ),
    ] {
        add(rule, format!("{token}\n"), token);
    }
    // Assignments, headers, URLs.
    add(
        "authorization-header",
        "curl -H 'Authorization: Bearer abc.def-123_456' https://api.example.org".into(),
        "abc.def-123_456".into(),
    );
    add(
        "authorization-header",
        "authorization: Basic dXNlcjpwYXNzd29yZA==".into(),
        "dXNlcjpwYXNzd29yZA==".into(),
    );
    add(
        "url-credentials",
        "DATABASE_URL=postgres://app:pa55-w0rd@db:5432/app".into(),
        "pa55-w0rd".into(),
    );
    for (text, secret) in [
        ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
        ("  \"password\": \"S3cr3t!pass\",", "S3cr3t!pass"),
        ("export API_KEY='Zk29xLq8Wm3nB7'", "Zk29xLq8Wm3nB7"),
        ("client_secret: AbCd1234EfGh5678", "AbCd1234EfGh5678"),
        ("mysql --password=p4ssw0rd! db", "p4ssw0rd!"),
        ("{\\\"token\\\": \\\"abc123def456\\\"}", "abc123def456"),
        ("SENTRY_AUTH_TOKEN := Q1w2E3r4T5y6", "Q1w2E3r4T5y6"),
        ("private_key => 'MIIEvQIBADANBgkq'", "MIIEvQIBADANBgkq"),
    ] {
        add("secret-assignment", text.to_owned(), secret.to_owned());
    }
    all
}

#[test]
fn the_rules_compile_and_each_has_a_true_positive() {
    let rules = rules().expect("rules.yaml compiles");
    let tested: BTreeSet<&str> = positives().iter().map(|(rule, _, _)| *rule).collect();
    let all: BTreeSet<&str> = rules.rules().iter().map(|r| r.id.as_str()).collect();
    assert_eq!(all, tested, "every rule has a test here, and every test a rule");
}

#[test]
fn every_published_format_is_masked() {
    for (rule, text, secret) in positives() {
        assert_masked(&text, &secret, rule);
    }
}

#[test]
fn ordinary_text_stays_as_it_is() {
    for text in [
        // Commit hashes, UUIDs, checksums.
        "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
        "HEAD is now at abc1234 Fix the parser",
        "request 123e4567-e89b-12d3-a456-426614174000 failed",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "cache-key: Linux-cargo-3f786850e387550fdab836ed7e6dc881",
        // Base64 in code and data.
        "const LOGO: &str = \"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\";",
        "data = base64.b64decode(\"SGVsbG8sIHdvcmxkIQ==\")",
        "let key = \"c2VjcmV0LWtleS0xMjM0NTY3OA==\";",
        // Build and test output that names secrets without holding one.
        "test auth::token_expires_after_an_hour ... ok",
        "error[E0425]: cannot find value `token` in this scope",
        "    let token = self.token;",
        "password = os.environ[\"DB_PASSWORD\"]",
        "password: must be at least 8 characters",
        "max_tokens: 4096",
        "token_count: 123456789",
        "   Compiling secret-service v3.0.1",
        "secret: ${{ secrets.REGISTRY_TOKEN }}",
        "password=********",
        "PWD=/workspace/project\nOLDPWD=/home/agent\nSECRET_FILE=./run/secrets/Db_2",
        "Token: expected identifier",
        "Authorization: Bearer ***",
        "with: { token: \"${TOKEN}\" }",
        // URLs, keys that are not private, and near misses of prefixes.
        "https://github.com/o/r.git and git@github.com:o/r.git and http://[::1]:8080/x",
        "https://${USER}:${PASSWORD}@registry.example.org/simple",
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2VydGlmaWNhdGUgZm9yIHRlc3Rz\n-----END CERTIFICATE-----",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
        "const HEADER: &str = \"-----BEGIN RSA PRIVATE KEY-----\";",
        "task-runner desk-lamp sk-learn ghp_short AKIA",
        "eyJhbGciOiJIUzI1NiJ9 is a header alone",
        "",
    ] {
        assert_kept(text);
    }
}

#[test]
fn masks_keep_the_text_around_them_whole() {
    let token = format!("ghp_{}", body(36, 44));
    let text = format!("é{token}ü and glpat-{} 🎉", body(20, 45));
    let masked = mask(&text);
    assert_eq!(masked.text, "é[masked: github-pat]ü and [masked: gitlab-pat] 🎉");
    assert_eq!(
        masked.rules.iter().map(String::as_str).collect::<Vec<_>>(),
        ["github-pat", "gitlab-pat"]
    );
    // Two rules finding one span make one mask, named by the rule listed
    // first (a provider's before the generic ones).
    let header = format!("Authorization: token ghp_{}", body(36, 46));
    assert_eq!(mask(&header).text, "Authorization: token [masked: github-pat]");
    // Overlapping spans are one mask, named by the one that starts first.
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
        body(64, 47)
    );
    let text = format!("{{\"password\": \"{pem}\"}}");
    assert_eq!(mask(&text).text, "{\"password\": \"[masked: private-key]\"}");
}

#[test]
fn a_bad_rule_is_refused_with_its_id() {
    let bad = "rules:\n  - id: broken\n    format: f\n    regex: '(unclosed'\n";
    let err = RuleSet::parse(bad).err().expect("refused").to_string();
    assert!(
        err.contains("masking rule broken") && err.contains("regex"),
        "{err}"
    );
    let twice = "rules:\n  - {id: a, format: f, regex: x}\n  - {id: a, format: f, regex: y}\n";
    let err = RuleSet::parse(twice).err().expect("refused").to_string();
    assert!(err.contains("comes twice"), "{err}");
    let unknown = "rules:\n  - {id: a, format: f, regex: x, colour: red}\n";
    assert!(RuleSet::parse(unknown).is_err());
}
